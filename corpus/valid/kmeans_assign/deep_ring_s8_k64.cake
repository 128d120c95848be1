"""k-means assignment for 64 centroids with small point tiles and a deep ring: 32-row
tiles (8 KiB) through an 8-stage pipeline, sixteen tiles per CTA, the loader issuing
from its first warp only (`with lm.warps(0, 1)`). The 64 x 64 centroid tile (16 KiB)
arrives once through `cbar`; the math warpgroup holds a 32 x 64 distance tile (16
values a thread). Labels leave through a double-buffered bulk store of 32 x 4 = 128
bytes a tile: before writing `l_s[t % 2]` the math role waits until the store of tile
t - 2 has read it (`lm.store_wait(pending=1)`), fences its generic writes before each
store, and drains all stores at the end; `divisible={"N": 4}` keeps the masked tail
store a multiple of 16 bytes."""
# expect: clean
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
            lm.elementwise(l_s[t % 2], lab, op="copy")
            lm.fence_proxy()                             # generic writes -> bulk store
            l_s[t % 2].store_async(labels, at=(r0 + t * BR,), mask=True)
        lm.store_wait(pending=0)
