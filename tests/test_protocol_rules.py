"""Protocol rules classify witnessed anomalies: each defect is built from a valid schedule
kept here as a string (so that a corpus change never changes what these tests exercise)
by one edit, and checked for its code, its line, the anomaly behind it, its witness and
its fix; the valid form is checked clean. The fix of every finding was applied and
re-checked by the engine; the tests also re-apply it from the finding's data."""

from __future__ import annotations

import numpy as np
import pytest

from cakegov.analysis.grid import Store, Tiles, count
from cakegov.check.repair import apply_edits

from .conftest import CORPUS

RING = '''"""Warp-specialised GEMM, 4-stage pipeline."""
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def gemm_ws(lm, A, B, C):
    BM, BN, BK = 128, 128, 64
    lm.launch(grid=(lm.cdiv(lm.M, BM), lm.cdiv(lm.N, BN)), warps=12)
    a_s = lm.smem("bf16", (BM, BK), stages=4, swizzle="128B")
    b_s = lm.smem("bf16", (BN, BK), stages=4, swizzle="128B")
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 12), regs=232)
    acc = lm.fragment("f32", (BM, BN), role=math)
    ring = lm.pipeline(stages=4, buffers=[a_s, b_s], producer=loader, consumer=math)
    m0, n0 = lm.block(0) * BM, lm.block(1) * BN
    with loader:
        for k in lm.range(0, lm.cdiv(lm.K, BK)):
            ring.acquire(k)
            a_s[ring.stage(k)].load(A, at=(m0, k * BK), barrier=ring.full(k), pad=True)
            b_s[ring.stage(k)].load(B, at=(n0, k * BK), barrier=ring.full(k), pad=True)
    with math:
        for k in lm.range(0, lm.cdiv(lm.K, BK)):
            ring.wait(k)
            lm.mma(acc, a_s[ring.stage(k)], b_s[ring.stage(k)], transpose_b=True, init=(k == 0))
            ring.release(k)
        lm.store(C, at=(m0, n0), src=acc, mask=True)
'''

RAW = '''"""GEMM with raw barriers, 2 stages; the producer peels its first pass."""
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def gemm_raw(lm, A, B, C):
    BM, BN, BK, S = 64, 128, 64, 2
    KT = lm.cdiv(lm.K, BK)
    lm.launch(grid=(lm.cdiv(lm.M, BM), lm.cdiv(lm.N, BN)), warps=8)
    a_s = lm.smem("bf16", (BM, BK), stages=S, swizzle="128B")
    b_s = lm.smem("bf16", (BN, BK), stages=S, swizzle="128B")
    full = lm.mbarrier(count=1, stages=S)
    empty = lm.mbarrier(count=4, stages=S)
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 8), regs=232)
    acc = lm.fragment("f32", (BM, BN), role=math)
    m0, n0 = lm.block(0) * BM, lm.block(1) * BN
    with loader:
        for k in lm.range(0, lm.min(S, KT)):
            full[k].arrive_expect_tx(bytes=lm.nbytes(a_s, b_s))
            a_s[k].load(A, at=(m0, k * BK), barrier=full[k], pad=True)
            b_s[k].load(B, at=(n0, k * BK), barrier=full[k], pad=True)
        for k in lm.range(S, KT):
            empty[k % S].wait(parity=(k // S + 1) % 2)
            full[k % S].arrive_expect_tx(bytes=lm.nbytes(a_s, b_s))
            a_s[k % S].load(A, at=(m0, k * BK), barrier=full[k % S], pad=True)
            b_s[k % S].load(B, at=(n0, k * BK), barrier=full[k % S], pad=True)
    with math:
        for k in lm.range(0, KT):
            full[k % S].wait(parity=(k // S) % 2)
            lm.mma(acc, a_s[k % S], b_s[k % S], transpose_b=True, init=(k == 0))
            empty[k % S].arrive()
        lm.store(C, at=(m0, n0), src=acc, mask=True)
'''

