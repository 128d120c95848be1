"""Derived from corpus/valid/gemm/epilogue_store_async_handoff.cake with the math role's
`lm.fence_proxy()` deleted: math writes the output tile into `c_s` with generic stores
and arrives on `cbar`; the store warpgroup waits on `cbar` and bulk-stores `c_s` through
the async proxy. The barrier orders the generic writes before the store role's generic
accesses only; the async proxy needs `fence.proxy.async` in the writer before the
hand-off, or the bulk store can write stale tile data to C."""
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64, "M": 64, "N": 128})
def gemm_epilogue_store_async(lm, A, B, C):
    BM, BN, BK, S = 64, 128, 64, 2
    lm.launch(grid=(lm.cdiv(lm.M, BM), lm.cdiv(lm.N, BN)), warps=12)
    a_s = lm.smem("bf16", (BM, BK), stages=S, swizzle="128B")
    b_s = lm.smem("bf16", (BN, BK), stages=S, swizzle="128B")
    c_s = lm.smem("f32", (BM, BN))
    cbar = lm.mbarrier(count=4)                              # one arrive per math warp
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 8), regs=232)
    storer = lm.role(warps=range(8, 12), regs=40)
    acc = lm.fragment("f32", (BM, BN), role=math)
    ring = lm.pipeline(stages=S, buffers=[a_s, b_s], producer=loader, consumer=math)
    m0, n0 = lm.block(0) * BM, lm.block(1) * BN
    with loader:
        for k in lm.range(0, lm.cdiv(lm.K, BK)):
            ring.acquire(k)
            a_s[ring.stage(k)].load(A, at=(m0, k * BK), barrier=ring.full(k))
            b_s[ring.stage(k)].load(B, at=(n0, k * BK), barrier=ring.full(k))
    with math:
        for k in lm.range(0, lm.cdiv(lm.K, BK)):
            ring.wait(k)
            lm.mma_async(acc, a_s[ring.stage(k)], b_s[ring.stage(k)], transpose_b=True,
                         init=(k == 0))
            lm.mma_wait(pending=0)
            ring.release(k)
        lm.elementwise(c_s[0], acc, op="copy")  # expect: P013
        lm.syncwarp()                                        # every lane wrote, then one arrives
        cbar[0].arrive()
    with storer:
        cbar[0].wait(parity=0)
        c_s[0].store_async(C, at=(m0, n0))
        lm.store_wait(pending=0)
