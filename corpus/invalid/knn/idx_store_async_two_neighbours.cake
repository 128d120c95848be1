"""Derived from corpus/valid/knn/idx_store_async_s3.cake for the 2 nearest centroids
(`sizes={"T": 2}`, `lm.topk(..., k=2)`): a row of the index staging tile and of `idx`
is now 2 x 4 = 8 bytes, not a multiple of the 16 bytes a bulk store moves, and every
other row of `idx` starts 8 bytes off a 16-byte boundary. The bulk store cannot be
issued (a misaligned-address error on the device); `lm.store` from registers would be
the epilogue for rows this narrow."""
@cake.schedule(target="sm_90a", workload="knn", sizes={"K": 64, "D": 64, "T": 2})
def knn_idx_store_async_t2(lm, X, C, idx):
    BR, TILES, S = 64, 6, 3
    lm.launch(grid=(lm.cdiv(lm.N, BR * TILES),), warps=8)
    c_s = lm.smem("f32", (64, 64))
    x_s = lm.smem("f32", (BR, 64), stages=S)
    n_s = lm.smem("i32", (BR, 2), stages=2)                  # index staging
    cbar = lm.mbarrier(count=1)
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 8), regs=232)
    dist = lm.fragment("f32", (BR, 64), role=math)
    nn = lm.fragment("i32", (BR, 2), role=math)
    ring = lm.pipeline(stages=S, buffers=[x_s], producer=loader, consumer=math)
    r0 = lm.block(0) * BR * TILES
    with loader:
        cbar[0].arrive_expect_tx(bytes=lm.nbytes(c_s))
        c_s[0].load(C, at=(0, 0), barrier=cbar[0])
        for t in lm.range(0, TILES):
            ring.acquire(t)
            x_s[ring.stage(t)].load(X, at=(r0 + t * BR, 0), barrier=ring.full(t), pad=True)
    with math:
        cbar[0].wait(parity=0)
        for t in lm.range(0, TILES):
            ring.wait(t)
            lm.sqdist(dist, x_s[ring.stage(t)], c_s)
            ring.release(t)
            lm.topk(nn, dist, k=2)
            lm.store_wait(pending=1)                         # store of tile t - 2 is done
            lm.elementwise(n_s[t % 2], nn, op="copy")
            lm.fence_proxy()                                 # generic writes -> bulk store
            n_s[t % 2].store_async(idx, at=(r0 + t * BR, 0), mask=True)  # expect: H002
        lm.store_wait(pending=0)                             # drained before exit
