"""CUTLASS's persistent ping-pong GEMM on a cluster of 2 CTAs
(`corpus/valid/gemm/persistent_pingpong_cluster2_s4.cake`) with one remote release
doubled: math0 hands each stage back to its peer CTA's producer twice
(`empty[it % S].arrive(cta=peer)` on two lines), so each phase of the peer's `empty[s]`
receives 4 more releases than its count and completes before every consumer warp of the
cluster finished with the stage: the peer's loader can overwrite a stage still being read,
and the spare releases run into the next phase. A one-token fuzz edit of the valid
schedule; before issue 45 it took 150 to 400 s to diagnose (every lapped-phase step of
the long persistent execution computed a witness walk)."""
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def gemm_pingpong_persistent_cluster2_release_twice(lm, A, B, C):
    BM, BN, BK, S, CX, SMS = 64, 128, 64, 4, 2, 132
    KT = lm.cdiv(lm.K, BK)
    CTM = lm.cdiv(lm.M, CX * BM)                   # cluster tiles along M
    TILES = CTM * lm.cdiv(lm.N, BN)                # cluster tiles, M fastest
    lm.launch(grid=(CX * lm.min(SMS // CX, TILES),), warps=12, cluster=(CX, 1, 1))
    a_s = lm.smem("bf16", (BM, BK), stages=S, swizzle="128B")
    b_s = lm.smem("bf16", (BN, BK), stages=S, swizzle="128B")
    full = lm.mbarrier(count=1, stages=S)
    empty = lm.mbarrier(count=CX * 4, stages=S)    # one math warpgroup of each CTA
    tok0 = lm.mbarrier(count=4)                    # math1 hands the token to math0
    tok1 = lm.mbarrier(count=4)                    # math0 hands the token to math1
    loader = lm.role(warps=range(0, 4), regs=40)
    math0 = lm.role(warps=range(4, 8), regs=232)
    math1 = lm.role(warps=range(8, 12), regs=232)
    acc0 = lm.fragment("f32", (BM, BN), role=math0)
    acc1 = lm.fragment("f32", (BM, BN), role=math1)
    rank = lm.cluster_rank(0)
    peer = 1 - rank
    c0, G = lm.block(0) // CX, lm.grid(0) // CX    # this cluster, clusters in the grid
    it = lm.counter()                              # PipelineState: the ring position
    w = lm.counter()                               # tiles this math warpgroup took
    with loader:
        for t in lm.range(c0, TILES, G):
            m0, n0 = ((t % CTM) * CX + rank) * BM, (t // CTM) * BN
            for k in lm.range(0, KT, counter=it):
                empty[it % S].wait(parity=(it // S + 1) % 2)
                full[it % S].arrive_expect_tx(bytes=lm.nbytes(a_s, b_s))
                a_s[it % S].load(A, at=(m0, k * BK), barrier=full[it % S], pad=True)
                for lead in lm.range(rank, 1):     # rank 0 multicasts the shared B
                    b_s[it % S].load(B, at=(n0, k * BK), barrier=full[it % S], pad=True,
                                     multicast=0b11)
        for tail in lm.range(0, S, counter=it):    # load_tail: every stage released
            empty[it % S].wait(parity=(it // S + 1) % 2)
    with math0:
        for t in lm.range(c0, TILES, 2 * G, counter=w):
            m0, n0 = ((t % CTM) * CX + rank) * BM, (t // CTM) * BN
            tok0[0].wait(parity=(w + 1) % 2)
            for k in lm.range(0, KT, counter=it):
                full[it % S].wait(parity=(it // S) % 2)
                lm.mma(acc0, a_s[it % S], b_s[it % S], transpose_b=True, init=(k == 0))
                empty[it % S].arrive()
                empty[it % S].arrive(cta=peer)     # expect: P009
                empty[it % S].arrive(cta=peer)
            tok1[0].arrive()
            for skip in lm.range(0, KT, counter=it):   # math1's tile
                pass
            lm.store(C, at=(m0, n0), src=acc0, mask=True)
    with math1:
        for skip in lm.range(0, KT, counter=it):       # math0's first tile
            pass
        for t in lm.range(c0 + G, TILES, 2 * G, counter=w):
            m0, n0 = ((t % CTM) * CX + rank) * BM, (t // CTM) * BN
            tok1[0].wait(parity=w % 2)
            for k in lm.range(0, KT, counter=it):
                full[it % S].wait(parity=(it // S) % 2)
                lm.mma(acc1, a_s[it % S], b_s[it % S], transpose_b=True, init=(k == 0))
                empty[it % S].arrive()
                empty[it % S].arrive(cta=peer)
            tok0[0].arrive()
            for skip in lm.range(0, KT, counter=it):   # math0's next tile
                pass
            lm.store(C, at=(m0, n0), src=acc1, mask=True)
