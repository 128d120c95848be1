"""The machine model's axioms (cakegov/analysis/axioms.py, docs/checker.md), each driven
through at least one positive and one negative hand-worked trace.

A trace is either a sequence of operations on the shared state machines
(cakegov/analysis/semantics.py) with every expected state written out from the PTX ISA,
or a small schedule whose steps the docstring gives, run through both the protocol
analysis (the checker's finding and its line) and the CPU simulator (its dynamic
outcome): the two engines must give the same answer on the same trace. Test names carry
the axiom (`test_a<N>_pos_...`, `test_a<N>_neg_...`); a meta-test fails when an axiom has
no positive or no negative trace, or names engine code that does not exist."""

from __future__ import annotations

import importlib
import re
import sys

import pytest

from cakegov.analysis.axioms import AXIOMS, STATUSES
from cakegov.analysis.semantics import (
    ARRIVAL_LIMIT,
    TX_LIMIT,
    AsyncGroups,
    BarrierError,
    MBarrier,
    NamedBarrier,
    OverArrival,
    WarpgroupIssue,
    needs_proxy_fence,
    proxy_fenced,
    warpgroup_of,
)
from cakegov.ir.parse import parse_bytes
from cakegov.lower.derive import issuing_warp
from cakegov.lower.emit import emit_cuda
from cakegov.sim.evidence import lower_any, simulate_evidence

from .conftest import CORPUS, ROOT

VALID = CORPUS / "valid"
INVALID = CORPUS / "invalid"


def blocking(checker, text: str, name: str = "t.cake") -> list[tuple[str, int]]:
    result = checker.check_bytes(text.encode(), name)
    return sorted((f.code, f.span.line) for f in result.findings if f.severity == "blocking")


def simulated(rulebook, workloads, text: str, name: str = "t.cake") -> tuple[str, str]:
    ev = simulate_evidence(text.encode(), name, rulebook, workloads)
    return ev["status"], ev["detail"]


def case(rel: str) -> str:
    return (CORPUS / rel).read_text(encoding="utf-8")


def edited(rel: str, old: str, new: str) -> str:
    text = case(rel)
    assert text.count(old) == 1, (rel, old)
    return text.replace(old, new)


def both_clean(checker, rulebook, workloads, text: str) -> None:
    assert blocking(checker, text) == []
    status, detail = simulated(rulebook, workloads, text)
    assert status == "correct", detail


def both_reject(checker, rulebook, workloads, text: str, code: str, line: int,
                kind: str) -> str:
    assert (code, line) in blocking(checker, text)
    status, detail = simulated(rulebook, workloads, text)
    assert status == "defect" and detail.startswith(kind + ":"), detail
    return detail


def state(b: MBarrier) -> tuple[int, int, int]:
    return (b.phase, b.pending, b.tx)


# ---- A1 mbarrier phase completion ------------------------------------------------------


def test_a1_pos_the_last_arrival_completes_the_phase_and_reloads_pending():
    b = MBarrier(count=2)
    assert state(b) == (0, 2, 0)
    assert b.arrive() == 0 and state(b) == (0, 1, 0)
    assert b.arrive() == 1 and state(b) == (1, 2, 0)


def test_a1_neg_outstanding_bytes_hold_the_phase_after_every_arrival(checker, rulebook,
                                                                     workloads):
    b = MBarrier(count=1)
    assert b.arrive(tx=4096) == 0 and state(b) == (0, 0, 4096)
    assert not b.passes(0)
    # on a schedule: expect_tx counts elements, not bytes, so the phase never completes
    both_reject(checker, rulebook, workloads,
                case("invalid/scale/expect_tx_elements_not_bytes.cake"), "P003", 15, "deadlock")


# ---- A2 parity waits and aliasing ------------------------------------------------------


def test_a2_pos_a_wait_passes_once_its_phase_completed_and_observes_it():
    b = MBarrier(count=1)
    assert not b.passes(0)
    b.arrive()
    assert b.passes(0) and b.observed == 0 and not b.passes(1)


