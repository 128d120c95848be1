"""Persistent look-ahead GEMM: each CTA computes two output tiles through one 2-stage ring
whose phases carry over from tile to tile (ring iteration `tile * KT + k`). Per tile
the math role waits for iteration k + 1 before releasing k, and after the loop it
should drain the last stage (`ring.release(tile * KT + KT - 1)`); that drain is
missing. Phase trace (KT = 4, stage 1 = iterations 1, 3, 5, 7): tile 0 releases
iterations 0..2 but never 3, so phase 1 of `ring.empty[1]` never completes; the
loader's acquire of iteration 5 (tile 1) waits for it forever while math waits for the
data of iteration 5 (deadlock)."""
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def gemm_lookahead_s2_no_drain(lm, A, B, C):
    BM, BN, BK, TILES = 128, 128, 64, 2
    KT = lm.cdiv(lm.K, BK)
    lm.launch(grid=(lm.cdiv(lm.M, BM * TILES), lm.cdiv(lm.N, BN)), warps=12)
    a_s = lm.smem("bf16", (BM, BK), stages=2, swizzle="128B")
    b_s = lm.smem("bf16", (BN, BK), stages=2, swizzle="128B")
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 12), regs=232)
    acc = lm.fragment("f32", (BM, BN), role=math)
    ring = lm.pipeline(stages=2, buffers=[a_s, b_s], producer=loader, consumer=math)
    n0 = lm.block(1) * BN
    with loader:
        for tile in lm.range(0, TILES):
            m0 = (lm.block(0) * TILES + tile) * BM
            for k in lm.range(0, KT):
                ring.acquire(tile * KT + k)
                a_s[ring.stage(tile * KT + k)].load(A, at=(m0, k * BK),
                                                     barrier=ring.full(tile * KT + k), pad=True)
                b_s[ring.stage(tile * KT + k)].load(B, at=(n0, k * BK),
                                                     barrier=ring.full(tile * KT + k), pad=True)
    with math:
        for tile in lm.range(0, TILES):
            m0 = (lm.block(0) * TILES + tile) * BM
            ring.wait(tile * KT)
            for k in lm.range(0, KT - 1):  # expect: P009
                lm.mma(acc, a_s[ring.stage(tile * KT + k)], b_s[ring.stage(tile * KT + k)],
                       transpose_b=True, init=(k == 0))
                ring.wait(tile * KT + k + 1)
                ring.release(tile * KT + k)
            lm.mma(acc, a_s[ring.stage(tile * KT + KT - 1)], b_s[ring.stage(tile * KT + KT - 1)],
                   transpose_b=True, init=(KT == 1))
            lm.store(C, at=(m0, n0), src=acc, mask=True)
