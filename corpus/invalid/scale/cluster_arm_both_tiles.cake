"""Elementwise scale on clusters of 2 CTAs with one copy issuer per cluster, where each
loader arms its `full` stage with the bytes of the whole cluster's tile pair
(`CX * lm.nbytes(x_s)`, "two tiles per stage") instead of the bytes that land in its own
CTA: rank 0's own copy and the multicast into rank 1 each deliver one 16,384-byte tile
to one CTA, so each CTA's phase waits for 16,384 bytes that never come and both CTAs
hang at their first `full` wait. Same as
corpus/valid/scale/cluster2_single_issuer_s2.cake except `bytes=CX * lm.nbytes(x_s)`."""
@cake.schedule(target="sm_90a", workload="scale", divisible={"N": 4})
def scale_cluster2_single_issuer(lm, X, Y):
    TM, TN, TILES, S, CX = 16, 256, 4, 2, 2
    lm.launch(grid=(CX * lm.cdiv(lm.M, CX * TM * TILES), lm.cdiv(lm.N, TN)), warps=8,
              cluster=(CX, 1, 1))
    x_s = lm.smem("f32", (TM, TN), stages=S)
    full = lm.mbarrier(count=1, stages=S)
    empty = lm.mbarrier(count=CX * 4, stages=S)         # 4 worker warps of each CTA
    loader = lm.role(warps=range(0, 4), regs=40)
    worker = lm.role(warps=range(4, 8), regs=232)
    y = lm.fragment("f32", (TM, TN), role=worker)
    rank = lm.cluster_rank(0)
    peer = 1 - rank
    m0, n0 = lm.block(0) * TM * TILES, lm.block(1) * TN
    with loader:
        with lm.warps(0, 1):                            # the producer warp
            for t in lm.range(0, TILES):
                empty[t % S].wait(parity=(t // S + 1) % 2)
                lm.syncwarp()                           # every lane has seen the phase
                full[t % S].arrive_expect_tx(bytes=CX * lm.nbytes(x_s))  # expect: P024
                for lead in lm.range(rank, 1):          # rank 0 issues for the cluster
                    x_s[t % S].load(X, at=(m0 + t * TM, n0), barrier=full[t % S], pad=True)
                    x_s[t % S].load(X, at=(m0 + TM * TILES + t * TM, n0), barrier=full[t % S],
                                    pad=True, multicast=0b10)
        lm.sync_cluster()
    with worker:
        for t in lm.range(0, TILES):
            full[t % S].wait(parity=(t // S) % 2)
            lm.elementwise(y, x_s[t % S], op="scale", alpha=2.5)
            lm.syncwarp()                               # every lane has read the stage
            empty[t % S].arrive()                       # this CTA's loader
            empty[t % S].arrive(cta=peer)               # the peer's loader
            lm.store(Y, at=(m0 + t * TM, n0), src=y, mask=True)
        lm.sync_cluster()
