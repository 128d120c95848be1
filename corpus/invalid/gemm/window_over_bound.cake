"""GEMM whose A ring has 5 stages and B ring 7: stage and parity repeat every 10 and 14
iterations, so the joint protocol period is lcm(10, 14) = 70 and covering every
wrap-around and phase flip needs a window of 142 iterations, over the analysis bound of
64. The verdict is incomplete, not clean."""
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def gemm_two_rings(lm, A, B, C):  # expect: P098
    BM, BN, BK = 64, 64, 64
    lm.launch(grid=(lm.cdiv(lm.M, BM), lm.cdiv(lm.N, BN)), warps=8)
    a_s = lm.smem("bf16", (BM, BK), stages=5, swizzle="128B")
    b_s = lm.smem("bf16", (BN, BK), stages=7, swizzle="128B")
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 8), regs=232)
    acc = lm.fragment("f32", (BM, BN), role=math)
    ring_a = lm.pipeline(stages=5, buffers=[a_s], producer=loader, consumer=math)
    ring_b = lm.pipeline(stages=7, buffers=[b_s], producer=loader, consumer=math)
    m0, n0 = lm.block(0) * BM, lm.block(1) * BN
    with loader:
        for k in lm.range(0, lm.cdiv(lm.K, BK)):
            ring_a.acquire(k)
            a_s[ring_a.stage(k)].load(A, at=(m0, k * BK), barrier=ring_a.full(k), pad=True)
            ring_b.acquire(k)
            b_s[ring_b.stage(k)].load(B, at=(n0, k * BK), barrier=ring_b.full(k), pad=True)
    with math:
        for k in lm.range(0, lm.cdiv(lm.K, BK)):
            ring_a.wait(k)
            ring_b.wait(k)
            lm.mma(acc, a_s[ring_a.stage(k)], b_s[ring_b.stage(k)], transpose_b=True, init=(k == 0))
            ring_a.release(k)
            ring_b.release(k)
        lm.store(C, at=(m0, n0), src=acc, mask=True)
