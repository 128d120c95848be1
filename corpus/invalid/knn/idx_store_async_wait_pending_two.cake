"""Derived from corpus/valid/knn/idx_store_async_s3.cake with the staging wait relaxed to
`lm.store_wait(pending=2)` ("two stores may stay in flight, one per staging buffer"):
before tile t overwrites `n_s[t % 2]`, the two most recent stores (tiles t - 1 and
t - 2) may still be in flight, and the store of tile t - 2 reads exactly the buffer about
to be overwritten. Tile t's indices can then reach tile t - 2's rows of `idx` (race).
With two buffers, at most one store may remain in flight: `pending=1`."""
@cake.schedule(target="sm_90a", workload="knn", sizes={"K": 64, "D": 64, "T": 8})
def knn_idx_store_async_pending2(lm, X, C, idx):
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
            lm.store_wait(pending=2)
            lm.elementwise(n_s[t % 2], nn, op="copy")  # expect: P014
            lm.fence_proxy()                                 # generic writes -> bulk store
            n_s[t % 2].store_async(idx, at=(r0 + t * BR, 0), mask=True)
        lm.store_wait(pending=0)                             # drained before exit
