"""k-means assignment with a double-buffered bulk-store epilogue (the protocol of
corpus/valid/kmeans_assign/labels_store_async_s2.cake) but without `divisible={"N": 4}`:
each tile's 64 labels go to `labels` in one bulk store of 256 bytes, and the masked
store of the last tile copies the `N - r0` labels that are left. `cp.async.bulk` moves a
multiple of 16 bytes only (PTX ISA, cp.async.bulk), so an N that is not a multiple of 4
(N = 1001: 41 labels, 164 bytes in the last tile) asks for an illegal copy."""
@cake.schedule(target="sm_90a", workload="kmeans_assign", sizes={"K": 16, "D": 64})
def kmeans_labels_store_async_tail(lm, X, C, labels):
    BR, TILES = 64, 4
    lm.launch(grid=(lm.cdiv(lm.N, BR * TILES),), warps=8)
    c_s = lm.smem("f32", (16, 64))
    x_s = lm.smem("f32", (BR, 64), stages=2)
    l_s = lm.smem("i32", (BR,), stages=2)
    cbar = lm.mbarrier(count=1)
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 8), regs=232)
    dist = lm.fragment("f32", (BR, 16), role=math)
    lab = lm.fragment("i32", (BR,), role=math)
    ring = lm.pipeline(stages=2, buffers=[x_s], producer=loader, consumer=math)
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
            lm.reduce(lab, dist, op="argmin", axis=1)
            lm.store_wait(pending=1)                         # store of tile t - 2 is done
            lm.elementwise(l_s[t % 2], lab, op="copy")
            lm.fence_proxy()
            l_s[t % 2].store_async(labels, at=(r0 + t * BR,), mask=True)  # expect: H002
        lm.store_wait(pending=0)