def test_a2_neg_two_phases_behind_reads_the_same_parity(checker, rulebook, workloads):
    b = MBarrier(count=1)
    b.arrive()
    at_phase_one = b.passes(0)
    b.arrive()
    b.arrive()  # two more phases: phase 2 completed, observed 2
    assert at_phase_one and b.passes(0) and b.observed == 2  # parity 0 cannot tell 0 from 2
    # on a schedule: one full slot for two stages lets an arrival land a phase early
    both_reject(checker, rulebook, workloads, case("invalid/scale/one_full_slot_two_stages.cake"),
                "P007", 14, "over-arrival")


# ---- A3 a fresh barrier's preceding phase ----------------------------------------------


def test_a3_pos_parity_one_passes_on_a_fresh_barrier():
    b = MBarrier(count=3)
    assert b.passes(1) and b.observed == -1


def test_a3_neg_parity_zero_waits_on_a_fresh_barrier_and_parity_one_then_deadlocks(
        checker, rulebook, workloads):
    assert not MBarrier(count=1).passes(0)
    # the consumer waits parity 1 after the single phase 0: it passed at once before the
    # copy (fresh barrier), so its second wait on the same parity never comes true
    both_reject(checker, rulebook, workloads, case("invalid/scale/wait_parity_one.cake"),
                "P005", 17, "deadlock")


# ---- A4 arrival counts and over-arrival ------------------------------------------------


def test_a4_pos_counts_at_the_limits_are_legal():
    assert MBarrier(count=1).pending == 1
    assert MBarrier(count=ARRIVAL_LIMIT).pending == ARRIVAL_LIMIT


def test_a4_neg_over_arrival_and_out_of_range_counts(checker, rulebook, workloads):
    b = MBarrier(count=1)
    b.arrive(tx=128)  # arrivals all in, bytes outstanding
    with pytest.raises(OverArrival):
        b.arrive()
    for bad in (0, ARRIVAL_LIMIT + 1):
        with pytest.raises(BarrierError):
            MBarrier(count=bad)
    # on a schedule: every warp arms a barrier that expects one arrival
    both_reject(checker, rulebook, workloads, case("invalid/scale/handoff_arm_per_warp.cake"),
                "P004", 18, "over-arrival")


# ---- A5 transaction count --------------------------------------------------------------


def test_a5_pos_the_copy_may_land_before_the_bytes_are_expected():
    b = MBarrier(count=1)
    assert b.complete_tx(4096) == 0 and state(b) == (0, 1, -4096)
    assert b.arrive(tx=4096) == 1 and state(b) == (1, 1, 0)


def test_a5_neg_partial_bytes_hold_the_phase_and_the_count_is_bounded():
    b = MBarrier(count=1)
    b.expect_tx(8192)
    b.arrive()
    assert b.complete_tx(4096) == 0 and state(b) == (0, 0, 4096)  # half the bytes
    with pytest.raises(BarrierError):
        MBarrier(count=1).expect_tx(TX_LIMIT + 1)


# ---- A6 arrive releases, the observing wait acquires ----------------------------------

STAGED = "valid/scale/staged_epilogue_syncwarp.cake"


def test_a6_pos_release_then_acquire_orders_two_roles(checker, rulebook, workloads):
    """worker writes y_s, arrives on done[0]; storer waits done[0] parity 0 (phase 0),
    then reads y_s: the read is ordered after every write."""
    both_clean(checker, rulebook, workloads, case(STAGED))


def test_a6_neg_without_the_observing_wait_nothing_orders_the_roles(checker, rulebook,
                                                                     workloads):
    text = edited(STAGED, "        done[0].wait(parity=0)\n", "")
    assert blocking(checker, text)
    status, detail = simulated(rulebook, workloads, text)
    assert status == "defect" and detail.startswith(("race:", "uninitialised read:")), detail


# ---- A7 bulk copies complete on their barrier ------------------------------------------


