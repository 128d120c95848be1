"""The diagnosis budget (issue 45): the repair search that names a defect's cause is
bounded in work units (events unrolled plus steps executed: `context.units`), never in
seconds, at DIAGNOSIS_FACTOR times the schedule's own analysis; one rule per pass gets a
share of it; when it stops, P099 says which bound stopped it; witnesses are computed only
for anomalies that are recorded."""

from __future__ import annotations

from pathlib import Path

import pytest

from cakegov.check import context as C
from cakegov.check.context import CheckContext, Work
from cakegov.ir.parse import parse_bytes

from .conftest import ROOT

CORPUS = ROOT / "corpus"
TWICE = CORPUS / "invalid" / "gemm" / "persistent_pingpong_cluster2_release_twice.cake"
TWIN = CORPUS / "valid" / "gemm" / "persistent_pingpong_cluster2_s4.cake"
SMALL = CORPUS / "invalid" / "knn" / "named_handback_missing.cake"


def _ctx(checker, rulebook, workloads, path: Path = SMALL) -> CheckContext:
    schedule = parse_bytes(path.read_bytes(), checker.vocabulary)
    return CheckContext(schedule, path.name, rulebook.targets["sm_90a"],
                        workloads[schedule.workload], rulebook.primitives)


def test_the_allowance_is_a_multiple_of_the_analysis_with_a_floor():
    assert Work(base=1_000_000).allowance() == C.DIAGNOSIS_FACTOR * 1_000_000
    assert Work(base=10).allowance() == C.DIAGNOSIS_FLOOR
    # race checks: MAX_REPAIR_WORK, or the factor times the analysis' own comparisons
    assert Work(base_race=10).race_allowance() == C.MAX_REPAIR_WORK
    assert Work(base_race=10**6).race_allowance() == C.DIAGNOSIS_FACTOR * 10**6


def test_repairs_past_the_allowance_stop_the_search_and_say_which_bound(checker, rulebook,
                                                                        workloads):
    ctx = _ctx(checker, rulebook, workloads)
    ctx.work.base = 100_000
    ctx.work.repairs = ctx.work.allowance()
    ctx._begin_rule()  # a fresh rule share: only the check-wide bound is left to hit
    assert not ctx.repairs_spent() and ctx.diagnosis_spent() == ""
    ctx.work.repairs += 1
    assert ctx.repairs_spent()
    assert ctx.diagnosis_spent() == "diagnosis work"
    ctx._begin_rule()
    assert ctx.repairs_spent()  # for every rule after it too


def test_one_rule_spends_at_most_its_share_per_pass(checker, rulebook, workloads):
    ctx = _ctx(checker, rulebook, workloads)
    ctx.work.base = 100_000
    ctx._begin_rule()
    ctx.work.repairs += ctx.work.allowance() // C.RULE_SHARE + 1
    assert ctx.repairs_spent()  # this rule's share is used up ...
    assert ctx.diagnosis_spent() == ""  # ... not the check's
    ctx._begin_rule()
    assert not ctx.repairs_spent()  # the next rule starts with its own share
    ctx.work.race += ctx.work.race_allowance() // C.RULE_SHARE + 1
    assert ctx.repairs_spent()  # race-check work has a share as well


def test_the_check_counts_its_work(rulebook, workloads):
    from cakegov.check.runner import Checker

    checker = Checker(rulebook, workloads)
    result, work = checker.check_bytes_with_work(SMALL.read_bytes(), str(SMALL))
    assert result.verdict == "rejected"
    assert work.base > 0 and work.repairs > 0 and work.quick + work.whole > 0
    assert work.total == work.base + work.repairs
    assert work.repairs <= work.allowance()
    clean, clean_work = checker.check_bytes_with_work(
        (CORPUS / "valid" / "knn" / sorted(p.name for p in (CORPUS / "valid" / "knn")
                                          .glob("*.cake"))[0]).read_bytes(), "v.cake")
    assert clean.verdict == "clean" and clean_work.repairs == 0 and clean_work.base > 0


def test_a_spent_search_is_reported_by_p099_with_its_bound(rulebook, workloads, monkeypatch):
    """With no allowance, no rule can confirm a repair: the anomaly is reported as it is
    (P099, its witness), and the finding says the search stopped, and at which bound."""
    from cakegov.check.runner import Checker

    monkeypatch.setattr(Work, "allowance", lambda self: -1)
    fresh = Checker(rulebook, workloads)  # not the session's shared results
    result, work = fresh.check_bytes_with_work(SMALL.read_bytes(), str(SMALL))
    assert work.spent == "diagnosis work"
    assert result.verdict == "rejected"
    (finding,) = [f for f in result.findings if f.severity == "blocking"]
    assert finding.code == "P099"
    assert finding.evidence["repair_search"] == "stopped: diagnosis work bound"
    assert "stopped at its diagnosis work bound" in finding.hint
    assert finding.evidence["anomalies_unexplained"] >= 1
    assert finding.evidence["witness"]


def test_witnesses_are_walked_only_for_recorded_anomalies(rulebook, workloads, checker,
                                                          monkeypatch):
    """A witness walks the whole trace; a defect met at every step of a long execution
    must not walk it for anomalies already recorded (the 400 s class of issue 45)."""
    from cakegov.analysis import execute

    calls = [0]
    real = execute.Executor.ancestry

    def counting(self, *args, **kwargs):
        calls[0] += 1
        return real(self, *args, **kwargs)

    monkeypatch.setattr(execute.Executor, "ancestry", counting)
    path = CORPUS / "invalid" / "gemm" / "persistent_phase_restart.cake"
    ctx = _ctx(checker, rulebook, workloads, path)
    result = ctx.protocol
    recorded = sum(len(r.outcome.anomalies) for r in result.runs)
    assert recorded >= 1
    # one walk per recorded anomaly, at most (a few runs explore other orders too)
    assert calls[0] <= 4 * recorded


@pytest.mark.slow
def test_a_doubled_remote_release_is_named_within_budget(checker):
    """The issue's class: a persistent cluster GEMM whose consumer hands a stage back to
    its peer's producer twice. It is named (P009 at the doubled release, the fix deletes
    one) with at most 5x the work units of its valid twin."""
    result, work = checker.check_bytes_with_work(TWICE.read_bytes(), str(TWICE))
    twin, twin_work = checker.check_bytes_with_work(TWIN.read_bytes(), str(TWIN))
    assert twin.verdict == "clean" and result.verdict == "rejected"
    codes = [(f.code, f.span.line) for f in result.findings if f.severity == "blocking"]
    line = next(i for i, text in enumerate(TWICE.read_text().splitlines(), 1)
                if "# expect: P009" in text)
    assert codes == [("P009", line)]
    assert work.total <= 5 * twin_work.total
    assert work.spent == ""
