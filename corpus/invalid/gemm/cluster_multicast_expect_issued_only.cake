"""Cluster-of-2 multicast GEMM where each CTA arms its full barrier with the bytes it
issues itself: rank 1 issues no B copy and arms only A, but rank 0's multicast of B also
completes on rank 1's barrier, so rank 1's phase can complete with B still in flight."""
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
    issued_b = (1 - rank) * lm.nbytes(b_s)             # B bytes this CTA issues
    with loader:
        for k in lm.range(0, KT):
            empty[k % S].wait(parity=(k // S + 1) % 2)
            full[k % S].arrive_expect_tx(bytes=lm.nbytes(a_s) + issued_b)  # expect: P024
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
