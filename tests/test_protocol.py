"""The protocol analysis as a whole (cakegov/analysis/): verdicts come from the executed
semantics, every rejection carries a witness, every machine fix removes its defect, the
window changes nothing, tails and every CTA that differs are analysed, and the result is
the same on every run."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from cakegov.analysis.protocol import Bounds, analyze, ctas, ragged
from cakegov.check.render_json import render_json
from cakegov.check.repair import apply_edits
from cakegov.ir.parse import parse_bytes

from .conftest import CORPUS, ROOT
from .tiers import corpus_params

SCHEDULES = sorted(CORPUS.rglob("*.cake"))
INVALID = [p for p in SCHEDULES if "invalid" in p.parts]


def context(checker, text: str):
    return checker.context(parse_bytes(text.encode(), checker.vocabulary), "t.cake")


def loose(anomalies) -> list[tuple[str, str]]:
    return sorted((a.kind, a.resource) for a in anomalies)


def test_bounds_are_counts_never_time():
    kinds = {f.name: f.type for f in dataclasses.fields(Bounds)}
    assert not [name for name in kinds if "second" in name or "time" in name]
    assert set(kinds) == {"max_events", "max_confirm_events", "max_runs", "window", "max_orders",
                          "symmetry"}


@pytest.mark.slow
def test_every_blocking_protocol_finding_has_a_witness(checker):
    """Acceptance: in --format json, every blocking P finding carries its witness."""
    results = checker.check_paths(SCHEDULES)
    report = json.loads(render_json(results, "digest"))
    seen = 0
    for result in report["results"]:
        for f in result["findings"]:
            if f["severity"] == "blocking" and f["code"].startswith("P"):
                seen += 1
                steps = f["evidence"].get("witness")
                assert steps and all(s["text"] for s in steps), (result["file"], f["code"])
    assert seen >= 40


@pytest.mark.parametrize("path", corpus_params(INVALID), ids=lambda p: str(p.relative_to(CORPUS)))
def test_every_machine_fix_removes_its_finding_and_adds_none(checker, path: Path):
    """Re-check every hint: the corpus case with its fix applied no longer has the
    finding, and nothing new appears."""
    source = path.read_text(encoding="utf-8")
    result = checker.check_bytes(source.encode(), str(path))
    for finding in result.findings:
        for fix in finding.fixes:
            if fix.applicability != "machine":
                continue
            fixed = checker.check_bytes(apply_edits(source, fix.edits).encode(), str(path))
            blocking = [f for f in fixed.findings if f.severity == "blocking"]
            assert not [f for f in blocking if f.code == finding.code], (
                finding.code, [f.message for f in blocking])
            assert not blocking, (finding.code, fix.description,
                                  [(f.code, f.message) for f in blocking])


@pytest.mark.parametrize("path", corpus_params(SCHEDULES), ids=lambda p: str(p.relative_to(CORPUS)))
def test_the_window_changes_no_anomaly(checker, path: Path):
    """Splicing whole periods out of long loops finds what unrolling every iteration
    finds (on the corpus and its check shapes)."""
    ctx = context(checker, path.read_text(encoding="utf-8"))
    kernel = ctx.lowered
    if kernel is None:
        pytest.skip("does not lower")
    windowed = analyze(kernel, ctx.shapes)
    full = analyze(kernel, ctx.shapes, Bounds(window=False, max_events=200_000))
    if set(full.incomplete) - set(full.unforced):
        pytest.skip("too long to unroll in full")
    assert loose(windowed.anomalies) == loose(full.anomalies)
    assert len(windowed.unforced) == len(full.unforced)


def test_long_loops_are_spliced_and_time_does_not_follow_the_trip_count(checker):
    text = (ROOT / "corpus/valid/gemm/raw_barriers_s2.cake").read_text()
    ctx = context(checker, text)
    result = analyze(ctx.lowered, [{"M": 256, "N": 256, "K": 64 * 4096}])
    [run] = [r for r in result.runs if r.sizes["K"] == 64 * 4096]
    assert run.spliced and run.program.events < 400 and not result.anomalies
    assert run.program.trip_counts and max(run.program.trip_counts.values()) == 4096


@pytest.mark.slow
def test_the_analysis_is_deterministic(fresh_checker, checker):
    """Two independent computations agree: the fresh checker computes every time; the
    shared one answers with what another Checker computed (often in the other xdist
    worker) or computes it now."""
    text = (ROOT / "corpus/invalid/gemm/raw_empty_wait_missing.cake").read_text()
    first = analyze(context(fresh_checker, text).lowered, context(fresh_checker, text).shapes)
    second = analyze(context(fresh_checker, text).lowered, context(fresh_checker, text).shapes)
    assert [(a.key, a.witness) for a in first.anomalies] == \
        [(a.key, a.witness) for a in second.anomalies]
    one = render_json(fresh_checker.check_paths([ROOT / "corpus/invalid/gemm"]), "d")
    two = render_json(checker.check_paths([ROOT / "corpus/invalid/gemm"]), "d")
    assert one == two


def test_a_size_not_declared_divisible_is_also_checked_ragged(checker):
    text = (ROOT / "corpus/valid/gemm/ws_pipeline_tail_s4.cake").read_text()
    ctx = context(checker, text)
    moved = ragged(ctx.lowered, {"M": 256, "N": 256, "K": 256})
    assert moved is not None and moved["K"] % 64 and moved["M"] % 128
    declared = context(checker, (ROOT / "corpus/valid/gemm/ws_pipeline_s4.cake").read_text())
    assert ragged(declared.lowered, {"M": 256, "N": 256, "K": 256})["K"] == 256  # divisible


def test_ctas_that_differ_are_analysed(checker):
    tail = context(checker, (ROOT / "corpus/invalid/scale/tail_cta_bytes.cake").read_text())
    picked = ctas(tail.lowered, {"M": 1000, "N": 336})
    # one CTA of each class (cakegov/analysis/ctas.py): the bytes depend on block(0) only,
    # so the last column of CTAs differs from the others and the rows do not
    assert picked == [(0, 0, 0), (31, 0, 0)]
    result = tail.protocol
    bad = {r.cta for r in result.runs if r.outcome.anomalies}
    assert bad and (0, 0, 0) not in bad
    plain = context(checker, (ROOT / "corpus/valid/scale/tile_1stage.cake").read_text())
    assert ctas(plain.lowered, {"M": 1000, "N": 336}) == [(0, 0, 0)]


def test_a_deadlock_witness_ends_where_the_roles_block(checker):
    text = (ROOT / "corpus/invalid/scale/wait_before_arm.cake").read_text()
    [deadlock] = [a for a in context(checker, text).protocol.anomalies
                  if a.kind == "deadlock"]
    assert deadlock.witness[-1][1].endswith("blocks forever")
    assert deadlock.events[0].line == next(i for i, ln in enumerate(text.splitlines(), 1)
                                           if "full[0].wait(parity=0)  # expect" in ln)


def test_an_elected_per_warp_release_after_per_thread_reads_is_converged_by_the_lowering(
        checker):
    """The convergence contract (docs/language.md): before an elected per-warp arrive that
    follows the warp's per-thread shared-memory reads, the lowering emits `__syncwarp()`,
    so the schedule without `lm.syncwarp()` is as clean as with it (it used to be a race
    the user had to fix by hand)."""
    from cakegov.lower.text import lowered_text

    text = (ROOT / "corpus/invalid/scale/parity_min_saturates.cake").read_text()
    text = text.replace("parity=lm.min(t // 2, 1) % 2)  # expect: P006", "parity=(t // 2) % 2)")
    assert context(checker, text).protocol.anomalies == []
    bare = text.replace("            lm.syncwarp()\n", "")
    assert bare != text
    ctx = context(checker, bare)
    assert ctx.protocol.anomalies == []
    lines = lowered_text(ctx.lowered).splitlines()
    arrive = next(i for i, line in enumerate(lines) if "arrive empty[" in line)
    assert "fence warp (inserted for arrive)" in lines[arrive - 1]


def test_lapped_waiter_is_an_anomaly_with_its_witness(checker):
    """A role whose warps only wait (they never release) while one elected thread of the
    role hands the stage back: a late warp can miss the phase it waits for."""
    text = (ROOT / "corpus/invalid/gemm/role_release_without_role_sync.cake").read_text()
    text = text.replace('lm.mma(acc, a_s[k % S], b_s[k % S], transpose_b=True, init=(k == 0))',
                        'lm.fill(acc, 0.0)')
    kinds = {a.kind for a in context(checker, text).protocol.anomalies}
    assert "lapped" in kinds
    [lapped] = [a for a in context(checker, text).protocol.anomalies if a.kind == "lapped"]
    assert "reaches the wait" in lapped.witness[-1][1]


def test_a_waiter_lapped_by_one_phase_of_a_fresh_barrier_is_an_anomaly(checker):
    """The canonical execution's producer passes its k=1 wait on the fresh empty[0]
    (parity 1), but the consumer's release of stage 0 is not ordered after the producer
    reaches that wait: when it completes phase 0 first, the wait's parity no longer
    differs, the producer waits for phase 1 and deadlocks. One phase is enough; an
    analysis that looks only two phases ahead calls the schedule clean."""
    text = (ROOT / "corpus/valid/gemm/raw_barriers_s2.cake").read_text()
    text = text.replace("empty[k % S].wait(parity=(k // S + 1) % 2)",
                        "empty[(k % S + 1) % S].wait(parity=(k // S + 1) % 2)")
    [lapped] = [a for a in context(checker, text).protocol.anomalies if a.kind == "lapped"]
    assert "phase 0 of empty[0] can complete before" in lapped.message
    assert "observes phase -1 (the state of the fresh barrier)" in lapped.message


# ---- unforced phase attributions ------------------------------------------------------
# An arrival that can land in another phase than the one the canonical execution put it
# in is no defect by itself: the analysis runs other schedules and rejects only when one
# of them reaches a defect; otherwise the verdict is incomplete, never clean.

def _variant(path: str, old: str, new: str) -> str:
    text = (ROOT / path).read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    return text.replace(old, new).replace("# expect: clean", "")


def test_a_token_count_one_short_that_nothing_depends_on_is_incomplete_not_rejected(checker):
    # CUTLASS ping-pong's order barrier with count 3 for math1's 4 warps: the 4th arrival
    # lands in a phase no later wait observes (T = 2 tiles), and the ring's own barriers
    # order every stage. The simulator finds it correct under every strategy (the
    # standing mutation suite: pingpong_token_s4.cake:count-minus-one:1).
    text = _variant("corpus/valid/gemm/pingpong_token_s4.cake",
                    "tok0 = lm.mbarrier(count=4)", "tok0 = lm.mbarrier(count=3)")
    result = checker.check_bytes(text.encode(), "t.cake")
    assert result.verdict == "incomplete", [f.message for f in result.findings]
    assert not [f for f in result.findings if f.severity == "blocking"]
    assert any("phase attribution not forced" in r and "tok0" in r
               for r in result.incomplete_reasons)


def test_an_unforced_release_is_rejected_when_another_schedule_deadlocks(checker):
    # math0 releases the stage after the one it read: each phase of `empty` then counts
    # math1's release of a stage with math0's of the previous one. The canonical
    # execution only shows that the attribution is unforced; the schedule that runs
    # math0 and the loader ahead of math1 deadlocks.
    text = _variant("corpus/valid/gemm/raw_two_consumers_s2.cake",
                    "lm.mma(acc0, a0_s[k % S], b_s[k % S], transpose_b=True, init=(k == 0))\n"
                    "            empty[k % S].arrive()",
                    "lm.mma(acc0, a0_s[k % S], b_s[k % S], transpose_b=True, init=(k == 0))\n"
                    "            empty[(k % S + 1) % S].arrive()")
    ctx = context(checker, text)
    result = analyze(ctx.lowered, ctx.shapes)
    assert result.anomalies and not all(a.details.get("unforced") for a in result.anomalies)
    assert {a.kind for a in result.anomalies} & {"deadlock", "race", "lapped"}
    found = checker.check_bytes(text.encode(), "t.cake")
    assert found.verdict == "rejected"
    assert all(f.evidence.get("witness") for f in found.findings if f.severity == "blocking")


def test_arrivals_split_over_two_phases_order_nothing_they_did(checker):
    # A full barrier counting one warp fewer than arrive: whichever warp is last may be
    # the one whose writes the consumer reads, so the phase carries none of them and the
    # read is a race (not merely an unforced attribution).
    text = _variant("corpus/valid/gemm/epilogue_store_async_handoff.cake",
                    "cbar = lm.mbarrier(count=4)", "cbar = lm.mbarrier(count=3)")
    ctx = context(checker, text)
    result = analyze(ctx.lowered, ctx.shapes)
    assert "race" in {a.kind for a in result.anomalies}

