"""k nearest centroids (8 of 64) with a 3-stage point ring and a bulk-store epilogue for
the neighbour indices: each tile's 64 x 8 indices (32-byte rows, a multiple of the bulk
copy's 16 bytes) go through `n_s[t % 2]`. Before refilling a staging buffer the math
warpgroup waits until the store of tile t - 2 has read it (`lm.store_wait(pending=1)`),
fences its generic writes before each bulk store, masks the rows past N of the last
tile, and drains every store before the role ends."""
# expect: clean
@cake.schedule(target="sm_90a", workload="knn", sizes={"K": 64, "D": 64, "T": 8})
def knn_idx_store_async_s3(lm, X, C, idx):
    BR, TILES, S = 64, 6, 3
    lm.launch(grid=(lm.cdiv(lm.N, BR * TILES),), warps=8)
    c_s = lm.smem("f32", (64, 64))
    x_s = lm.smem("f32", (BR, 64), stages=S)
    n_s = lm.smem("i32", (BR, 8), stages=2)                  # index staging
    cbar = lm.mbarrier(count=1)
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 8), regs=232)
    dist = lm.fragment("f32", (BR, 64), role=math)
    nn = lm.fragment("i32", (BR, 8), role=math)
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
            lm.topk(nn, dist, k=8)
            lm.store_wait(pending=1)                         # store of tile t - 2 is done
            lm.elementwise(n_s[t % 2], nn, op="copy")
            lm.fence_proxy()                                 # generic writes -> bulk store
            n_s[t % 2].store_async(idx, at=(r0 + t * BR, 0), mask=True)
        lm.store_wait(pending=0)                             # drained before exit