def test_a7_pos_a_wait_on_the_completing_phase_sees_the_copy(checker, rulebook, workloads):
    both_clean(checker, rulebook, workloads, case("valid/scale/ring_1stage.cake"))


def test_a7_neg_reading_the_stage_without_observing_the_copy(checker, rulebook, workloads):
    text = case("invalid/scale/ring_wait_missing.cake")
    assert blocking(checker, text)
    status, detail = simulated(rulebook, workloads, text)
    assert status == "defect", detail


# ---- A8 named barriers -----------------------------------------------------------------


def test_a8_pos_instances_complete_on_the_declared_threads(checker, rulebook, workloads):
    b = NamedBarrier(threads=64)
    assert b.arrive(32) == (0, 32)
    assert b.arrive(32) == (1, 0)
    assert b.arrive(96) == (1, 32)  # a group larger than the room left splits
    both_clean(checker, rulebook, workloads, case("valid/scale/named_barrier_handoff.cake"))


def test_a8_neg_a_thread_count_short_of_the_participants(checker, rulebook, workloads):
    with pytest.raises(BarrierError):
        NamedBarrier(threads=0).arrive(32)
    text = case("invalid/scale/named_barrier_thread_count.cake")
    assert ("R007", 12) in blocking(checker, text)
    status, detail = simulated(rulebook, workloads, text)
    assert status == "defect" and detail.startswith("uninitialised read:"), detail


# ---- A9 generic-to-async proxy ordering ------------------------------------------------


def test_a9_pos_fence_proxy_async_before_the_bulk_store(checker, rulebook, workloads):
    both_clean(checker, rulebook, workloads, case("valid/scale/store_async_epilogue.cake"))


def test_a9_neg_the_bulk_store_reads_generic_writes_without_a_fence(checker, rulebook,
                                                                     workloads):
    detail = both_reject(checker, rulebook, workloads,
                         case("invalid/scale/store_async_without_fence.cake"), "P013", 19, "race")
    assert "async pr" in detail


# ---- A10 manual mbarrier initialisation ------------------------------------------------


def test_a10_pos_init_fence_and_sync_before_every_use(checker, rulebook, workloads):
    both_clean(checker, rulebook, workloads, case("valid/scale/manual_init_elected_use.cake"))


def test_a10_neg_a_copy_without_fence_mbarrier_init_and_a_waiter_before_the_sync(
        checker, rulebook, workloads):
    detail = both_reject(checker, rulebook, workloads,
                         case("invalid/scale/manual_init_without_fence.cake"), "P012", 30, "race")
    assert "fence.mbarri" in detail
    both_reject(checker, rulebook, workloads,
                case("invalid/scale/manual_init_waiter_before_sync.cake"), "P012", 26, "race")


# ---- A11 __syncwarp orders the lanes of one warp ---------------------------------------

TWO_WORKER_WARPS = (("warps=5)", "warps=6)"), ("range(0, 1)", "range(0, 2)"),
                    ("range(1, 5)", "range(2, 6)"))


def two_worker_warps(text: str) -> str:
    for old, new in TWO_WORKER_WARPS:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


def test_a11_pos_syncwarp_before_the_elected_arrive(checker, rulebook, workloads):
    """worker (one warp): 32 lanes write y_s, __syncwarp, lane 0 arrives on done."""
    text = case(STAGED)
    assert "lm.syncwarp()" in text
    both_clean(checker, rulebook, workloads, text)


def test_a11_neg_syncwarp_orders_nothing_between_warps(checker, rulebook, workloads):
    """The same with two worker warps: __syncwarp orders each warp's lanes, not warp 1's
    writes before warp 0's elected arrive."""
    text = two_worker_warps(case(STAGED))
    line = next(n for n, s in enumerate(text.splitlines(), 1) if 'arrive(per="role")' in s)
    both_reject(checker, rulebook, workloads, text, "P011", line, "race")


# ---- A12 no lane convergence assumed; an elected arrive releases its own thread --------

