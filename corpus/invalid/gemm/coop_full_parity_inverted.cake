"""valid/gemm/cutlass_coop_wgmma_wait0_s4.cake with the consumer waiting `full[s]` with the
producer's parity `(k // S + 1) % 2`: the first wait on every stage passes on the fresh
barrier before any byte has landed, and every later one a phase early, so the wgmma
groups read stages while their copies are in flight. One defect: the consumer's parity."""
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def gemm_cutlass_coop_wgmma_wait0_s4(lm, A, B, C):
    BM, BN, BK, S = 128, 128, 64, 4
    KT = lm.cdiv(lm.K, BK)
    lm.launch(grid=(lm.cdiv(lm.M, BM), lm.cdiv(lm.N, BN)), warps=12)
    a_s = lm.smem("bf16", (BM, BK), stages=S, swizzle="128B")
    b_s = lm.smem("bf16", (BN, BK), stages=S, swizzle="128B")
    full = lm.mbarrier(count=1, stages=S)                    # one arm by the producer leader
    empty = lm.mbarrier(count=2, stages=S)                   # one signalling thread per consumer warpgroup
    producer = lm.role(warps=range(0, 4), regs=40)
    consumer = lm.role(warps=range(4, 12), regs=232)
    acc = lm.fragment("f32", (BM, BN), role=consumer)
    m0, n0 = lm.block(0) * BM, lm.block(1) * BN
    with producer:
        with lm.warps(0, 1):                                 # ProducerWarpRole::Mainloop
            for k in lm.range(0, KT):
                empty[k % S].wait(parity=(k // S + 1) % 2)   # producer_acquire
                full[k % S].arrive_expect_tx(bytes=lm.nbytes(a_s, b_s))
                a_s[k % S].load(A, at=(m0, k * BK), barrier=full[k % S], pad=True)
                b_s[k % S].load(B, at=(n0, k * BK), barrier=full[k % S], pad=True)
            for k in lm.range(KT, KT + S):                   # load_tail / producer_tail
                empty[k % S].wait(parity=(k // S + 1) % 2)
    with consumer:
        for k in lm.range(0, KT):
            full[k % S].wait(parity=(k // S + 1) % 2)  # expect: P005
            lm.mma_async(acc, a_s[k % S], b_s[k % S], transpose_b=True, init=(k == 0))
            lm.mma_wait(pending=0)                           # warpgroup_wait<0>
            with lm.warps(0, 8, 4):
                empty[k % S].arrive()                        # consumer_release, this stage
        lm.store(C, at=(m0, n0), src=acc, mask=True)
