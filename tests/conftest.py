"""Shared fixtures: the project's rulebook, workloads and a checker over them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cakegov.check.docs_url import ENV as DOC_BASE_ENV
from cakegov.check.rulebook import Rulebook
from cakegov.check.runner import Checker
from cakegov.corpus.workloads import load_workloads

from .shared import (
    SharedStore,
    content_key,
    digest_bytes,
    rulebook_identity,
    session_store,
    workloads_identity,
)

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "rules"
CORPUS = ROOT / "corpus"
WORKLOADS = CORPUS / "workloads"


def pytest_configure(config):
    """Hypothesis's profile for this run (tests/profiles.py)."""
    from . import profiles

    profiles.activate(profiles.choose(config.option.markexpr or ""))


def pytest_report_header(config):
    from . import profiles

    return f"hypothesis profile: {profiles.current()} (tests/profiles.py)"


@pytest.fixture(scope="session", autouse=True)
def _check_cache(tmp_path_factory):
    """`cakegov check` processes the tests start remember their results in a directory of
    this session, never in the user's cache (cakegov/check/result_cache.py)."""
    import os

    saved = os.environ.get("CAKEGOV_CACHE_DIR")
    os.environ["CAKEGOV_CACHE_DIR"] = str(tmp_path_factory.mktemp("check-cache"))
    yield
    if saved is None:
        os.environ.pop("CAKEGOV_CACHE_DIR", None)
    else:
        os.environ["CAKEGOV_CACHE_DIR"] = saved


@pytest.fixture(scope="session")
def rulebook() -> Rulebook:
    return Rulebook.load(RULES)


@pytest.fixture(scope="session")
def workloads():
    return load_workloads(WORKLOADS)


_CHECK_BYTES = Checker.check_bytes  # the computation, whatever a test patches later


def shared_check(store: SharedStore, checker: Checker, data: bytes, file: str):
    """`checker.check_bytes(data, file)`, computed once per session (tests/shared.py)."""
    key = content_key("check", digest_bytes(data), file, checker.target_override,
                      rulebook_identity(checker.rulebook, checker.active_rules()),
                      workloads_identity(checker.workloads),
                      os.environ.get(DOC_BASE_ENV))  # findings carry their rule's doc URL
    return store.get(key, lambda: _CHECK_BYTES(checker, data, file))


class SharedChecker(Checker):
    """A Checker whose results are computed once per test session: `check_bytes` of the
    same bytes, under the same name, with the same rulebook, rules, target and workloads
    returns what the first call (in any xdist worker) computed (tests/shared.py). The
    analyses are deterministic, so this changes no result; a test that is about the
    checker giving the same result twice uses `fresh_checker`."""

    store: SharedStore | None = None

    def check_bytes(self, data: bytes, file: str):
        if self.store is None:
            return _CHECK_BYTES(self, data, file)
        return shared_check(self.store, self, data, file)


@pytest.fixture(scope="session")
def check_store(tmp_path_factory) -> SharedStore:
    return session_store(tmp_path_factory, "check")


@pytest.fixture(scope="session")
def checker(rulebook, workloads, check_store) -> Checker:
    """The project's rulebook with preview rules; results shared by the session."""
    shared = SharedChecker(rulebook, workloads, preview=True)
    shared.store = check_store
    return shared


@pytest.fixture(scope="session")
def fresh_checker(rulebook, workloads) -> Checker:
    """Like `checker`, but every call computes: for tests of the checker's determinism."""
    return Checker(rulebook, workloads, preview=True)


@pytest.fixture
def shared_checks(monkeypatch, check_store):
    """Every Checker the test builds (the CLI's included) answers from the session's
    shared results (see SharedChecker)."""

    def check_bytes(self, data: bytes, file: str):
        return shared_check(check_store, self, data, file)

    monkeypatch.setattr(Checker, "check_bytes", check_bytes)
    return check_store


@pytest.fixture(scope="session")
def crosscheck_rows(rulebook, workloads, tmp_path_factory, check_store):
    """rows(paths, seeds=3): the cross-check rows (cakegov/sim/crosscheck.py) of every
    schedule under `paths`, named relative to the project, each computed once per session
    (checking included: the check is shared with `checker`)."""
    from cakegov.check.runner import expand_paths
    from cakegov.sim.crosscheck import crosscheck

    store = session_store(tmp_path_factory, "crosscheck")
    stable = Checker(rulebook, workloads)  # the rules crosscheck() runs
    identity = [rulebook_identity(rulebook, stable.active_rules()),
                workloads_identity(workloads)]

    def one(path: Path, seeds: int):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(Checker, "check_bytes",
                          lambda self, data, file: shared_check(check_store, self, data, file))
            (row,) = crosscheck([path], rulebook, workloads, seeds=seeds, root=ROOT)
        return row

    def rows(paths, seeds: int = 3):
        return store.map(
            expand_paths(paths),
            key=lambda p: content_key("crosscheck", digest_bytes(p.read_bytes()), str(p),
                                      str(ROOT), seeds, identity),
            compute=lambda p: one(p, seeds))

    return rows
