"""Flow rules: P008 missing acquire/wait, P009 release count, P011 elected arrive, P015
named-barrier uses, P016 wait-for cycles, P017 grid coverage. Each defect is built from a
valid schedule kept here as a string (so that a corpus change never changes what these
tests exercise) and checked for its code, line, numbers and witness; the valid form is
checked clean."""

from __future__ import annotations

import numpy as np
import pytest

from cakegov.analysis.grid import Store, Tiles, count

FLOW = {"P008", "P009", "P011", "P015", "P016", "P017"}

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
    """The single blocking finding of a schedule, which must be of rule `code`."""
    result = _check(checker, src)
    found = _blocking(result)
    assert [f.code for f in found] == [code], [(f.code, f.message) for f in found]
    return found[0]


@pytest.mark.parametrize("src", [
    RING, RAW, LOOKAHEAD, HANDOFF, KMEANS, TILE,
    STAGED.replace("WARPS", "5").replace("WW", "1"),
], ids=["ring", "raw-peeled", "lookahead", "handoff", "kmeans", "tile", "staged"])
def test_valid_forms_are_clean(checker, src):
    result = _check(checker, src)
    assert result.verdict == "clean", [(f.code, f.message) for f in result.findings]


# ---- P008 ---------------------------------------------------------------------------


def test_missing_acquire_names_buffer_stage_roles_and_race(checker):
    src = _edit(RING, "            ring.acquire(k)\n", "")
    f = _only(checker, src, "P008")
    assert f.span.line == _line(src, "a_s[ring.stage(k)].load")
    assert (f.resource, f.stage, f.role) == ("a_s", "0", "loader")
    assert "at k=4" in f.message and "`math`" in f.message
    assert "ring.acquire(k)" in f.hint and "32768 transaction bytes" in f.hint
    witness = f.evidence["witness"]
    assert "what_if" in f.evidence
    assert any("k=4" in step and "a_s[0]" in step for step in witness)
    assert "math" in witness[-1] and "a_s[0]" in witness[-1]


def test_missing_raw_empty_wait_is_a_missing_acquire(checker):
    src = _edit(RAW, "            empty[k % S].wait(parity=(k // S + 1) % 2)\n", "")
    f = _only(checker, src, "P008")
    assert f.span.line == _line(src, "a_s[k % S].load")
    assert "at k=2" in f.message and "`empty[0]`" in f.hint
    assert f.evidence["witness"] and "what_if" not in f.evidence


def test_missing_wait_points_at_the_read(checker):
    src = _edit(KMEANS, "            ring.wait(t)\n", "")
    f = _only(checker, src, "P008")
    assert f.span.line == _line(src, "lm.sqdist")
    assert (f.resource, f.stage, f.role) == ("x_s", "0", "math")
    assert "`ring.full[0]`" in f.condition and "needs 1" in f.condition
    assert f.hint == "add `ring.wait(t)` before this read"
    assert any("sqdist" in step for step in f.evidence["witness"])


def test_skipped_first_empty_wait_only_in_main_loop_is_caught(checker):
    """The peeled prologue may skip the wait; the main loop may not."""
    src = _edit(RAW, "            empty[k % S].wait(parity=(k // S + 1) % 2)\n", "")
    assert _only(checker, src, "P008").evidence["iteration"] == {"k": 2}


# ---- P009 ---------------------------------------------------------------------------


def test_missing_release_points_at_consumer_loop(checker):
    src = _edit(RING, "            ring.release(k)\n", "")
    f = _only(checker, src, "P009")
    assert f.span.line == _line(src, "for k in lm.range(0, lm.cdiv(lm.K, BK)):") + 5
    assert "never releases" in f.message and "deadlocks after 4 iteration(s)" in f.message
    assert f.evidence["stages"]["ring.empty[0]"] == {"taken": 3, "released": 0}
    assert f.evidence["anomaly"] == "deadlock"


def test_missing_drain_after_lookahead_loop(checker):
    src = _edit(LOOKAHEAD, "        ring.release(KT - 1)\n", "")
    f = _only(checker, src, "P009")
    assert f.span.line == _line(src, "for k in lm.range(0, KT - 1):")
    assert "releases only 2" in f.message and "drain" in f.hint


def test_extra_release_points_at_it(checker):
    src = _edit(KMEANS, "            lm.store(labels, at=(r0 + t * BR,), src=lab, mask=True)\n",
                "            lm.store(labels, at=(r0 + t * BR,), src=lab, mask=True)\n"
                "        ring.release(0)\n")
    f = _only(checker, src, "P009")
    assert f.span.line == _line(src, "ring.release(0)")
    assert "releases stage 0 (`x_s`) 3 times but takes it only 2 times" in f.message


