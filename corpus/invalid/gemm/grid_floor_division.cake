"""Derived from corpus/valid/gemm/ws_pipeline_s4.cake with the grid sized by floor
division (`lm.M // BM`): when M is not a multiple of 128 (M = 1000) the last 104 rows of C
have no CTA, so they are never written. Every store is masked and every load padded, so
no tail rule fires: the tail tile simply does not exist."""
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def gemm_ws_s4_floor_grid(lm, A, B, C):
    BM, BN, BK = 128, 128, 64
    lm.launch(grid=(lm.M // BM, lm.cdiv(lm.N, BN)), warps=12)  # expect: P017
    a_s = lm.smem("bf16", (BM, BK), stages=4, swizzle="128B")
    b_s = lm.smem("bf16", (BN, BK), stages=4, swizzle="128B")
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 12), regs=232)
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