DERIVED = "valid/scale/elected_arrive_derived_syncwarp.cake"


def test_a12_pos_the_lowering_syncs_the_lanes_before_an_elected_arrive(checker, rulebook,
                                                                       workloads):
    text = case(DERIVED)
    assert "lm.syncwarp()" not in text.split('"""')[2]
    kernel, _wl, _schedule, why = lower_any(text.encode(), "t.cake", rulebook, workloads)
    assert kernel is not None, why
    worker = next(r for r in kernel.roles if r.name == "worker")
    body = [type(op).__name__ + ":" + str(getattr(op, "scope", "")) for op in worker.body]
    arrive = max(i for i, k in enumerate(body) if k.startswith("LArrive"))
    assert body[arrive - 1] == "LFence:warp"  # the derived __syncwarp right before it
    both_clean(checker, rulebook, workloads, text)


def test_a12_neg_an_elected_arrive_does_not_release_other_warps(checker, rulebook, workloads):
    """The derived sync covers the lanes of the arriving warp only: with two worker warps
    the elected arrive of warp 0 publishes nothing of warp 1's writes."""
    text = two_worker_warps(case(DERIVED))
    line = next(n for n, s in enumerate(text.splitlines(), 1) if 'arrive(per="role")' in s)
    both_reject(checker, rulebook, workloads, text, "P011", line, "race")


def _without_derived_warp_syncs(kernel, role: str):
    """The lowered kernel with every `__syncwarp()` the lowering derived in `role` removed
    (a kernel the lowering never emits: what the two models say of it pins their lane
    models)."""
    from cakegov.lower.kernel import LFence, LFor

    def strip(ops):
        out = []
        for op in ops:
            if isinstance(op, LFence) and op.scope == "warp" and op.derived:
                continue
            if isinstance(op, LFor):
                op = op.model_copy(update={"body": strip(op.body)})
            out.append(op)
        return tuple(out)

    roles = tuple(r.model_copy(update={"body": strip(r.body)}) if r.name == role else r
                  for r in kernel.roles)
    return kernel.model_copy(update={"roles": roles})


def _both_models(rulebook, workloads, text, role, sizes):
    """(analysis anomaly kinds, simulator outcome) of `text` lowered, its derived warp syncs
    removed."""
    from cakegov.analysis.protocol import analyze
    from cakegov.sim.run import Options, simulate_run

    kernel, workload, _schedule, why = lower_any(text.encode(), "t.cake", rulebook, workloads)
    assert kernel is not None, why
    stripped = _without_derived_warp_syncs(kernel, role)
    assert stripped != kernel  # the lowering had derived one
    kinds = {a.kind for a in analyze(stripped, [sizes]).anomalies}
    runs = [simulate_run(stripped, workload, rulebook.primitives, sizes,
                         Options(strategy=st, seed=0)) for st in ("laggard", "round-robin")]
    return kinds, {r.outcome for r in runs}, " ".join(r.detail for r in runs)


def test_a12_trace_the_two_lane_models_and_the_sync_that_makes_them_agree(rulebook,
                                                                         workloads):
    """Hand-worked: the analysis gives each model thread of a warp one clock for the
    elected lane and one for the other lanes' per-thread accesses (`who="T"`), and
    attributes a warp-collective access (`mma.sync`, `who="W0"`) to the elected lane:
    lane 0 executes it with the others. The simulator keeps lanes 0 and 1-31 apart and
    joins them at a collective. Strip the lowering's derived `__syncwarp()`:
    - per-thread writes, then lane 0's arrive (scale, `elected_arrive_derived_syncwarp`):
      both models see lanes 1-31's writes unordered with the reader (race);
    - collective `mma.sync` reads, then the proxy fence each lane executes for its own
      reads, then lane 0's arrive (gemm, `raw_barriers_s2`): the analysis has the reads on
      lane 0, covered by lane 0's own fence, and finds nothing; the simulator has them
      joined into lanes 1-31 too, whose fences lane 0's arrive does not carry, and finds
      the refill racing with them. The two lane models differ exactly where lanes 1-31
      fence after a collective; the lowering always syncs the warp after a derived fence
      before an elected arrive (docs/language.md, the convergence contract), so on every
      kernel it emits the two agree (the corpus cross-check)."""
    kinds, outcomes, detail = _both_models(rulebook, workloads, case(DERIVED), "worker",
                                           {"M": 64, "N": 64})
    assert "race" in kinds and "defect" in outcomes, (kinds, detail)
    kinds, outcomes, detail = _both_models(rulebook, workloads,
                                           case("valid/gemm/raw_barriers_s2.cake"), "math",
                                           {"M": 64, "N": 128, "K": 256})
    assert not kinds and "defect" in outcomes and "race" in detail, (kinds, detail)


