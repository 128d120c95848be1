"""Elementwise scale with a deep input ring and a double-buffered bulk-store epilogue: the
loader streams sixteen 8 x 256 row tiles per CTA through an 8-stage pipeline (8 KiB a
stage), the worker scales each stage straight into the output staging buffer
`y_s[t % 2]` (shared memory to shared memory), releases the input stage, fences its
generic writes against the async proxy and bulk-stores the tile. Before writing
`y_s[t % 2]` again it waits until at most one bulk store is still reading
(`lm.store_wait(pending=1)`: the store of tile t - 2, which read that buffer, is done),
and it drains every store before the kernel exits. The tail CTA's tiles past M are
zero-filled on load and skipped on store (`pad=True`, `mask=True`); `divisible` keeps
every row 16-byte aligned for the bulk copies."""
# expect: clean
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
            lm.elementwise(y_s[t % 2], x_s[ring.stage(t)], op="scale", alpha=2.5)
            ring.release(t)
            lm.fence_proxy()                            # generic writes -> bulk store
            y_s[t % 2].store_async(Y, at=(m0 + t * TM, n0), mask=True)
        lm.store_wait(pending=0)                        # drained before exit
