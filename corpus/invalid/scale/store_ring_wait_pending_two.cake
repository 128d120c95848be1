"""Elementwise scale with an 8-stage input ring and a double-buffered bulk-store epilogue
whose worker waits for the bulk stores with `pending=2`, the number of staging buffers,
before writing `y_s[t % 2]` again: `cp.async.bulk.wait_group.read 2` lets the two most
recent stores, t - 1 and t - 2, still be reading, and the store of tile t - 2 reads the
very buffer tile t is about to overwrite. The copy to Y of tile t - 2 can pick up tile
t's values. Same as corpus/valid/scale/store_ring_s8.cake except `pending=2` (was 1)."""
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
            lm.store_wait(pending=2)                    # one per staging buffer
            lm.elementwise(y_s[t % 2], x_s[ring.stage(t)], op="scale", alpha=2.5)  # expect: P014
            ring.release(t)
            lm.fence_proxy()                            # generic writes -> bulk store
            y_s[t % 2].store_async(Y, at=(m0 + t * TM, n0), mask=True)
        lm.store_wait(pending=0)                        # drained before exit