LOOKAHEAD = '''"""GEMM with a look-ahead consumer on a 2-stage pipeline."""
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def gemm_lookahead(lm, A, B, C):
    BM, BN, BK = 128, 128, 64
    KT = lm.cdiv(lm.K, BK)
    lm.launch(grid=(lm.cdiv(lm.M, BM), lm.cdiv(lm.N, BN)), warps=12)
    a_s = lm.smem("bf16", (BM, BK), stages=2, swizzle="128B")
    b_s = lm.smem("bf16", (BN, BK), stages=2, swizzle="128B")
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 12), regs=232)
    acc = lm.fragment("f32", (BM, BN), role=math)
    ring = lm.pipeline(stages=2, buffers=[a_s, b_s], producer=loader, consumer=math)
    m0, n0 = lm.block(0) * BM, lm.block(1) * BN
    with loader:
        for k in lm.range(0, KT):
            ring.acquire(k)
            a_s[ring.stage(k)].load(A, at=(m0, k * BK), barrier=ring.full(k), pad=True)
            b_s[ring.stage(k)].load(B, at=(n0, k * BK), barrier=ring.full(k), pad=True)
    with math:
        ring.wait(0)
        for k in lm.range(0, KT - 1):
            lm.mma(acc, a_s[ring.stage(k)], b_s[ring.stage(k)], transpose_b=True, init=(k == 0))
            ring.wait(k + 1)
            ring.release(k)
        lm.mma(acc, a_s[ring.stage(KT - 1)], b_s[ring.stage(KT - 1)], transpose_b=True,
               init=(KT == 1))
        ring.release(KT - 1)
        lm.store(C, at=(m0, n0), src=acc, mask=True)
'''

STAGED = '''"""Scale with a staged epilogue: generic writes, then an elected arrive."""
@cake.schedule(target="sm_90a", workload="scale", divisible={"N": 4})
def scale_staged(lm, X, Y):
    TM, TN = 16, 256
    lm.launch(grid=(lm.cdiv(lm.M, TM), lm.cdiv(lm.N, TN)), warps=WARPS)
    x_s = lm.smem("f32", (TM, TN))
    y_s = lm.smem("f32", (TM, TN))
    full = lm.mbarrier(count=1)
    done = lm.mbarrier(count=1)
    worker = lm.role(warps=range(0, WW))
    storer = lm.role(warps=range(WW, WARPS))
    y = lm.fragment("f32", (TM, TN), role=storer)
    m0, n0 = lm.block(0) * TM, lm.block(1) * TN
    with worker:
        full[0].arrive_expect_tx(bytes=lm.nbytes(x_s))
        x_s[0].load(X, at=(m0, n0), barrier=full[0], pad=True)
        full[0].wait(parity=0)
        lm.elementwise(y_s[0], x_s[0], op="scale", alpha=2.5)
        lm.syncwarp()
        done[0].arrive(per="role")
    with storer:
        done[0].wait(parity=0)
        lm.elementwise(y, y_s[0], op="copy")
        lm.store(Y, at=(m0, n0), src=y, mask=True)
'''

HANDOFF = '''"""Scale split over a loader and a worker meeting at a named barrier."""
@cake.schedule(target="sm_90a", workload="scale", divisible={"N": 4})
def scale_handoff(lm, X, Y):
    TM, TN = 32, 256
    lm.launch(grid=(lm.cdiv(lm.M, TM), lm.cdiv(lm.N, TN)), warps=8)
    x_s = lm.smem("f32", (TM, TN))
    full = lm.mbarrier(count=1)
    ready = lm.named_barrier(id=1, threads=256)
    loader = lm.role(warps=range(0, 4))
    worker = lm.role(warps=range(4, 8))
    y = lm.fragment("f32", (TM, TN), role=worker)
    m0, n0 = lm.block(0) * TM, lm.block(1) * TN
    with loader:
        full[0].arrive_expect_tx(bytes=lm.nbytes(x_s))
        x_s[0].load(X, at=(m0, n0), barrier=full[0], pad=True)
        full[0].wait(parity=0)
        ready.arrive()
    with worker:
        ready.sync()
        lm.elementwise(y, x_s[0], op="scale", alpha=2.5)
        lm.store(Y, at=(m0, n0), src=y, mask=True)
'''

