"""k-means assignment on clusters of 2 CTAs where only the CTA that issues the centroid
multicast arms its barrier with the centroid bytes: rank 1 arms 0 bytes, so its `cbar`
completes on its own arrival and its math role reads `c_s` while the multicast from rank
0 is still landing."""
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
        cbar[0].arrive_expect_tx(bytes=(1 - rank) * lm.nbytes(c_s))  # expect: P024
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
