"""Elementwise scale in place: the output tile `y_s` is an alias of the input ring `x_s`
(`alias=x_s`, no storage of its own), so each thread overwrites the elements it read with
their scaled values, fences its generic writes and the stage is bulk-stored from where
it landed. The stage goes back to the loader only once the bulk store has read it: after
issuing the store of tile t the worker waits until at most one store is in flight
(`lm.store_wait(pending=1)`: the store of tile t - 1 is done) and releases stage t - 1;
the first tile is peeled, and after the loop the last store is drained before its stage
is released. So the loader's refill of a stage is ordered after every read and write
through either name of it."""
# expect: clean
@cake.schedule(target="sm_90a", workload="scale", divisible={"M": 32, "N": 256})
def scale_alias_inplace_s2(lm, X, Y):
    TM, TN, TILES, S = 32, 256, 4, 2
    lm.launch(grid=(lm.cdiv(lm.M, TM * TILES), lm.cdiv(lm.N, TN)), warps=8)
    x_s = lm.smem("f32", (TM, TN), stages=S)
    y_s = lm.smem("f32", (TM, TN), stages=S, alias=x_s)  # the output over the input
    loader = lm.role(warps=range(0, 4), regs=40)
    worker = lm.role(warps=range(4, 8), regs=232)
    ring = lm.pipeline(stages=S, buffers=[x_s], producer=loader, consumer=worker)
    m0, n0 = lm.block(0) * TM * TILES, lm.block(1) * TN
    with loader:
        for t in lm.range(0, TILES):
            ring.acquire(t)
            x_s[ring.stage(t)].load(X, at=(m0 + t * TM, n0), barrier=ring.full(t), pad=True)
    with worker:
        ring.wait(0)
        lm.elementwise(y_s[ring.stage(0)], x_s[ring.stage(0)], op="scale", alpha=2.5)
        lm.fence_proxy()                                # generic writes -> bulk store
        y_s[ring.stage(0)].store_async(Y, at=(m0, n0), mask=True)
        for t in lm.range(1, TILES):
            ring.wait(t)
            lm.elementwise(y_s[ring.stage(t)], x_s[ring.stage(t)], op="scale", alpha=2.5)
            lm.fence_proxy()
            y_s[ring.stage(t)].store_async(Y, at=(m0 + t * TM, n0), mask=True)
            lm.store_wait(pending=1)                    # the store of tile t - 1 is done
            ring.release(t - 1)
        lm.store_wait(pending=0)
        ring.release(TILES - 1)
