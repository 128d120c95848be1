"""k-means assignment with a double-buffered bulk-store epilogue: the labels of tile t go
through `l_s[t % 2]` and one bulk store of 64 x 4 = 256 bytes (a one-column tile into the
rank-1 `labels` is contiguous on both sides). `divisible={"N": 4}` makes the masked
store of the last tile a multiple of 16 bytes too, and every tile starts at a multiple
of 64 labels (256 bytes), as `cp.async.bulk` requires. Before overwriting a label stage,
the math role waits until at most one bulk store is still reading
(`lm.store_wait(pending=1)`: the store of tile t - 2, which used the same stage, has
finished), fences its generic writes before each store and drains every store before
the kernel exits."""
# expect: clean
@cake.schedule(target="sm_90a", workload="kmeans_assign", sizes={"K": 16, "D": 64}, divisible={"N": 4})
def kmeans_labels_store_async(lm, X, C, labels):
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
            l_s[t % 2].store_async(labels, at=(r0 + t * BR,), mask=True)
        lm.store_wait(pending=0)