TILE = '''"""Scale, one tile per CTA."""
@cake.schedule(target="sm_90a", workload="scale", divisible={"M": 32, "N": 256})
def scale_tile(lm, X, Y):
    TM, TN = 32, 256
    lm.launch(grid=(lm.cdiv(lm.M, TM), lm.cdiv(lm.N, TN)), warps=4)
    x_s = lm.smem("f32", (TM, TN))
    full = lm.mbarrier(count=1)
    worker = lm.role(warps=range(0, 4))
    y = lm.fragment("f32", (TM, TN), role=worker)
    m0, n0 = lm.block(0) * TM, lm.block(1) * TN
    with worker:
        full[0].arrive_expect_tx(bytes=lm.nbytes(x_s))
        x_s[0].load(X, at=(m0, n0), barrier=full[0], pad=True)
        full[0].wait(parity=0)
        lm.elementwise(y, x_s[0], op="scale", alpha=2.5)
        lm.store(Y, at=(m0, n0), src=y, mask=True)
'''

KMEANS = '''"""k-means rows through a 2-stage ring."""
@cake.schedule(target="sm_90a", workload="kmeans_assign", sizes={"K": 16, "D": 64})
def kmeans_rows(lm, X, C, labels):
    BR, TILES = 64, 4
    lm.launch(grid=(lm.cdiv(lm.N, BR * TILES),), warps=8)
    c_s = lm.smem("f32", (16, 64))
    x_s = lm.smem("f32", (BR, 64), stages=2)
    cbar = lm.mbarrier(count=1)
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 8), regs=232)
    dist = lm.fragment("f32", (BR, 16), role=math)
    lab = lm.fragment("i32", (BR,), role=math)
    ring = lm.pipeline(stages=2, buffers=[x_s], producer=loader, consumer=math)
    r0 = lm.block(0) * BR * TILES
    with loader:
        cbar[0].arrive_expect_tx(bytes=lm.nbytes(c_s))
        c_s[0].load(C, at=(0, 0), barrier=cbar[0])
        for t in lm.range(0, TILES):
            ring.acquire(t)
            x_s[ring.stage(t)].load(X, at=(r0 + t * BR, 0), barrier=ring.full(t), pad=True)
    with math:
        cbar[0].wait(parity=0)
        for t in lm.range(0, TILES):
            ring.wait(t)
            lm.sqdist(dist, x_s[ring.stage(t)], c_s)
            ring.release(t)
            lm.reduce(lab, dist, op="argmin", axis=1)
            lm.store(labels, at=(r0 + t * BR,), src=lab, mask=True)
'''




def _edit(src: str, old: str, new: str) -> str:
    assert old in src, old
    return src.replace(old, new, 1)


def _line(src: str, text: str) -> int:
    """1-based line of the first line containing `text`."""
    return next(i for i, ln in enumerate(src.splitlines(), 1) if text in ln)


def _check(checker, src):
    result = checker.check_bytes(src.encode(), "t.cake")
    assert not [f for f in result.findings if f.authority == "internal"], result.findings
    return result


def _blocking(result):
    return [f for f in result.findings if f.severity == "blocking"]


