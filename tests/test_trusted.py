"""The trusted recomputation (cakegov/govern/trusted.py): unchanged rules never share a
process with proposed code, and a candidate result that needs proposed code is marked."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cakegov.govern import trusted

from .test_propose import EXAMPLE, project, propose, rule_file, template  # noqa: F401

DROP_R005 = '''
import cakegov.check.runner as _runner

_inner = _runner.Checker._run


def _quiet(rules, ctx, findings, file):
    _inner(rules, ctx, findings, file)
    findings[:] = [f for f in findings if f.code != "R005"]


_runner.Checker._run = staticmethod(_quiet)
'''


def _bump(path: Path, patch: str) -> None:
    text = path.read_text()
    major, minor, micro = re.search(r'VERSION = "(\d+)\.(\d+)\.(\d+)"', text).groups()
    text = text.replace(f'VERSION = "{major}.{minor}.{micro}"',
                        f'VERSION = "{major}.{minor}.{int(micro) + 1}"')
    path.write_text(text + patch)


@pytest.mark.slow
def test_a_rule_that_silences_an_unchanged_rule_is_blocked(project, tmp_path):  # noqa: F811
    """At import, the proposed rule wraps the engine so that R005's findings vanish. In the
    contained run they do; the trusted recomputation (no proposed code loaded) still has
    them, so the candidate keeps its catch and the proposal is blocked as divergent."""
    path = rule_file(tmp_path / "quiet-r005.py", "R090", "quiet-r005", "return\nyield\n")
    path.write_text(path.read_text() + DROP_R005)  # module level: it runs at import
    code, data, md = propose(str(path), "--no-record")
    assert code == 1
    [blocker] = [b for b in data["blockers"] if b["kind"] == "untrusted-divergence"]
    assert blocker["files"] == ["corpus/invalid/scale/threads_over_limit.cake"]
    assert "R005" in blocker["message"] and "missing from the contained run" in \
        blocker["message"]
    # the trusted result counts: the catch is not lost
    assert not any(i["kind"] == "lost_catch" for f in data["flips"] for i in f["items"])
    assert "disagrees with the trusted recomputation" in md


@pytest.mark.slow
def test_a_primitive_patching_the_engine_is_caught_on_schedules_that_do_not_use_it(project):  # noqa: F811
    """A proposed primitive runs contained as a whole; schedules that do not use it are
    recomputed by trusted code and must agree, so its patch shows as a divergence."""
    path = project / "rules" / "primitives" / "sync_cta.py"
    _bump(path, DROP_R005)
    code, data, _ = propose(str(path), "--no-record")
    assert code == 1
    [blocker] = [b for b in data["blockers"] if b["kind"] == "untrusted-divergence"]
    assert blocker["files"] == ["corpus/invalid/scale/threads_over_limit.cake"]
    [note] = [n for n in data["notes"] if "came from proposed code" in n]
    count, listed = re.fullmatch(r"(\d+) candidate results? came from proposed code "
                                 r"\([^)]*\): (.*)", note).groups()
    listed = listed.split(", ")
    # exactly the schedules that use the proposed primitive come from the contained run
    assert int(count) == len(listed) and "corpus/valid/scale/manual_init_elected_use.cake" \
        in listed and "corpus/invalid/scale/threads_over_limit.cake" not in listed
    assert all("lm.sync_cta(" in (project / rel).read_text() for rel in listed)


@pytest.mark.slow
def test_an_honest_primitive_change_marks_only_its_users(project):  # noqa: F811
    path = project / "rules" / "primitives" / "sync_cta.py"
    _bump(path, "\n# reworded, same behaviour\n")
    code, data, _ = propose(str(path), "--no-record")
    # a changed primitive is the language's semantics: a contract change, nothing else
    assert code == 1 and [b["kind"] for b in data["blockers"]] == ["contract-change"], \
        data["blockers"]
    assert data["blockers"][0]["files"] == ["rules/primitives/sync_cta.py"]
    code, data, _ = propose(str(path), "--no-record", "--accept-contract",
                            data["contract_digest"])
    assert not [b for b in data["blockers"] if b["kind"] == "untrusted-divergence"]
    assert code == 0, data["blockers"]
    [note] = [n for n in data["notes"] if "came from proposed code" in n]
    assert "manual_init_elected_use.cake" in note and "threads_over_limit" not in note


@pytest.mark.slow
def test_an_honest_rule_is_recomputed_by_trusted_code(project):  # noqa: F811
    code, data, md = propose(EXAMPLE, "--no-record")
    assert code == 0, data["blockers"]
    assert [f["source"] for f in data["flips"]] == ["trusted"]
    assert "candidate result recomputed by trusted code" in md
    assert not any("came from proposed code" in n for n in data["notes"])


def test_the_trusted_rulebook_holds_only_unchanged_plugins(tmp_path):
    base, cand = tmp_path / "base", tmp_path / "cand"
    for d, files in ((base, {"checks/a.py": "A", "checks/b.py": "B", "targets/t.toml": "T"}),
                     (cand, {"checks/a.py": "A", "checks/b.py": "B2", "checks/c.py": "C",
                             "targets/t.toml": "T2"})):
        for rel, text in files.items():
            (d / rel).parent.mkdir(parents=True, exist_ok=True)
            (d / rel).write_text(text)
    from cakegov.govern.cache import plugin_hashes

    hashes = {"base": plugin_hashes(base), "candidate": plugin_hashes(cand)}
    info = {"rules": [
        {"code": "X002", "name": "b", "version": "1.0.0", "severity": "blocking",
         "authority": "legality", "category": "test", "status": "stable", "phase": "main",
         "relpath": "checks/b.py", "sha256": "", "doc": ""},
        {"code": "X001", "name": "a", "version": "1.0.0", "severity": "blocking",
         "authority": "legality", "category": "test", "status": "stable", "phase": "main",
         "relpath": "checks/a.py", "sha256": "", "doc": ""},  # unchanged: no stand-in
        {"code": "bad", "relpath": "checks/c.py"},  # not loadable: dropped
    ]}
    plan = trusted.prepare(base, hashes, info, tmp_path / "t")
    assert plan is not None
    assert plan.proposed == ["checks/b.py", "checks/c.py", "targets/t.toml"]
    assert sorted(p.relative_to(plan.rules).as_posix() for p in plan.rules.rglob("*.*")) \
        == ["checks/a.py"]
    assert (plan.rules / "checks/a.py").read_text() == "A"
    assert [s["code"] for s in plan.stubs] == ["X002"] and plan.targets == ["t"]
    same = {"base": hashes["base"], "candidate": hashes["base"]}
    assert trusted.prepare(base, same, info, tmp_path / "u") is None


@pytest.mark.slow
def test_the_replay_covers_a_repair_search_of_more_than_64_rechecks(tmp_path):
    """The repair search of a persistent FA3 schedule re-checks 72 edited sources, so the
    engine calls a proposed structural rule 73 times there. The trusted recomputation must
    replay every one of them: a replay cut at 64 calls (as it was) made the trusted run's
    65th call find no data, and the example proposal was blocked as divergent."""
    import shutil

    from cakegov.check.context import MAX_RULE_CALLS
    from cakegov.check.rulebook import Rulebook
    from cakegov.corpus.labels import blind
    from cakegov.corpus.workloads import load_workloads
    from cakegov.govern import worker
    from cakegov.govern.cache import plugin_hashes
    from cakegov.govern.judge import _replay_data

    from .conftest import CORPUS, ROOT, RULES, WORKLOADS

    cand = tmp_path / "cand"
    shutil.copytree(RULES, cand)
    shutil.copyfile(ROOT / EXAMPLE, cand / "checks" / Path(EXAMPLE).name)
    case = tmp_path / "case-00001.cake"
    case.write_text(blind((CORPUS / "invalid" / "attention" /
                           "fa3_persistent_kv_restart.cake").read_text()))
    wls = load_workloads(WORKLOADS)

    def run(rules: Path, extra: dict) -> dict:
        events: list[dict] = []

        class Channel:
            @staticmethod
            def emit(ev: dict) -> None:
                if ev.get("ev") == "result":
                    events.append(ev)

        job = {"rules": str(rules), "time_limit_s": 600, "files": [[case.name, str(case)]],
               **extra}
        worker.check_files(job, Rulebook.load(rules), wls, Channel())
        [event] = events
        return event

    contained = run(cand, {"record": ["*"]})
    info = worker.describe(Rulebook.load(cand))
    plan = trusted.prepare(RULES, {"base": plugin_hashes(RULES),
                                   "candidate": plugin_hashes(cand)}, info, tmp_path / "t")
    assert plan is not None and [s["code"] for s in plan.stubs] == ["R020"]
    replay = _replay_data(contained, plan.stubs, case.name)
    assert 64 < len(contained["calls"]["R020"]) == len(replay["R020"]) <= MAX_RULE_CALLS
    mine = run(plan.rules, {"stubs": plan.stubs, "replay": {case.name: replay}})
    assert mine["divergence"] == []
    assert mine["result"] == contained["result"]


def _plan_and_setup(tmp_path, proposed: dict[str, str]):
    """A base rulebook of one structural rule (checks/a.py) and a candidate with
    `proposed` files on top; the Plan and a stand-in for Setup (hashes only)."""
    from types import SimpleNamespace

    from cakegov.govern.cache import plugin_hashes

    base, cand = tmp_path / "base", tmp_path / "cand"
    for d, files in ((base, {"checks/a.py": "A"}), (cand, {"checks/a.py": "A", **proposed})):
        for rel, text in files.items():
            (d / rel).parent.mkdir(parents=True, exist_ok=True)
            (d / rel).write_text(text)
    hashes = {"base": plugin_hashes(base), "candidate": plugin_hashes(cand)}
    spec = {"code": "X009", "name": "new", "version": "0.1.0", "severity": "blocking",
            "authority": "legality", "category": "test", "status": "stable", "phase": "main",
            "relpath": "checks/new.py", "sha256": "", "doc": ""}
    plan = trusted.prepare(base, hashes, {"rules": [spec]}, tmp_path / "t")
    return plan, SimpleNamespace(hashes=hashes)


BASE_INFO = {"rules": [
    {"code": "X001", "phase": "main", "category": "test", "status": "stable"},
    {"code": "P001", "phase": "main", "category": "protocol", "status": "stable"}]}


def test_a_silent_added_rule_reuses_the_base_run_only_when_everything_matches(tmp_path):
    """The trusted recomputation of a schedule is the base's run when the proposal only
    adds rules and every recorded call of them yielded nothing, the number of calls being
    the engine's calls to base rules of the same kind; any other case is recomputed."""
    from cakegov.check.findings import FileResult
    from cakegov.govern.judge import CaseRun, _added_rules_only, _silent_replay

    plan, setup = _plan_and_setup(tmp_path, {"checks/new.py": "N"})
    assert _added_rules_only(setup, plan)
    base_run = CaseRun(result=FileResult(file="x.cake", verdict="clean"))
    base_event = {"counts": {"X001": 3, "P001": 1}}
    silent = {"calls": {"X009": [[], [], []]}}
    assert _silent_replay(silent, base_event, base_run, plan, BASE_INFO)
    # it yielded a finding on one call (a re-check of a repair): recompute
    fired = {"calls": {"X009": [[], [{"code": "X009"}], []]}}
    assert not _silent_replay(fired, base_event, base_run, plan, BASE_INFO)
    # the engine called it fewer or more times than the base rules at the same points
    for n in (2, 4):
        assert not _silent_replay({"calls": {"X009": [[]] * n}}, base_event, base_run, plan,
                                  BASE_INFO)
    # no record, no counts, a base run that failed or skipped a rule, no peer of its kind
    assert not _silent_replay({}, base_event, base_run, plan, BASE_INFO)
    assert not _silent_replay(silent, {}, base_run, plan, BASE_INFO)
    assert not _silent_replay(silent, base_event, CaseRun(result=base_run.result,
                                                          skipped=["X001"]), plan, BASE_INFO)
    assert not _silent_replay(silent, base_event, CaseRun(result=None), plan, BASE_INFO)
    assert not _silent_replay(silent, base_event, base_run, plan,
                              {"rules": [BASE_INFO["rules"][1]]})


@pytest.mark.parametrize("proposed", [
    {"checks/new.py": "N", "checks/a.py": "A2"},  # an unchanged rule changed too
    {"checks/new.py": "N", "primitives/p.py": "P"},  # a primitive proposed
])
def test_only_added_rules_let_the_base_run_stand_in(tmp_path, proposed):
    from cakegov.govern.judge import _added_rules_only

    plan, setup = _plan_and_setup(tmp_path, proposed)
    assert not _added_rules_only(setup, plan)