def test_a12_pos_an_issue_only_producer_runs_on_one_warp(checker):
    text = case("valid/gemm/cutlass_coop_wgmma_s4.cake")
    schedule = parse_bytes(text.encode(), checker.vocabulary)
    roles = {r.name: r for r in schedule.roles}
    assert issuing_warp(roles["producer"]) == 0  # waits, arms, copies: one warp does it all
    assert issuing_warp(roles["consumer"]) is None  # per-thread MMA work


# ---- A13 wgmma is one operation of its warpgroup ---------------------------------------


def test_a13_pos_one_signalling_thread_per_warpgroup_after_warpgroup_wait(checker):
    wg = WarpgroupIssue()
    for warp in range(4):
        assert wg.issue(warp) == 1
    assert wg.complete(1) and wg.missing(1) == []
    assert [warpgroup_of(w) for w in (3, 4, 7, 8)] == [0, 1, 1, 2]
    # CUTLASS PipelineTmaAsync consumer: lane 0 of warps 0 and 4 releases after wait<1>
    assert blocking(checker, case("valid/gemm/cutlass_coop_wgmma_s4.cake")) == []


def test_a13_neg_a_group_is_not_complete_while_a_warp_has_not_issued_it(checker):
    wg = WarpgroupIssue()
    for warp in range(3):
        wg.issue(warp)
    wg.members.setdefault(3, 0)
    assert not wg.complete(1) and wg.missing(1) == [3]
    # the same elected release after mma.sync (no warpgroup collective): warp 0's arrive
    # does not order warps 1-3's operand reads
    text = case("invalid/gemm/coop_mma_sync_elected_release.cake")
    assert ("P011", 37) in blocking(checker, text)


# ---- A14 warp collectives --------------------------------------------------------------


def test_a14_pos_mma_sync_then_an_elected_arrive_per_warp(checker):
    """math: each warp's mma.sync reads a_s/b_s warp-wide, lane 0 of the warp arrives."""
    assert blocking(checker, case("valid/gemm/raw_barriers_s2.cake")) == []


def test_a14_neg_per_thread_reads_then_one_arrive_for_four_warps(checker, rulebook, workloads):
    both_reject(checker, rulebook, workloads,
                case("invalid/scale/role_release_without_named_sync.cake"), "P011", 36, "race")


# ---- A15 asynchronous groups -----------------------------------------------------------


def test_a15_pos_wait_group_retires_all_but_the_most_recent():
    g = AsyncGroups()
    assert [g.commit() for _ in range(3)] == [1, 2, 3]
    assert g.wait(1) == 2 and g.in_flight == 1
    g.finish()
    g.finish()
    assert g.ready(1) and not g.ready(0)


def test_a15_neg_reading_the_accumulator_before_the_group_retired(checker, rulebook,
                                                                  workloads):
    g = AsyncGroups()
    g.commit()
    assert not g.ready(0)
    with pytest.raises(BarrierError):
        AsyncGroups().finish()
    text = case("invalid/gemm/accumulator_read_before_mma_wait.cake")
    assert blocking(checker, text)
    status, detail = simulated(rulebook, workloads, text)
    assert status == "defect" and detail.startswith("race:"), detail