def _only(checker, src, code):
    """The single blocking finding of a schedule, which must be of rule `code`, with its
    witness; its machine fix, applied to the source, leaves a clean schedule."""
    result = _check(checker, src)
    found = _blocking(result)
    assert [f.code for f in found] == [code], [(f.code, f.message) for f in found]
    f = found[0]
    assert f.evidence.get("witness"), f
    for fix in f.fixes:
        if fix.applicability == "machine":
            fixed = _check(checker, apply_edits(src, fix.edits))
            assert fixed.verdict == "clean", [(g.code, g.message) for g in fixed.findings]
    return f


STAGED1 = STAGED.replace("WARPS", "5").replace("WW", "1")
STAGED4 = STAGED.replace("WARPS", "8").replace("WW", "4")


@pytest.mark.parametrize("src", [RING, RAW, LOOKAHEAD, HANDOFF, KMEANS, TILE, STAGED1],
                         ids=["ring", "raw-peeled", "lookahead", "handoff", "kmeans", "tile",
                              "staged"])
def test_valid_forms_are_clean(checker, src):
    result = _check(checker, src)
    assert result.verdict == "clean", [(f.code, f.message) for f in result.findings]


# ---- P008 ---------------------------------------------------------------------------


def test_missing_acquire_is_a_race_and_a_deadlock_fixed_by_the_acquire(checker):
    src = _edit(RING, "            ring.acquire(k)\n", "")
    f = _only(checker, src, "P008")
    assert f.span.line == _line(src, "a_s[ring.stage(k)].load")
    assert f.role == "loader" and f.resource == "a_s"
    [fix] = f.fixes
    assert [e.text.strip() for e in fix.edits] == ["ring.acquire(k)"]


def test_missing_raw_empty_wait_is_inserted_at_the_start_of_the_iteration(checker):
    src = _edit(RAW, "            empty[k % S].wait(parity=(k // S + 1) % 2)\n", "")
    f = _only(checker, src, "P008")
    assert f.span.line == _line(src, "a_s[k % S].load")
    [fix] = f.fixes
    assert fix.edits[0].text.strip() == "empty[k % S].wait(parity=(k // S + 1) % 2)"


def test_missing_wait_points_at_the_read(checker):
    src = _edit(KMEANS, "            ring.wait(t)\n", "")
    f = _only(checker, src, "P008")
    assert f.span.line == _line(src, "lm.sqdist")
    assert (f.resource, f.role) == ("x_s", "math")
    assert [e.text.strip() for e in f.fixes[0].edits] == ["ring.wait(t)"]


# ---- P010: a release hoisted above a synchronous read ---------------------------------


def test_a_release_above_its_read_is_an_early_release_not_a_missing_wait(checker):
    """The producer waits for every hand-back; the consumer hands the stage back before
    reading it. The rule is P010 at the release, whose fix moves it after the read, and
    P008 does not claim the race with a wait on some other barrier."""
    src = _edit(KMEANS, "            lm.sqdist(dist, x_s[ring.stage(t)], c_s)\n"
                "            ring.release(t)\n",
                "            ring.release(t)\n"
                "            lm.sqdist(dist, x_s[ring.stage(t)], c_s)\n")
    f = _only(checker, src, "P010")
    assert f.span.line == _line(src, "ring.release(t)")
    assert (f.resource, f.role, f.stage) == ("x_s", "math", 0)
    assert "before line" in f.message and f.evidence["anomaly"] == "race"
    fixed = apply_edits(src, f.fixes[0].edits)
    assert fixed == KMEANS