def test_release_in_other_order_and_release_without_read_are_balanced(checker):
    pairs = _edit(RING, "            ring.wait(k)\n            lm.mma(acc, a_s[ring.stage(k)], "
                  "b_s[ring.stage(k)], transpose_b=True, init=(k == 0))\n",
                  "            ring.wait(k)\n")
    result = _check(checker, pairs)
    assert not {f.code for f in _blocking(result)} & FLOW


# ---- P011 ---------------------------------------------------------------------------


def test_elected_arrive_without_syncwarp(checker):
    src = STAGED.replace("WARPS", "5").replace("WW", "1")
    src = _edit(src, "        lm.syncwarp()\n", "")
    f = _only(checker, src, "P011")
    assert f.span.line == _line(src, 'done[0].arrive(per="role")')
    assert f.resource == "done" and f.role == "worker" and "`storer`" in f.message
    assert "`lm.syncwarp()`" in f.hint
    assert f.evidence["witness"][0].startswith("worker line") and len(f.evidence["witness"]) == 4


def test_syncwarp_is_not_enough_for_a_role_of_several_warps(checker):
    src = STAGED.replace("WARPS", "8").replace("WW", "4")
    f = _only(checker, src, "P011")
    assert "named-barrier `sync` of the whole role (128 threads" in f.hint


def test_per_thread_arrive_needs_no_sync(checker):
    src = STAGED.replace("WARPS", "8").replace("WW", "4")
    src = _edit(src, "        lm.syncwarp()\n", "")
    src = _edit(src, 'done[0].arrive(per="role")', 'done[0].arrive(per="thread")')
    src = _edit(src, "done = lm.mbarrier(count=1)", "done = lm.mbarrier(count=128)")
    assert "P011" not in {f.code for f in _check(checker, src).findings}


# ---- P015 ---------------------------------------------------------------------------


def test_extra_named_sync_deadlocks(checker):
    src = _edit(HANDOFF, "        lm.store(Y,", "        ready.sync()\n        lm.store(Y,")
    f = _only(checker, src, "P015")
    assert f.span.line == _line(src, "lm.store(Y,") - 1
    assert "`loader` 1x, `worker` 2x" in f.message and "deadlock" in f.message
    assert f.evidence["uses"] == {"loader": 1, "worker": 2}
    assert "waits at named barrier 1" in f.evidence["witness"][-1]


# ---- P016 ---------------------------------------------------------------------------


def test_self_cycle_wait_before_arm(checker):
    src = _edit(TILE, "        full[0].wait(parity=0)\n", "")
    src = _edit(src, "        full[0].arrive_expect_tx", "        full[0].wait(parity=0)\n"
                "        full[0].arrive_expect_tx")
    f = _only(checker, src, "P016")
    assert f.span.line == _line(src, "full[0].wait(parity=0)")
    assert "worker -[full[0]] -> worker" in f.message
    assert f.evidence["cycle"][0]["provider_line"] == f.span.line + 1
    assert f.evidence["witness"][-1].startswith("worker line")


def test_lookahead_on_one_stage_is_a_cycle(checker):
    src = LOOKAHEAD.replace("stages=2", "stages=1")
    f = _only(checker, src, "P016")
    assert f.span.line == _line(src, "ring.wait(k + 1)")
    assert "loader -[ring.empty[0]] -> math -[ring.full[0]] -> loader" in f.message
    assert "ring.empty[0]" in f.hint


# ---- P017 ---------------------------------------------------------------------------


def test_floor_grid_leaves_a_hole_at_launch(checker):
    src = _edit(RING, "grid=(lm.cdiv(lm.M, BM),", "grid=(lm.M // BM,")
    f = _only(checker, src, "P017")
    assert f.span.line == _line(src, "lm.launch")
    assert "`C`[896, 0]" in f.message and "axis 0 has 7 CTA(s) but needs 8" in f.message
    assert f.evidence["needed"] == {"0": 8}


def test_overlapping_tiles_are_written_twice(checker):
    src = _edit(KMEANS, "r0 = lm.block(0) * BR * TILES", "r0 = lm.block(0) * BR")
    f = _only(checker, src, "P017")
    assert f.span.line == _line(src, "lm.store(labels")
    assert "`labels`[64] is written 2 times" in f.message
    assert sorted(f.evidence["ctas"]) == [[0, 0, 0], [1, 0, 0]]


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