# ---- A16 wgmma.fence before a warpgroup's MMA (lowering) --------------------------------


def _cuda(rel: str, rulebook, workloads) -> str:
    kernel, _wl, _s, why = lower_any(case(rel).encode(), rel, rulebook, workloads)
    assert kernel is not None, why
    return emit_cuda(kernel, rulebook.primitives, verifier_digest=rulebook.digest()).source


def test_a16_pos_the_lowering_fences_every_wgmma(checker, rulebook, workloads):
    rel = "valid/gemm/cutlass_coop_wgmma_s4.cake"
    assert "fence" not in case(rel).split('"""')[2].replace("fence_proxy", "")
    src = _cuda(rel, rulebook, workloads)
    body = src[src.index("__global__"):]
    first_fence, first_mma = body.find("wgmma_fence()"), body.find("wgmma.mma_async")
    assert first_fence >= 0
    assert first_mma < 0 or first_fence < first_mma
    assert blocking(checker, case(rel)) == []  # the checker never asked for it


def test_a16_neg_no_wgmma_no_fence(rulebook, workloads):
    src = _cuda("valid/gemm/raw_barriers_s2.cake", rulebook, workloads)
    body = src[src.index("__global__"):]
    assert "wgmma_fence()" not in body


# ---- A17 bulk stores read shared memory asynchronously ---------------------------------


def test_a17_pos_store_wait_read_before_exit(checker, rulebook, workloads):
    both_clean(checker, rulebook, workloads, case("valid/scale/store_ring_s8.cake"))


def test_a17_neg_a_bulk_store_left_in_flight(checker, rulebook, workloads):
    both_reject(checker, rulebook, workloads, case("invalid/scale/store_async_not_drained.cake"),
                "P014", 20, "in flight at exit")


# ---- A18 remote arrives and copies into a peer CTA -------------------------------------


def test_a18_pos_a_cluster_sync_before_the_end(checker, rulebook, workloads):
    both_clean(checker, rulebook, workloads, case("valid/scale/cluster2_single_issuer_s2.cake"))


def test_a18_neg_a_remote_arrive_into_an_exited_cta(checker, rulebook, workloads):
    detail = both_reject(checker, rulebook, workloads,
                         case("invalid/scale/cluster_exit_without_sync.cake"), "P025", 39,
                         "in flight at exit")
    assert "remote write" in detail


# ---- A19 generic accesses before an async-proxy write ----------------------------------


def test_a19_pos_a_fence_after_the_read_and_known_to_the_writer_orders_it(checker, rulebook,
                                                                         workloads):
    # thread T reads at clock 5, fences at 6; the copy's issuer knows T up to clock 7
    assert proxy_fenced([6], 5, 7)
    assert proxy_fenced([2, 6, 9], 5, 6)  # the first fence after the read is what counts
    # two reads never conflict; an async read after a generic read needs nothing
    assert not needs_proxy_fence("generic", False, "async", False)
    assert not needs_proxy_fence("async", False, "async", True)  # one proxy: plain order
    # on a schedule: the math warps fence after their last read, before the named barrier
    # that the elected release follows
    text = case("valid/knn/rows_elected_release_s5.cake")
    assert "lm.fence_proxy()" in text
    both_clean(checker, rulebook, workloads, text)


def test_a19_neg_a_release_without_the_readers_fence(checker, rulebook, workloads):
    assert not proxy_fenced([], 5, 9)  # never fenced
    assert not proxy_fenced([4], 5, 9)  # fenced before the read, not after
    assert not proxy_fenced([8], 5, 7)  # fenced after the read but after the hand-off
    assert needs_proxy_fence("generic", False, "async", True)  # a read, then a refill
    assert needs_proxy_fence("generic", True, "async", True)  # a write, then a refill
    detail = both_reject(checker, rulebook, workloads,
                         case("invalid/knn/rows_elected_release_without_proxy_fence.cake"),
                         "P013", 37, "race")
    assert "async proxy after a generic read" in detail and "fence.proxy.async" in detail