def test_a_raw_release_sharing_a_line_with_its_sync_moves_with_it(checker):
    """`lm.syncwarp(); empty.arrive()` on one line above the mma: the finding points at
    the arrive's column, and the fix moves the sync and the arrive together (moving the
    arrive alone would leave the lanes' reads unordered before it)."""
    src = _edit(RAW, "            lm.mma(acc, a_s[k % S], b_s[k % S], transpose_b=True, "
                "init=(k == 0))\n            empty[k % S].arrive()\n",
                "            lm.syncwarp(); empty[k % S].arrive()\n"
                "            lm.mma(acc, a_s[k % S], b_s[k % S], transpose_b=True, "
                "init=(k == 0))\n")
    f = _only(checker, src, "P010")
    line = _line(src, "lm.syncwarp(); empty")
    assert (f.span.line, f.span.col) == (line, src.splitlines()[line - 1].index("empty") + 1)
    fixed = apply_edits(src, f.fixes[0].edits)
    lines = fixed.splitlines()
    mma = next(i for i, ln in enumerate(lines) if "lm.mma(acc, a_s[k % S]" in ln)
    assert lines[mma + 1].strip() == "lm.syncwarp(); empty[k % S].arrive()"


# ---- P009 ---------------------------------------------------------------------------


def test_missing_release_deadlocks_and_the_fix_releases_in_the_loop(checker):
    src = _edit(RING, "            ring.release(k)\n", "")
    f = _only(checker, src, "P009")
    assert f.evidence["anomaly"] == "deadlock"
    assert "ring.release(k)" in f.fixes[0].edits[0].text


def test_extra_release_in_a_persistent_ring_races(checker):
    src = _edit(KMEANS, "            lm.store(labels, at=(r0 + t * BR,), src=lab, mask=True)\n",
                "            lm.store(labels, at=(r0 + t * BR,), src=lab, mask=True)\n"
                "        ring.release(TILES - 1)\n")
    # one pass over the ring: the extra release frees a stage nobody uses again, which no
    # execution can tell from a correct kernel; legal (witness or nothing)
    assert _check(checker, src).verdict == "clean"


# ---- P011 ---------------------------------------------------------------------------


def test_elected_arrive_of_a_one_warp_role_needs_no_user_syncwarp(checker):
    """The convergence contract (docs/language.md): the lowering derives the __syncwarp
    before the elected arrive, so the checker does not ask the schedule for it."""
    src = _edit(STAGED1, "        lm.syncwarp()\n", "")
    assert _check(checker, src).verdict == "clean"


def test_syncwarp_is_not_enough_for_a_role_of_several_warps(checker):
    f = _only(checker, STAGED4, "P011")
    texts = [e.text.strip() for e in f.fixes[0].edits]
    assert texts[0].endswith("lm.named_barrier(id=15, threads=128)") and \
        texts[1].endswith(".sync()")


def test_per_thread_arrive_needs_no_sync(checker):
    src = _edit(STAGED4, "        lm.syncwarp()\n", "")
    src = _edit(src, 'done[0].arrive(per="role")', 'done[0].arrive(per="thread")')
    src = _edit(src, "done = lm.mbarrier(count=1)", "done = lm.mbarrier(count=128)")
    assert _check(checker, src).verdict == "clean"


def test_a_role_reads_then_one_thread_releases_for_all_its_warps(checker):
    """The issue's miss: four warps read a stage, one thread hands it back; the other
    warps may still read while the next copy overwrites it."""
    src = _edit(KMEANS, "ring = lm.pipeline(stages=2, buffers=[x_s], producer=loader, "
                "consumer=math)",
                "full = lm.mbarrier(count=1, stages=2)\n    empty = lm.mbarrier(count=1, "
                "stages=2)")
    src = _edit(src, "            ring.acquire(t)\n            x_s[ring.stage(t)].load(X, at="
                "(r0 + t * BR, 0), barrier=ring.full(t), pad=True)",
                "            empty[t % 2].wait(parity=(t // 2 + 1) % 2)\n"
                "            full[t % 2].arrive_expect_tx(bytes=lm.nbytes(x_s))\n"
                "            x_s[t % 2].load(X, at=(r0 + t * BR, 0), barrier=full[t % 2], "
                "pad=True)")
    src = _edit(src, "            ring.wait(t)\n            lm.sqdist(dist, x_s[ring.stage(t)], "
                "c_s)\n            ring.release(t)",
                "            full[t % 2].wait(parity=(t // 2) % 2)\n"
                "            lm.sqdist(dist, x_s[t % 2], c_s)\n"
                '            empty[t % 2].arrive(per="role")')
    f = _only(checker, src, "P011")
    assert f.span.line == _line(src, 'empty[t % 2].arrive(per="role")')
    assert f.evidence["anomaly"] == "race"
    # a named barrier over the role and its sync, each thread fencing its generic reads
    # first: the barrier alone orders them for generic accesses, not for the refill
    edits = [e.text.strip() for e in f.fixes[0].edits]
    assert len(edits) == 3 and edits[1] == "lm.fence_proxy()"
    assert edits[2].endswith(".sync()") and "named_barrier" in edits[0]


