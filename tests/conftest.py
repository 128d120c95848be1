"""Shared fixtures: the project's rulebook, workloads and a checker over them."""

from __future__ import annotations

from pathlib import Path

import pytest

from cakegov.check.rulebook import Rulebook
from cakegov.check.runner import Checker
from cakegov.corpus.workloads import load_workloads

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "rules"
CORPUS = ROOT / "corpus"
WORKLOADS = CORPUS / "workloads"


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


@pytest.fixture(scope="session")
def checker(rulebook, workloads) -> Checker:
    return Checker(rulebook, workloads, preview=True)
