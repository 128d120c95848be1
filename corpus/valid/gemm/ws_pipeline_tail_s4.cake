"""Warp-specialized GEMM for any K (no `divisible=`): both roles run
`lm.cdiv(lm.K, BK)` iterations and the loader zero-pads the last tile of K, so a K that
is not a multiple of 64 adds zero products and every tile loaded is also consumed.
Phase trace for K = 321 (4 stages, 6 tiles): `ring.full[s]` completes phase 0 for tiles
0..3 and phase 1 for tiles 4, 5; math observes each of them once, in order, and
releases each stage after its MMA, so the loader's second pass waits on `ring.empty[s]`
phase 0 (parity 0) and finds it complete."""
# expect: clean
@cake.schedule(target="sm_90a", workload="gemm")
def gemm_ws_tail_s4(lm, A, B, C):
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