# ---- P015 ---------------------------------------------------------------------------


def test_extra_named_sync_deadlocks(checker):
    src = _edit(HANDOFF, "        lm.store(Y,", "        ready.sync()\n        lm.store(Y,")
    f = _only(checker, src, "P015")
    assert f.evidence["anomaly"] == "deadlock"
    assert "waits at named barrier 1" in f.evidence["witness"][-1]["text"] or \
        "blocks forever" in f.evidence["witness"][-1]["text"]


# ---- P016 ---------------------------------------------------------------------------


def test_self_cycle_wait_before_arm(checker):
    src = _edit(TILE, "        full[0].wait(parity=0)\n", "")
    src = _edit(src, "        full[0].arrive_expect_tx", "        full[0].wait(parity=0)\n"
                "        full[0].arrive_expect_tx")
    f = _only(checker, src, "P016")
    assert f.span.line == _line(src, "full[0].wait(parity=0)")


def test_lookahead_on_one_stage_is_a_cycle(checker):
    src = LOOKAHEAD.replace("stages=2", "stages=1")
    f = _only(checker, src, "P016")
    assert f.span.line == _line(src, "ring.wait(k + 1)")


# ---- P017 ---------------------------------------------------------------------------


def test_floor_grid_leaves_a_hole_at_launch(checker):
    src = _edit(RING, "grid=(lm.cdiv(lm.M, BM),", "grid=(lm.M // BM,")
    f = _only(checker, src, "P017")
    assert f.span.line == _line(src, "lm.launch")
    assert "`C`[896, 0]" in f.message and "axis 0 has 7 CTA(s) but needs 8" in f.message


def test_overlapping_tiles_are_written_twice(checker):
    src = _edit(KMEANS, "r0 = lm.block(0) * BR * TILES", "r0 = lm.block(0) * BR")
    f = _only(checker, src, "P017")
    assert f.span.line == _line(src, "lm.store(labels")
    assert "`labels`[64] is written 2 times" in f.message


def test_unmasked_overshoot_is_out_of_bounds_but_masked_is_fine(checker):
    src = _edit(TILE, "grid=(lm.cdiv(lm.M, TM),", "grid=(lm.cdiv(lm.M, TM) + 1,")
    assert _check(checker, src).verdict == "clean"  # masked: the extra CTAs write nothing
    src = _edit(src, "src=y, mask=True)", "src=y)")
    f = _only(checker, src, "P017")
    assert "CTA (8, 0)" in f.message and "outside `Y` of shape [256, 256]" in f.message


def test_output_never_stored(checker):
    src = _edit(TILE, "        lm.store(Y, at=(m0, n0), src=y, mask=True)\n", "")
    f = _only(checker, src, "P017")
    assert "no role stores the output `Y`" in f.message


def test_coverage_counts_on_compressed_grid():
    store = Store("s", 1, "r", "T", (), (4, 4), True, ())
    tiles = Tiles(store, np.array([[0, 0], [2, 2], [8, 8]]), np.zeros((3, 3), np.int64))
    cover = count((8, 8), [tiles])
    assert cover.at((3, 3)) == 2 and cover.at((0, 0)) == 1 and cover.at((7, 0)) == 0
    assert cover.cells(cover.counts > 1) == (4, (2, 2))
    assert cover.cells(cover.counts == 0)[0] == 64 - 16 - 16 + 4


