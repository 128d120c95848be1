"""Warp-specialized GEMM with asynchronous tensor-core MMAs whose epilogue stores the
accumulator before `lm.mma_wait(pending=0)` has retired the last mma_async group: the
store reads registers the tensor cores may still be writing. P028 names the class:
the race goes away when the store moves after the `lm.mma_wait` that retires the group.
Derived from corpus/valid/gemm/wgmma_trailing_release_s4.cake by moving the store up."""
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def gemm_wgmma_store_before_wait(lm, A, B, C):
    BM, BN, BK, S = 64, 128, 64, 4
    lm.launch(grid=(lm.cdiv(lm.M, BM), lm.cdiv(lm.N, BN)), warps=8)
    a_s = lm.smem("bf16", (BM, BK), stages=S, swizzle="128B")
    b_s = lm.smem("bf16", (BN, BK), stages=S, swizzle="128B")
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 8), regs=232)
    acc = lm.fragment("f32", (BM, BN), role=math)
    ring = lm.pipeline(stages=S, buffers=[a_s, b_s], producer=loader, consumer=math)
    m0, n0 = lm.block(0) * BM, lm.block(1) * BN
    KT = lm.cdiv(lm.K, BK)
    with loader:
        for k in lm.range(0, KT):
            ring.acquire(k)
            a_s[ring.stage(k)].load(A, at=(m0, k * BK), barrier=ring.full(k), pad=True)
            b_s[ring.stage(k)].load(B, at=(n0, k * BK), barrier=ring.full(k), pad=True)
    with math:
        ring.wait(0)
        lm.mma_async(acc, a_s[ring.stage(0)], b_s[ring.stage(0)], transpose_b=True, init=True)
        for k in lm.range(1, KT):
            ring.wait(k)
            lm.mma_async(acc, a_s[ring.stage(k)], b_s[ring.stage(k)], transpose_b=True)
            lm.mma_wait(pending=1)                            # group k - 1 has finished
            ring.release(k - 1)
        lm.store(C, at=(m0, n0), src=acc, mask=True)  # expect: P028
        lm.mma_wait(pending=0)
        ring.release(KT - 1)