def test_a19_neg_the_lowering_fences_an_mbarrier_release_not_a_named_barrier(rulebook,
                                                                              workloads):
    """The FA3 transcription reads K with `lm.mma` (ldmatrix, generic) and releases it
    with a per-warp arrive: the lowering fences right before the arrive, so the schedule
    needs no `lm.fence_proxy()`; a named barrier gets no fence from the lowering."""
    rel = "valid/attention/fa3_mainloop_d128.cake"
    assert "fence_proxy" not in case(rel)
    src = _cuda(rel, rulebook, workloads)
    lines = [x.strip() for x in src.splitlines()]
    arrives = [i for i, x in enumerate(lines) if x.startswith("// @ roles.math0")
               and x.endswith("mbarrier_arrive")]
    assert len(arrives) == 3  # kempty, vempty, o_done
    for i in arrives:
        before = [x for x in lines[i - 6:i] if not x.startswith("//")]
        assert "cg::fence_proxy_async();" in before, lines[i - 6:i + 1]
    named = [i for i, x in enumerate(lines) if x.startswith("cg::named_arrive<")]
    assert named and all(lines[i - 2] != "cg::fence_proxy_async();" for i in named)


# ---- the registry itself ---------------------------------------------------------------


def _resolve(ref: str) -> None:
    if "#" in ref:
        path, token = ref.split("#", 1)
        assert token in (ROOT / path).read_text(encoding="utf-8"), ref
        return
    module, qual = ref.split(":")
    obj = importlib.import_module(module)
    for part in qual.split("."):
        obj = getattr(obj, part)


def test_every_axiom_has_a_positive_and_a_negative_trace():
    names = [n for n in dir(sys.modules[__name__]) if n.startswith("test_a")]
    for a in AXIOMS:
        n = a.id[1:]
        assert any(x.startswith(f"test_a{n}_pos_") for x in names), a.id
        assert any(x.startswith(f"test_a{n}_neg_") for x in names), a.id
    known = {f"A{m.group(1)}" for x in names if (m := re.match(r"test_a(\d+)_", x))}
    assert known == {a.id for a in AXIOMS}  # no trace for an axiom that is gone


def test_every_axiom_is_sourced_numbered_and_implemented():
    assert [a.id for a in AXIOMS] == [f"A{i}" for i in range(1, len(AXIOMS) + 1)]
    for a in AXIOMS:
        assert a.status in STATUSES, a.id
        assert "PTX ISA" in a.source or "Programming Guide" in a.source, a.id
        assert "https://docs.nvidia.com/" in a.source, a.id
        assert a.implemented_by, a.id
        assert len(a.if_false) > 40, a.id  # what a device would show if it were false
        # the documentation version it was read in, and the ISA version or compute
        # capability that introduced what it rests on
        assert re.search(r"(PTX ISA|CUDA) \d+\.\d+", a.versions), a.id
        assert re.search(r"since (PTX ISA|CUDA|compute capability) \d+\.\d+", a.versions), a.id
        for ref in a.implemented_by:
            _resolve(ref)


def test_checker_docs_list_every_axiom():
    text = (ROOT / "docs" / "checker.md").read_text(encoding="utf-8")
    for a in AXIOMS:
        assert f"**{a.id} {a.title}**" in text, a.id
        assert f"  If it were false: {a.if_false}." in text, a.id
        assert f"Versions: {a.versions}." in text, a.id


def test_axiom_numbers_cited_in_code_exist():
    """A comment citing `axiom A<N>` must name an axiom of the table."""
    ids = {a.id for a in AXIOMS}
    for path in [*(ROOT / "cakegov").rglob("*.py"), *(ROOT / "rules").rglob("*.py"),
                 *(ROOT / "corpus").rglob("*.cake")]:
        for m in re.finditer(r"axioms? (A\d+)", path.read_text(encoding="utf-8")):
            assert m.group(1) in ids, (path, m.group(1))