# ---- P027, P028, P010 on a stage released above its read ---------------------------------


def test_peeled_wait_gets_the_position_its_iteration_has(checker):
    src = (CORPUS / "invalid/gemm/coop_peeled_last_wait_next_position.cake").read_text()
    f = _only(checker, src, "P027")
    assert f.span.line == _line(src, "# expect: P027")
    # the loop runs over range(0, KT - 1): the peeled iteration is position KT - 1, in
    # the schedule's own names, stage and parity together
    assert [e.text for e in f.fixes[0].edits] == [
        "full[(KT - 1) % S].wait(parity=(KT - 1) // S % 2)"]


def test_accumulator_used_before_its_group_wait_moves_after_the_wait(checker):
    src = (CORPUS / "invalid/gemm/accumulator_read_before_mma_wait.cake").read_text()
    f = _only(checker, src, "P028")
    assert f.span.line == _line(src, "# expect: P028")
    assert f.resource == "acc" and f.role == "math"
    assert "lm.mma_wait` of line" in f.fixes[0].description


def test_release_above_the_read_is_p010_though_another_ring_releases_later(checker):
    """The math role releases the K stage above the QK^T mma that reads it and releases
    the V ring after it in the same iteration: the later arrive is on another barrier,
    so the K release is still the hoisted one (P010), not a missing wait (P008/P099)."""
    src = (CORPUS / "invalid/attention/k_released_before_mma.cake").read_text()
    f = _only(checker, src, "P010")
    assert f.span.line == _line(src, "# expect: P010")


def test_one_rule_cannot_spend_the_repair_search_of_the_rules_after_it(checker, rulebook,
                                                                        workloads):
    """Each rule, in each pass, may analyse at most MAX_RULE_REANALYSES edited schedules
    whole; the check as a whole MAX_REANALYSES. A broad search (a wait before every read)
    that uses up its share leaves the rest to the rules after it (the persistent FA3
    restart in the corpus was P099 before: its P026 repair was never tried)."""
    from cakegov.check.context import MAX_REANALYSES, MAX_RULE_REANALYSES, CheckContext
    from cakegov.ir.parse import parse_bytes

    schedule = parse_bytes(RING.encode(), checker.vocabulary)
    ctx = CheckContext(schedule, "t.cake", rulebook.targets["sm_90a"],
                       workloads["gemm"], rulebook.primitives)
    ctx._begin_rule()
    assert not ctx.repairs_spent()
    ctx._full = MAX_RULE_REANALYSES
    assert ctx.repairs_spent()  # this rule's share is used up
    ctx._begin_rule()
    assert not ctx.repairs_spent()  # the next rule starts with its own
    ctx._full = MAX_REANALYSES
    ctx._begin_rule()
    assert ctx.repairs_spent()  # the whole check's bound holds for every rule
    assert MAX_RULE_REANALYSES < MAX_REANALYSES


# ---- P029 ---------------------------------------------------------------------------


