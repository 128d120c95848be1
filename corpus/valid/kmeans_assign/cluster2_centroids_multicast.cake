"""k-means assignment on clusters of 2 CTAs: every CTA needs the same centroid tile, so
CTA rank 0 loads it once and multicasts it into both CTAs (`multicast=0b11`); rank 1
issues no centroid copy (its loop over `lead` is empty). Each CTA arms its own `cbar`
with the bytes it receives, and its math role waits on it before reading `c_s`: the
multicast into the peer is observed by the peer itself, so no cluster barrier is needed
at exit (nothing else crosses CTAs). Point tiles stream through a 2-stage ring per CTA."""
# expect: clean
@cake.schedule(target="sm_90a", workload="kmeans_assign", sizes={"K": 16, "D": 64})
def kmeans_cluster2_centroids(lm, X, C, labels):
    BR, TILES, CX = 64, 4, 2
    lm.launch(grid=(CX * lm.cdiv(lm.N, CX * BR * TILES),), warps=8, cluster=CX)
    c_s = lm.smem("f32", (16, 64))
    x_s = lm.smem("f32", (BR, 64), stages=2)
    cbar = lm.mbarrier(count=1)
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 8), regs=232)
    dist = lm.fragment("f32", (BR, 16), role=math)
    lab = lm.fragment("i32", (BR,), role=math)
    ring = lm.pipeline(stages=2, buffers=[x_s], producer=loader, consumer=math)
    r0 = lm.block(0) * BR * TILES
    rank = lm.cluster_rank()
    with loader:
        cbar[0].arrive_expect_tx(bytes=lm.nbytes(c_s))       # received, whoever issues
        for lead in lm.range(rank, 1):                       # rank 0 alone
            c_s[0].load(C, at=(0, 0), barrier=cbar[0], multicast=0b11)
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
            lm.store(labels, at=(r0 + t * BR,), src=lab, mask=True)
