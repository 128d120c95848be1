"""Warp-specialized GEMM whose math warpgroups raise their budget to 240 registers:
4 x 32 x 40 + 8 x 32 x 240 = 66,560 registers, over the 65,536 of an SM, so
`setmaxnreg.inc` in the math warps waits forever. Same as
corpus/valid/gemm/ws_pipeline_s4.cake except `regs=240` (was 232)."""
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def gemm_ws_s4(lm, A, B, C):
    BM, BN, BK = 128, 128, 64
    lm.launch(grid=(lm.cdiv(lm.M, BM), lm.cdiv(lm.N, BN)), warps=12)
    a_s = lm.smem("bf16", (BM, BK), stages=4, swizzle="128B")
    b_s = lm.smem("bf16", (BN, BK), stages=4, swizzle="128B")
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 12), regs=240)  # expect: R002
    acc = lm.fragment("f32", (BM, BN), role=math)
    ring = lm.pipeline(stages=4, buffers=[a_s, b_s], producer=loader, consumer=math)
    m0, n0 = lm.block(0) * BM, lm.block(1) * BN
    with loader:
        for k in lm.range(0, lm.cdiv(lm.K, BK)):
            ring.acquire(k)                                   # stage is free again
            a_s[ring.stage(k)].load(A, at=(m0, k * BK), barrier=ring.full(k), pad=True)
            b_s[ring.stage(k)].load(B, at=(n0, k * BK), barrier=ring.full(k), pad=True)
    with math:
        for k in lm.range(0, lm.cdiv(lm.K, BK)):
            ring.wait(k)                                      # data has landed
            lm.mma(acc, a_s[ring.stage(k)], b_s[ring.stage(k)], transpose_b=True, init=(k == 0))
            ring.release(k)
        lm.store(C, at=(m0, n0), src=acc, mask=True)