@pytest.mark.parametrize("src, old, new, at, fixed", [
    # a read one stage ahead of its wait (pipeline): the read's iteration is the fix
    (RING, "lm.mma(acc, a_s[ring.stage(k)]", "lm.mma(acc, a_s[ring.stage(k + 1)]",
     "lm.mma(acc", "k"),
    # the wait on the next slot before reads of this one (raw): the wait's index
    (RAW, "            full[k % S].wait(parity=(k // S) % 2)\n",
     "            full[(k + 1) % S].wait(parity=(k // S) % 2)\n", "full[(k + 1) % S].wait",
     "k % S"),
    # the release of the next stage (raw)
    (RAW, "            empty[k % S].arrive()\n", "            empty[(k + 1) % S].arrive()\n",
     "empty[(k + 1) % S].arrive", "k % S"),
    # the arm of the next slot, the copies on this one
    (RAW, "            full[k % S].arrive_expect_tx(",
     "            full[(k + 1) % S].arrive_expect_tx(", "full[(k + 1) % S].arrive_expect_tx",
     "k % S"),
    # a copy into the next stage, its bytes counted on this stage's barrier
    (RAW, "            b_s[k % S].load(", "            b_s[(k + 1) % S].load(",
     "b_s[(k + 1) % S].load", "k % S"),
])
def test_one_ring_statement_naming_another_position_is_the_defect(checker, src, old, new,
                                                                    at, fixed):
    """The statement whose ring position disagrees with the rest of its iteration is named,
    and its fix is that one index (the rules that would insert a wait or change a parity
    are not asked first: phase `early`)."""
    bad = _edit(src, old, new)
    f = _only(checker, bad, "P029")
    assert f.span.line == _line(bad, at)
    [fix] = f.fixes
    [edit] = fix.edits
    assert edit.text == fixed and edit.span.line == f.span.line


def test_a_release_of_the_previous_stage_is_not_an_odd_position(checker):
    """CUTLASS's `mma_wait(pending=1)` then a release of position k - 1 differs from the rest
    of its iteration on purpose: the rule's proposal (release k) is re-checked, refused, and
    the schedule stays clean."""
    text = (CORPUS / "valid/gemm/cutlass_coop_wgmma_s4.cake").read_text()
    assert "empty[(k - 1) % S].arrive()" in text
    assert _check(checker, text).verdict == "clean"


def test_the_restage_repair_edits_the_position_at_each_selector(checker):
    from cakegov.check.repair import RepairError, SourceEditor
    from cakegov.ir.parse import parse_bytes
    from cakegov.plugin import Repair

    bad = _edit(RING, "lm.mma(acc, a_s[ring.stage(k)]", "lm.mma(acc, a_s[ring.stage(k + 1)]")
    schedule = parse_bytes(bad.encode(), checker.vocabulary)
    editor = SourceEditor(bad, schedule)
    wait, mma = "roles.math.body[0].body[0]", "roles.math.body[0].body[1]"
    [edit] = editor.edits(Repair("restage", mma, arg="view:a_s", other=wait, form="recv"))
    assert edit.text == "k" and bad.splitlines()[edit.span.line - 1][
        edit.span.col - 1:edit.span.end_col - 1] == "k + 1"
    [edit] = editor.edits(Repair("restage", wait, arg="recv", other=mma, form="view:a_s"))
    assert edit.text == "k + 1"  # the other way round: the wait takes the read's position
    with pytest.raises(RepairError):  # already the same position
        editor.edits(Repair("restage", mma, arg="view:b_s", other=wait, form="recv"))
    with pytest.raises(RepairError):  # no such view
        editor.edits(Repair("restage", wait, arg="view:a_s", other=mma, form="recv"))


def test_a_deleted_warm_up_arrival_is_primed_before_the_later_roles_loop(checker):
    """FA3 without math1's `mma_init` arrive on math0's scheduler barrier: each warpgroup
    signals the other's barrier only after waiting on its own, so both wait forever. P015
    proposes one `sched0.arrive()` before math1's loop (the later warpgroup primes, so the
    earlier goes first, as FA3 orders them); the re-check confirms it."""
    text = (CORPUS / "valid/attention/fa3_mainloop_d128.cake").read_text()
    bad = _edit(text, "        sched0.arrive()                                     # mma_init: "
                      "WG2 lets WG1 go first\n", "")
    f = _only(checker, bad, "P015")
    assert f.role == "math1"
    [edit] = f.fixes[0].edits
    assert edit.text.strip() == "sched0.arrive()" and edit.span.line == f.span.line
    assert bad.splitlines()[f.span.line - 1].strip().startswith("for j in lm.range(")
