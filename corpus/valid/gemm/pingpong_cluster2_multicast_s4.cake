"""CUTLASS's ping-pong warp-specialized GEMM on a cluster of 2 with TMA multicast
(`include/cutlass/gemm/kernel/sm90_gemm_tma_warpspecialized_pingpong.hpp`, its mainloop
`include/cutlass/gemm/collective/sm90_mma_tma_gmma_ss_warpspecialized.hpp` and the
pipelines of `include/cutlass/pipeline/sm90_pipeline.hpp`: `PipelineTmaAsync` with a
multicast consumer arrival count, `OrderedSequenceBarrier` between the math warpgroups),
written non-persistently: each CTA runs a fixed sequence of 2 T output tiles.

The cluster is 2 CTAs along M (`ClusterShape<2, 1, 1>`): the CTAs of a cluster take
vertically adjacent tiles, so they need the same B tile at every ring position. CTA rank
0 loads it and multicasts it into both CTAs (the loop over `lead` is empty on rank 1);
each CTA loads its own A and arms its own `full[s]` with the bytes of A and B it
receives. One loader warpgroup fills a shared 4-stage ring with the K tiles of all the
CTA's output tiles in order; math0 takes the ring positions `[0, KT)`, `[2 KT, 3 KT)`,
math1 the others, ordered by the token barriers `tok0` / `tok1` (math0 starts at parity
1 on the fresh barrier, as group 0 of the sequence barrier starts at phase 1). A
multicast stage may be refilled only when the consumers of both CTAs have released it,
so each math warp releases to its own CTA's `empty[s]` and to its peer's (`cta=peer`,
CUTLASS's `consumer_release` arrives on every CTA of its cluster row and column), and
`empty` counts (cluster_x + cluster_y - 1) x 4 warps of the one math warpgroup that
consumes a position = 8. Both CTAs run the same position sequence, so the peer's
releases of position p come from the same math warpgroup. Every role of both CTAs ends
at `lm.sync_cluster()`: the last remote releases land after the peer stopped waiting,
and no CTA may exit before they have."""
# expect: clean
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def gemm_pingpong_cluster2_s4(lm, A, B, C):
    BM, BN, BK, S, T, CX = 64, 128, 64, 4, 2, 2
    KT = lm.cdiv(lm.K, BK)
    lm.launch(grid=(CX * lm.cdiv(lm.M, CX * 2 * T * BM), lm.cdiv(lm.N, BN)), warps=12,
              cluster=(CX, 1, 1))
    a_s = lm.smem("bf16", (BM, BK), stages=S, swizzle="128B")
    b_s = lm.smem("bf16", (BN, BK), stages=S, swizzle="128B")
    full = lm.mbarrier(count=1, stages=S)
    empty = lm.mbarrier(count=CX * 4, stages=S)     # one math warpgroup of each CTA
    tok0 = lm.mbarrier(count=4)                     # math1 hands the token to math0
    tok1 = lm.mbarrier(count=4)                     # math0 hands the token to math1
    loader = lm.role(warps=range(0, 4), regs=40)
    math0 = lm.role(warps=range(4, 8), regs=232)
    math1 = lm.role(warps=range(8, 12), regs=232)
    acc0 = lm.fragment("f32", (BM, BN), role=math0)
    acc1 = lm.fragment("f32", (BM, BN), role=math1)
    m0, n0 = lm.block(0) * 2 * T * BM, lm.block(1) * BN
    rank = lm.cluster_rank(0)
    peer = 1 - rank
    with loader:
        for p in lm.range(0, 2 * T * KT):             # ring position p: tile p // KT, k p % KT
            empty[p % S].wait(parity=(p // S + 1) % 2)
            full[p % S].arrive_expect_tx(bytes=lm.nbytes(a_s, b_s))
            a_s[p % S].load(A, at=(m0 + (p // KT) * BM, (p % KT) * BK), barrier=full[p % S], pad=True)
            for lead in lm.range(rank, 1):              # rank 0 multicasts the shared B
                b_s[p % S].load(B, at=(n0, (p % KT) * BK), barrier=full[p % S], pad=True,
                                multicast=0b11)
        lm.sync_cluster()
    with math0:
        for t in lm.range(0, T):
            tok0[0].wait(parity=(t + 1) % 2)
            for k in lm.range(0, KT):
                full[(2 * t * KT + k) % S].wait(parity=((2 * t * KT + k) // S) % 2)
                lm.mma(acc0, a_s[(2 * t * KT + k) % S], b_s[(2 * t * KT + k) % S], transpose_b=True, init=(k == 0))
                empty[(2 * t * KT + k) % S].arrive()
                empty[(2 * t * KT + k) % S].arrive(cta=peer)
            tok1[0].arrive()
            lm.store(C, at=(m0 + 2 * t * BM, n0), src=acc0, mask=True)
        lm.sync_cluster()
    with math1:
        for t in lm.range(0, T):
            tok1[0].wait(parity=t % 2)
            for k in lm.range(0, KT):
                full[((2 * t + 1) * KT + k) % S].wait(parity=(((2 * t + 1) * KT + k) // S) % 2)
                lm.mma(acc1, a_s[((2 * t + 1) * KT + k) % S], b_s[((2 * t + 1) * KT + k) % S], transpose_b=True, init=(k == 0))
                empty[((2 * t + 1) * KT + k) % S].arrive()
                empty[((2 * t + 1) * KT + k) % S].arrive(cta=peer)
            tok0[0].arrive()
            lm.store(C, at=(m0 + (2 * t + 1) * BM, n0), src=acc1, mask=True)
        lm.sync_cluster()
