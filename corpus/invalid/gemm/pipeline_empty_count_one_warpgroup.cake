"""Warp-specialized GEMM whose ring declares `empty_count=4` (one warpgroup) while the math
role has two warpgroups (8 warps) that each release a stage with one arrive per warp:
8 arrivals per phase. The first warpgroup's 4 releases complete the phase, so the loader
can overwrite a stage the second warpgroup is still reading (and the next 4 arrivals
complete a phase early).
Same as corpus/valid/gemm/ws_pipeline_s4.cake except the pipeline declares `empty_count=4`
(was derived: 8, one per math warp)."""
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def gemm_ws_empty4(lm, A, B, C):
    BM, BN, BK = 128, 128, 64
    lm.launch(grid=(lm.cdiv(lm.M, BM), lm.cdiv(lm.N, BN)), warps=12)
    a_s = lm.smem("bf16", (BM, BK), stages=4, swizzle="128B")
    b_s = lm.smem("bf16", (BN, BK), stages=4, swizzle="128B")
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 12), regs=232)
    acc = lm.fragment("f32", (BM, BN), role=math)
    ring = lm.pipeline(stages=4, buffers=[a_s, b_s], producer=loader, consumer=math,  # expect: P002
                       empty_count=4)
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
