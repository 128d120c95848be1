"""k-means assignment for 64 centroids with an 8-stage ring and double-buffered bulk stores
of the labels, whose math role copies each tile's labels into `l_s[t % 2]` with generic
stores and issues the bulk store without `lm.fence_proxy()`: the bulk store reads
`l_s` through the async proxy, which the generic writes are not ordered before without
`fence.proxy.async` (not even those of the issuing thread), so the labels written to
global memory can be the stale ones of tile t - 2, or the poison of a buffer not yet
written. Same as corpus/valid/kmeans_assign/deep_ring_s8_k64.cake except the fence
before the store is gone."""
@cake.schedule(target="sm_90a", workload="kmeans_assign", sizes={"K": 64, "D": 64}, divisible={"N": 4})
def kmeans_deep_ring_s8_k64(lm, X, C, labels):
    BR, TILES, S = 32, 16, 8
    lm.launch(grid=(lm.cdiv(lm.N, BR * TILES),), warps=8)
    c_s = lm.smem("f32", (64, 64))
    x_s = lm.smem("f32", (BR, 64), stages=S)
    l_s = lm.smem("i32", (BR,), stages=2)
    cbar = lm.mbarrier(count=1)
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 8), regs=232)
    dist = lm.fragment("f32", (BR, 64), role=math)
    lab = lm.fragment("i32", (BR,), role=math)
    ring = lm.pipeline(stages=S, buffers=[x_s], producer=loader, consumer=math)
    r0 = lm.block(0) * BR * TILES
    with loader:
        with lm.warps(0, 1):                             # the producer warp
            cbar[0].arrive_expect_tx(bytes=lm.nbytes(c_s))
            c_s[0].load(C, at=(0, 0), barrier=cbar[0])
            for t in lm.range(0, TILES):
                ring.acquire(t)
                x_s[ring.stage(t)].load(X, at=(r0 + t * BR, 0), barrier=ring.full(t),
                                        pad=True)
    with math:
        cbar[0].wait(parity=0)
        for t in lm.range(0, TILES):
            ring.wait(t)
            lm.sqdist(dist, x_s[ring.stage(t)], c_s)
            ring.release(t)
            lm.reduce(lab, dist, op="argmin", axis=1)
            lm.store_wait(pending=1)                     # the store of tile t - 2 is done
            lm.elementwise(l_s[t % 2], lab, op="copy")  # expect: P013
            l_s[t % 2].store_async(labels, at=(r0 + t * BR,), mask=True)
        lm.store_wait(pending=0)
