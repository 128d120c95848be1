"""k-means assignment on clusters of 2 CTAs with a single copy issuer per cluster whose
loaders arm each point stage with the bytes they issue rather than the bytes they
receive: rank 0 arms both tiles it sends (`(1 - rank) * CX * lm.nbytes(x_s)` = 16,384 B)
while only its own 8,192-byte tile lands in it, and rank 1, which issues nothing, arms 0
bytes. Rank 0's phase waits for bytes that never come (its math role hangs at the first
`full` wait), and rank 1's phase completes on its loader's arrival alone, so its math
role reads `x_s` before the multicast from rank 0 has landed there. Same as
corpus/valid/kmeans_assign/cluster2_single_issuer_s7.cake except the armed bytes."""
@cake.schedule(target="sm_90a", workload="kmeans_assign", sizes={"K": 16, "D": 64})
def kmeans_cluster2_single_issuer_s7(lm, X, C, labels):
    BR, TILES, S, CX = 32, 8, 7, 2
    lm.launch(grid=(CX * lm.cdiv(lm.N, CX * BR * TILES),), warps=5, cluster=CX)
    c_s = lm.smem("f32", (16, 64))
    x_s = lm.smem("f32", (BR, 64), stages=S)
    cbar = lm.mbarrier(count=1)
    full = lm.mbarrier(count=1, stages=S)
    empty = lm.mbarrier(count=CX * 4, stages=S)     # 4 math warps of each CTA
    loader = lm.role(warps=range(0, 1))
    math = lm.role(warps=range(1, 5))
    dist = lm.fragment("f32", (BR, 16), role=math)
    lab = lm.fragment("i32", (BR,), role=math)
    rank = lm.cluster_rank()
    peer = 1 - rank
    r0 = lm.block(0) * BR * TILES
    with loader:
        cbar[0].arrive_expect_tx(bytes=lm.nbytes(c_s))   # received, whoever issues
        for lead in lm.range(rank, 1):                   # rank 0 alone
            c_s[0].load(C, at=(0, 0), barrier=cbar[0], multicast=0b11)
        for t in lm.range(0, TILES):
            empty[t % S].wait(parity=(t // S + 1) % 2)
            lm.syncwarp()                                # every lane has seen the phase
            full[t % S].arrive_expect_tx(bytes=(1 - rank) * CX * lm.nbytes(x_s))  # expect: P024
            for lead in lm.range(rank, 1):               # rank 0 issues for the cluster
                x_s[t % S].load(X, at=(r0 + t * BR, 0), barrier=full[t % S], pad=True)
                x_s[t % S].load(X, at=(r0 + BR * TILES + t * BR, 0), barrier=full[t % S],
                                pad=True, multicast=0b10)
        lm.sync_cluster()
    with math:
        cbar[0].wait(parity=0)
        for t in lm.range(0, TILES):
            full[t % S].wait(parity=(t // S) % 2)
            lm.sqdist(dist, x_s[t % S], c_s)
            lm.syncwarp()                                # every lane has read the stage
            empty[t % S].arrive()                        # this CTA's loader
            empty[t % S].arrive(cta=peer)                # the peer's loader
            lm.reduce(lab, dist, op="argmin", axis=1)
            lm.store(labels, at=(r0 + t * BR,), src=lab, mask=True)
        lm.sync_cluster()
