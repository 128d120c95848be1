"""A persistent k-means assignment whose CTAs load the centroids once but wait for them
inside the tile loop: a CTA past the last row tile (the grid is the SM count, 132, and
N = 1000 has 16 tiles of 64 rows) runs no tile, so nothing ever waits on `cbar` and the
CTA can exit while the centroid copy still writes its shared memory. CTAs with a tile
are fine (phase 0 of `cbar` stays complete, so every tile's wait passes), which is why
only the class of CTAs without a tile shows it."""
@cake.schedule(target="sm_90a", workload="kmeans_assign", sizes={"K": 16, "D": 64})
def kmeans_persistent_idle_cta(lm, X, C, labels):
    BR, SMS = 64, 132
    lm.launch(grid=(SMS,), warps=8)
    c_s = lm.smem("f32", (16, 64))
    x_s = lm.smem("f32", (BR, 64), stages=2)
    cbar = lm.mbarrier(count=1)
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 8), regs=232)
    dist = lm.fragment("f32", (BR, 16), role=math)
    lab = lm.fragment("i32", (BR,), role=math)
    ring = lm.pipeline(stages=2, buffers=[x_s], producer=loader, consumer=math)
    it = lm.counter()
    with loader:
        cbar[0].arrive_expect_tx(bytes=lm.nbytes(c_s))
        c_s[0].load(C, at=(0, 0), barrier=cbar[0])  # expect: P008
        for t in lm.range(lm.block(0), lm.cdiv(lm.N, BR), lm.grid(0), counter=it):
            ring.acquire(it)
            x_s[ring.stage(it)].load(X, at=(t * BR, 0), barrier=ring.full(it), pad=True)
    with math:
        for t in lm.range(lm.block(0), lm.cdiv(lm.N, BR), lm.grid(0), counter=it):
            cbar[0].wait(parity=0)
            ring.wait(it)
            lm.sqdist(dist, x_s[ring.stage(it)], c_s)
            ring.release(it)
            lm.reduce(lab, dist, op="argmin", axis=1)
            lm.store(labels, at=(t * BR,), src=lab, mask=True)
