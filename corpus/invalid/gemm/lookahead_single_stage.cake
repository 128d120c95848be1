"""Derived from corpus/valid/gemm/pipeline_lookahead_s2.cake with the ring cut to one
stage: the math role waits for iteration k + 1 before releasing k, but with one stage
the loader can only refill it after that release. Cycle: math waits on ring.full[0]
(iteration k + 1) -> the loader arms it only after its acquire, which waits on
ring.empty[0] -> released by math only after the wait (deadlock)."""
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def gemm_lookahead_s1(lm, A, B, C):
    BM, BN, BK = 128, 128, 64
    KT = lm.cdiv(lm.K, BK)
    lm.launch(grid=(lm.cdiv(lm.M, BM), lm.cdiv(lm.N, BN)), warps=12)
    a_s = lm.smem("bf16", (BM, BK), stages=1, swizzle="128B")
    b_s = lm.smem("bf16", (BN, BK), stages=1, swizzle="128B")
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 12), regs=232)
    acc = lm.fragment("f32", (BM, BN), role=math)
    ring = lm.pipeline(stages=1, buffers=[a_s, b_s], producer=loader, consumer=math)
    m0, n0 = lm.block(0) * BM, lm.block(1) * BN
    with loader:
        for k in lm.range(0, KT):
            ring.acquire(k)
            a_s[ring.stage(k)].load(A, at=(m0, k * BK), barrier=ring.full(k), pad=True)
            b_s[ring.stage(k)].load(B, at=(n0, k * BK), barrier=ring.full(k), pad=True)
    with math:
        ring.wait(0)
        for k in lm.range(0, KT - 1):
            lm.mma(acc, a_s[ring.stage(k)], b_s[ring.stage(k)], transpose_b=True,
                   init=(k == 0))
            ring.wait(k + 1)  # expect: P016
            ring.release(k)
        lm.mma(acc, a_s[ring.stage(KT - 1)], b_s[ring.stage(KT - 1)], transpose_b=True,
               init=(KT == 1))
        ring.release(KT - 1)
        lm.store(C, at=(m0, n0), src=acc, mask=True)
