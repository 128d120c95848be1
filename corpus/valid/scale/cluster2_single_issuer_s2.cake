"""Elementwise scale on clusters of 2 CTAs along M with one copy issuer per cluster: the
loader of rank 0 issues every bulk copy of the cluster, its own row tiles into its own
`x_s` and its peer's row tiles straight into the peer's `x_s` (a multicast whose mask
holds rank 1 only, `multicast=0b10`); the loader of rank 1 issues nothing but arms its own
`full` with the bytes that land in it. A stage of either CTA may be refilled only when
both CTAs have released it, so every worker warp arrives on the `empty` barrier of its
own CTA and of its peer (`cta=peer`), and `empty` counts 2 x 4 worker warps. The last
releases land on the peer after it has stopped waiting, so every role of both CTAs ends
with `lm.sync_cluster()`. The loader's first warp does its work; its lanes meet at
`lm.syncwarp()` after each empty wait, so none of them can still be polling a phase when
lane 0's arming lets it complete (on rank 1 no bulk copy, and so no role sync of the
lowering, would keep them in step). Phase trace (S = 2, stage 0): both loaders pass `empty[0]`
parity 1 on the fresh barrier, each arms 16,384 B on its own `full[0]`; rank 0's two
copies complete them; 8 releases (4 local, 4 remote) complete `empty[0]` phase 0 in each
CTA, which the loaders observe at t = 2."""
# expect: clean
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
                full[t % S].arrive_expect_tx(bytes=lm.nbytes(x_s))  # what lands here
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
