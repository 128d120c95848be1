"""Elementwise scale with an 8-stage input ring and a double-buffered bulk-store epilogue
whose worker writes each scaled tile into `y_s` with generic stores and issues the bulk
store without `lm.fence_proxy()`: the bulk store reads `y_s` through the async proxy, to
which the generic writes are not ordered without `fence.proxy.async` (not even those of
the issuing thread), so Y can receive stale contents of the staging buffer (the tile of
two iterations before, or nothing written yet). Same as
corpus/valid/scale/store_ring_s8.cake except the fence before the store is gone and the
ring's release comes after the store: the `fence.proxy.async` the lowering puts before
that release (the worker reads `x_s` generically, axiom A19) orders the generic writes
of `y_s` for later async-proxy accesses only, not for the store issued before it."""
@cake.schedule(target="sm_90a", workload="scale", divisible={"M": 8, "N": 256})
def scale_store_ring_s8(lm, X, Y):
    TM, TN, TILES, S = 8, 256, 16, 8
    lm.launch(grid=(lm.cdiv(lm.M, TM * TILES), lm.cdiv(lm.N, TN)), warps=8)
    x_s = lm.smem("f32", (TM, TN), stages=S)
    y_s = lm.smem("f32", (TM, TN), stages=2)
    loader = lm.role(warps=range(0, 4), regs=40)
    worker = lm.role(warps=range(4, 8), regs=232)
    ring = lm.pipeline(stages=S, buffers=[x_s], producer=loader, consumer=worker)
    m0, n0 = lm.block(0) * TM * TILES, lm.block(1) * TN
    with loader:
        for t in lm.range(0, TILES):
            ring.acquire(t)
            x_s[ring.stage(t)].load(X, at=(m0 + t * TM, n0), barrier=ring.full(t), pad=True)
    with worker:
        for t in lm.range(0, TILES):
            ring.wait(t)
            lm.store_wait(pending=1)                    # the store of tile t - 2 has read y_s
            lm.elementwise(y_s[t % 2], x_s[ring.stage(t)], op="scale", alpha=2.5)  # expect: P013
            y_s[t % 2].store_async(Y, at=(m0 + t * TM, n0), mask=True)
            ring.release(t)                             # after the store: its fence is late
        lm.store_wait(pending=0)                        # drained before exit
