"""k-means assignment that multicasts the centroid tile from rank 0 to every CTA of its
cluster, with the cluster widened from 2 to 16 CTAs to cut the centroid traffic further
(`CX = 16`, `multicast=0xFFFF`): sm_90a runs at most 8 CTAs per cluster without the
non-portable cluster-size opt-in, so the launch fails with
`cudaErrorInvalidClusterSize`. The protocol itself scales: every CTA arms its own `cbar`
with the 4,096 bytes it receives. Derived from
corpus/valid/kmeans_assign/cluster2_centroids_multicast.cake with `CX = 16` and the
mask of all 16 ranks."""
@cake.schedule(target="sm_90a", workload="kmeans_assign", sizes={"K": 16, "D": 64})
def kmeans_cluster2_centroids(lm, X, C, labels):
    BR, TILES, CX = 64, 4, 16
    lm.launch(grid=(CX * lm.cdiv(lm.N, CX * BR * TILES),), warps=8, cluster=CX)  # expect: R008
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
            c_s[0].load(C, at=(0, 0), barrier=cbar[0], multicast=0xFFFF)
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
