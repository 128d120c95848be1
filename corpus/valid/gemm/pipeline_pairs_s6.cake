"""GEMM with a 6-stage pipeline whose consumer takes two stages per iteration and
releases them in the opposite order to the one it waited in (`2j + 1` before `2j`).
Each stage is still released exactly once per phase, so the order does not matter."""
# expect: clean
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 128})
def gemm_pairs_s6(lm, A, B, C):
    BM, BN, BK = 64, 128, 64
    lm.launch(grid=(lm.cdiv(lm.M, BM), lm.cdiv(lm.N, BN)), warps=8)
    a_s = lm.smem("bf16", (BM, BK), stages=6, swizzle="128B")
    b_s = lm.smem("bf16", (BN, BK), stages=6, swizzle="128B")
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 8), regs=232)
    acc = lm.fragment("f32", (BM, BN), role=math)
    ring = lm.pipeline(stages=6, buffers=[a_s, b_s], producer=loader, consumer=math)
    m0, n0 = lm.block(0) * BM, lm.block(1) * BN
    with loader:
        for k in lm.range(0, lm.cdiv(lm.K, BK)):
            ring.acquire(k)
            a_s[ring.stage(k)].load(A, at=(m0, k * BK), barrier=ring.full(k), pad=True)
            b_s[ring.stage(k)].load(B, at=(n0, k * BK), barrier=ring.full(k), pad=True)
    with math:
        for j in lm.range(0, lm.cdiv(lm.K, 2 * BK)):
            ring.wait(2 * j)
            ring.wait(2 * j + 1)
            lm.mma(acc, a_s[ring.stage(2 * j)], b_s[ring.stage(2 * j)], transpose_b=True,
                   init=(j == 0))
            lm.mma(acc, a_s[ring.stage(2 * j + 1)], b_s[ring.stage(2 * j + 1)],
                   transpose_b=True)
            ring.release(2 * j + 1)                   # released in the opposite order
            ring.release(2 * j)
        lm.store(C, at=(m0, n0), src=acc, mask=True)
