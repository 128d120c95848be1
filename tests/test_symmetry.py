"""Symmetric warpgroups (issue 45, step 3; docs/checker.md, "Symmetric warpgroups"): the
warp classes of a split role that are images of one another under a shift by whole
warpgroups are explored as one model thread, only where every image runs the same ops, on
its own named-barrier copies and without writing shared memory; a program with anything
to report is analysed again without the reduction, so findings and witnesses are those of
the unreduced analysis."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cakegov.analysis.program import Builder, named_users, symmetric, warp_classes
from cakegov.analysis.protocol import Bounds
from cakegov.check.context import CheckContext
from cakegov.check.runner import Checker
from cakegov.ir.parse import parse_bytes

from .conftest import ROOT

SCALE = ROOT / "benchmarks" / "scale" / "wgs3_elected_s8.cake"
SOURCE = SCALE.read_text(encoding="utf-8")
SYNCS = """            with lm.warps(0, 4):
                wg0.sync()
            with lm.warps(4, 8):
                wg1.sync()
            with lm.warps(8, 12):
                wg2.sync()
"""


def _check(rulebook, workloads, monkeypatch, text: str, symmetry: bool):
    monkeypatch.setattr(CheckContext, "protocol_bounds", Bounds(symmetry=symmetry))
    checker = Checker(rulebook, workloads, preview=True)
    return checker.check_bytes_with_work(text.encode(), "wgs.cake")


def _kernel(rulebook, workloads, text: str):
    checker = Checker(rulebook, workloads)
    ctx = checker.context(parse_bytes(text.encode(), checker.vocabulary), "wgs.cake")
    return ctx.lowered


def _worker_symmetry(rulebook, workloads, text: str):
    kernel = _kernel(rulebook, workloads, text)
    role = next(r for r in kernel.roles if r.name == "worker")
    return symmetric(kernel, role, warp_classes(role), named_users(kernel))


def test_the_scale_schedule_has_the_syncs_the_variants_edit():
    assert SYNCS in SOURCE and "lm.fence_proxy()\n" in SOURCE


def test_symmetric_warpgroups_are_explored_through_one(rulebook, workloads, monkeypatch):
    reduced, work = _check(rulebook, workloads, monkeypatch, SOURCE, True)
    whole, whole_work = _check(rulebook, workloads, monkeypatch, SOURCE, False)
    assert reduced.verdict == whole.verdict == "clean"
    assert whole.analysis_notes == ()
    assert len(reduced.analysis_notes) == 1
    note = reduced.analysis_notes[0]
    assert "`worker`" in note and "warpgroups 1..2 explored through warpgroup 0" in note
    assert "named barrier 1" in note
    assert work.base * 2 < whole_work.base  # six worker classes became two


def test_the_merged_classes_and_what_they_stand_for(rulebook, workloads):
    syms = _worker_symmetry(rulebook, workloads, SOURCE)
    assert syms is not None
    assert [(s.rep, s.members, s.blocks) for s in syms] == [
        ((0,), (0, 4, 8), 3), ((1, 2, 3), (1, 2, 3, 5, 6, 7, 9, 10, 11), 3)]
    assert all(s.private == frozenset({1}) for s in syms)  # wg0's id; wg1, wg2 its copies


def test_merged_threads_bring_one_warpgroup_to_a_private_barrier_and_all_arrivals(
        rulebook, workloads):
    kernel = _kernel(rulebook, workloads, SOURCE)
    program = Builder(kernel).build({"M": 256, "N": 256})
    worker = [t for t in program.threads if t.role == "worker"]
    assert len(worker) == 2
    named = [ev for t in worker for ev in t.events if ev.kind == "named"]
    assert named and all(ev.n == 128 // 4 * len(t.rep) for t in worker for ev in t.events
                         if ev.kind == "named")
    arrives = [ev for ev in worker[0].events if ev.kind == "arrive"]
    assert arrives and all(ev.n == 3 for ev in arrives)  # one per warpgroup's first warp
    whole = Builder(kernel, symmetry=False).build({"M": 256, "N": 256})
    assert len([t for t in whole.threads if t.role == "worker"]) == 6


def test_a_defect_gets_the_findings_and_witness_of_the_unreduced_analysis(
        rulebook, workloads, monkeypatch):
    broken = SOURCE.replace("            lm.fence_proxy()\n", "", 1)  # generic reads, then TMA
    reduced, _ = _check(rulebook, workloads, monkeypatch, broken, True)
    whole, _ = _check(rulebook, workloads, monkeypatch, broken, False)
    assert reduced.verdict == "rejected"
    assert [f.code for f in reduced.findings] == ["P013"]
    assert json.loads(reduced.model_dump_json())["findings"] == \
        json.loads(whole.model_dump_json())["findings"]


def test_a_barrier_two_warpgroups_share_is_not_a_copy(rulebook, workloads, monkeypatch):
    # warpgroup 2 syncs on warpgroup 1's barrier: 256 threads on a 128-thread barrier
    shared = SOURCE.replace("            with lm.warps(8, 12):\n                wg2.sync()\n",
                            "            with lm.warps(8, 12):\n                wg1.sync()\n")
    assert shared != SOURCE
    assert _worker_symmetry(rulebook, workloads, shared) is None
    result, _ = _check(rulebook, workloads, monkeypatch, shared, True)
    assert result.verdict == "rejected" and result.analysis_notes == ()


def test_one_warpgroup_doing_more_breaks_the_symmetry(rulebook, workloads):
    extra = SOURCE.replace("            with lm.warps(8, 12):\n                wg2.sync()\n",
                           "            with lm.warps(8, 12):\n                wg2.sync()\n"
                           "                lm.fence_proxy()\n")
    assert extra != SOURCE
    assert _worker_symmetry(rulebook, workloads, extra) is None


def test_a_role_that_writes_shared_memory_is_not_reduced(rulebook, workloads):
    # each warpgroup scales the stage in place: its writes could race another's reads
    inplace = SOURCE.replace(
        'x_s = lm.smem("f32", (TM, TN), stages=S)\n',
        'x_s = lm.smem("f32", (TM, TN), stages=S)\n'
        '    y_s = lm.smem("f32", (TM, TN), stages=S, alias=x_s)\n').replace(
        'lm.elementwise(y, x_s[it % S], op="scale", alpha=2.5)',
        'lm.elementwise(y_s[it % S], x_s[it % S], op="scale", alpha=2.5)')
    assert "y_s[it % S]" in inplace
    assert _worker_symmetry(rulebook, workloads, inplace) is None


def test_an_unsplit_role_needs_no_reduction(rulebook, workloads):
    plain = (ROOT / "benchmarks" / "scale" / "wgs3_ring_s8.cake").read_text(encoding="utf-8")
    assert _worker_symmetry(rulebook, workloads, plain) is None


def _split_corpus() -> list[Path]:
    return sorted(p for p in (ROOT / "corpus").rglob("*.cake")
                  if "lm.warps(" in p.read_text(encoding="utf-8"))


@pytest.mark.slow
def test_the_corpus_gets_the_same_results_with_and_without_the_reduction(
        rulebook, workloads, monkeypatch):
    """Every corpus schedule the reduction applies to: the same verdict, findings and
    witnesses as the unreduced analysis (only the note differs)."""
    used = 0
    for path in _split_corpus():
        text = path.read_text(encoding="utf-8")
        kernel = _kernel(rulebook, workloads, text)
        if kernel is None or not Builder(kernel).symmetries:
            continue
        used += 1
        reduced, _ = _check(rulebook, workloads, monkeypatch, text, True)
        whole, _ = _check(rulebook, workloads, monkeypatch, text, False)
        a, b = json.loads(reduced.model_dump_json()), json.loads(whole.model_dump_json())
        a.pop("analysis_notes"), b.pop("analysis_notes")
        assert a == b, path
    assert used >= 5  # the valid and invalid per-warpgroup releases of gemm and softmax


RELEASE = "            with lm.warps(0, 12, 4):\n                empty[it % S].arrive()\n"


def _per_warpgroup(call: str) -> str:
    """Each warpgroup's first warp makes `call` on `empty` in a block of its own."""
    assert RELEASE in SOURCE
    return SOURCE.replace(RELEASE, "".join(
        f"            with lm.warps({4 * g}, {4 * g + 1}):\n                empty[it % S].{call}\n"
        for g in range(3)))


def test_per_warpgroup_blocks_of_one_plain_arrive_are_reduced(rulebook, workloads,
                                                              monkeypatch):
    text = _per_warpgroup("arrive()")
    syms = _worker_symmetry(rulebook, workloads, text)
    assert syms is not None and syms[0].members == (0, 4, 8)
    result, _ = _check(rulebook, workloads, monkeypatch, text, True)
    assert result.verdict == "clean" and result.analysis_notes


def test_per_warpgroup_transaction_bytes_are_not_one_merged_arrive(rulebook, workloads,
                                                                   monkeypatch):
    # three warpgroups each adding 16 bytes is not one arrive adding 16: not reduced
    text = _per_warpgroup("arrive_expect_tx(bytes=16)")
    assert _worker_symmetry(rulebook, workloads, text) is None
    result, _ = _check(rulebook, workloads, monkeypatch, text, True)
    assert result.verdict == "rejected" and result.analysis_notes == ()
