"""GEMM with a 2-stage pipeline and a look-ahead consumer: the math role waits for stage
`k + 1` before it hands stage `k` back, so the next tile is known to have landed while
the current one is still held. The first wait is peeled into a prologue and the last
release into a drain after the loop. This needs at least two stages: with one, the wait
for `k + 1` would wait for the refill that only the release of `k` allows."""
# expect: clean
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def gemm_lookahead_s2(lm, A, B, C):
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
        ring.wait(0)                                  # prologue
        for k in lm.range(0, KT - 1):
            lm.mma(acc, a_s[ring.stage(k)], b_s[ring.stage(k)], transpose_b=True,
                   init=(k == 0))
            ring.wait(k + 1)                          # look ahead, then hand k back
            ring.release(k)
        lm.mma(acc, a_s[ring.stage(KT - 1)], b_s[ring.stage(KT - 1)], transpose_b=True,
               init=(KT == 1))
        ring.release(KT - 1)                          # drain
        lm.store(C, at=(m0, n0), src=acc, mask=True)
