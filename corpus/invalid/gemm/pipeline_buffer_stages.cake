"""Warp-specialized GEMM whose 4-stage ring owns a B buffer declared with only 2 stages:
ring stages 2 and 3 address memory past the end of `b_s`.
Same as corpus/valid/gemm/ws_pipeline_s4.cake except `b_s` has `stages=2` (was 4)."""
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def gemm_ws_b2(lm, A, B, C):
    BM, BN, BK = 128, 128, 64
    lm.launch(grid=(lm.cdiv(lm.M, BM), lm.cdiv(lm.N, BN)), warps=12)
    a_s = lm.smem("bf16", (BM, BK), stages=4, swizzle="128B")
    b_s = lm.smem("bf16", (BN, BK), stages=2, swizzle="128B")
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 12), regs=232)
    acc = lm.fragment("f32", (BM, BN), role=math)
    ring = lm.pipeline(stages=4, buffers=[a_s, b_s], producer=loader, consumer=math)  # expect: H006
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
