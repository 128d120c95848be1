"""Warp-specialized GEMM without `divisible={"K": 64}`: the loader streams
`lm.cdiv(lm.K, BK)` tiles of K, zero-padding the last one, but the math role consumes
only `lm.K // BK`. Whenever K is not a multiple of 64 (K = 321: 6 tiles loaded, 5
consumed) the last tile's products are missing from C, and its bulk copies complete on
`ring.full[1]` with no role ever waiting for them: the CTA can exit while they still
write its shared memory. Phase trace for K = 321 (4 stages): the loader acquires stages
0..3 (phase -1 of `ring.empty`), then stage 0 and 1 again after math releases tiles 0
and 1; math waits `ring.full[0..3]` phase 0 and `ring.full[0]` phase 1 and stops, so
phase 1 of `ring.full[1]` (tile 5) completes unobserved."""
@cake.schedule(target="sm_90a", workload="gemm")
def gemm_ws_tail_floor(lm, A, B, C):
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
        for k in lm.range(0, lm.K // BK):  # expect: P019
            ring.wait(k)
            lm.mma(acc, a_s[ring.stage(k)], b_s[ring.stage(k)], transpose_b=True, init=(k == 0))
            ring.release(k)
        lm.store(C, at=(m0, n0), src=acc, mask=True)
