"""Warp-specialized GEMM on a cluster of 2 CTAs along M with the shared B tile multicast:
one loader warpgroup, two consumer warpgroups (one 8-warp math role), a 4-stage ring.

The two CTAs of a cluster compute vertically adjacent output tiles, so they need the same
B tile of every K step. CTA rank 0 loads it once and multicasts it into both CTAs
(`multicast=0b11`): the copy completes its bytes on `full[s]` of each CTA, so each CTA
arms its own `full[s]` with the bytes of A and B it receives, whoever issues them. Rank 1
issues no B copy at all: its loop over `lead` has no iteration (the peers' loops disagree
in length). The multicast writes stage `s` of both CTAs, so the producer of rank 0 may
refill it only once the consumers of both CTAs have released it: every consumer warp
arrives on its own `empty[s]` and on its peer's (`cta=peer`), and `empty` counts
(cluster_x + cluster_y - 1) x 8 consumer warps = 16 arrivals. The last releases land on
the peer after it has stopped waiting, so every role of both CTAs meets at
`lm.sync_cluster()` before exit: no CTA exits with a peer's arrival still in flight."""
# expect: clean
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def gemm_cluster2_multicast_s4(lm, A, B, C):
    BM, BN, BK, S, CX = 128, 128, 64, 4, 2
    KT = lm.cdiv(lm.K, BK)
    lm.launch(grid=(CX * lm.cdiv(lm.M, CX * BM), lm.cdiv(lm.N, BN)), warps=12,
              cluster=(CX, 1, 1))
    a_s = lm.smem("bf16", (BM, BK), stages=S, swizzle="128B")
    b_s = lm.smem("bf16", (BN, BK), stages=S, swizzle="128B")
    full = lm.mbarrier(count=1, stages=S)
    empty = lm.mbarrier(count=CX * 8, stages=S)    # 8 consumer warps of each CTA
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 12), regs=232)
    acc = lm.fragment("f32", (BM, BN), role=math)
    rank = lm.cluster_rank(0)
    peer = 1 - rank
    m0, n0 = lm.block(0) * BM, lm.block(1) * BN
    with loader:
        for k in lm.range(0, KT):
            empty[k % S].wait(parity=(k // S + 1) % 2)
            full[k % S].arrive_expect_tx(bytes=lm.nbytes(a_s, b_s))
            a_s[k % S].load(A, at=(m0, k * BK), barrier=full[k % S], pad=True)
            for lead in lm.range(rank, 1):          # rank 0 alone issues the shared tile
                b_s[k % S].load(B, at=(n0, k * BK), barrier=full[k % S], pad=True,
                                multicast=0b11)
        lm.sync_cluster()
    with math:
        for k in lm.range(0, KT):
            full[k % S].wait(parity=(k // S) % 2)
            lm.mma(acc, a_s[k % S], b_s[k % S], transpose_b=True, init=(k == 0))
            empty[k % S].arrive()                    # this CTA's producer
            empty[k % S].arrive(cta=peer)            # the peer's producer (multicast)
        lm.store(C, at=(m0, n0), src=acc, mask=True)
        lm.sync_cluster()
