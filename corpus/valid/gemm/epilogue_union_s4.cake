"""Warp-specialized GEMM whose epilogue tile reuses the mainloop's storage: `c_s` (the
128 x 128 f32 output tile, 64 KB) is declared with `alias=a_s`, the 4 stages of the A ring
(4 x 16 KB), so the union counts once against shared-memory capacity. The reuse is safe
because every copy into `a_s` has landed before math's last `ring.wait`, and the named
barrier `epi` (math's 256 threads) orders every math warp's last mma read of `a_s` before
any warp writes `c_s`; the tile then leaves through a bulk store."""
# expect: clean
@cake.schedule(target="sm_90a", workload="gemm", divisible={"M": 128, "N": 128, "K": 64})
def gemm_epilogue_union_s4(lm, A, B, C):
    BM, BN, BK = 128, 128, 64
    lm.launch(grid=(lm.cdiv(lm.M, BM), lm.cdiv(lm.N, BN)), warps=12)
    a_s = lm.smem("bf16", (BM, BK), stages=4, swizzle="128B")
    b_s = lm.smem("bf16", (BN, BK), stages=4, swizzle="128B")
    c_s = lm.smem("f32", (BM, BN), alias=a_s)                # mainloop / epilogue union
    epi = lm.named_barrier(id=1, threads=256)
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 12), regs=232)
    acc = lm.fragment("f32", (BM, BN), role=math)
    ring = lm.pipeline(stages=4, buffers=[a_s, b_s], producer=loader, consumer=math)
    m0, n0 = lm.block(0) * BM, lm.block(1) * BN
    with loader:
        for k in lm.range(0, lm.cdiv(lm.K, BK)):
            ring.acquire(k)
            a_s[ring.stage(k)].load(A, at=(m0, k * BK), barrier=ring.full(k))
            b_s[ring.stage(k)].load(B, at=(n0, k * BK), barrier=ring.full(k))
    with math:
        for k in lm.range(0, lm.cdiv(lm.K, BK)):
            ring.wait(k)
            lm.mma(acc, a_s[ring.stage(k)], b_s[ring.stage(k)], transpose_b=True, init=(k == 0))
            ring.release(k)
        epi.sync()                                            # every warp is done with a_s
        lm.elementwise(c_s[0], acc, op="copy")
        lm.fence_proxy()                                      # generic writes -> async proxy
        c_s[0].store_async(C, at=(m0, n0))
        lm.store_wait(pending=0)
