"""valid/gemm/cutlass_coop_wgmma_wait0_s4.cake with its last K tile peeled out of the loop
and the peeled wait's parity computed from KT instead of KT - 1:
`full[(KT - 1) % S].wait(parity=(KT // S) % 2)`. The two agree unless KT is a multiple
of S: at K = 256 (KT = 4) the wait on `full[3]` uses parity 1, which passes on the fresh
barrier before the copy of position 3 has landed (at K = 512, parity 0 passes on phase 0
while position 7's copy is landing), so the last GEMM reads a stage being written. One
defect: the parity of the peeled wait."""
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
        for k in lm.range(0, KT - 1):
            full[k % S].wait(parity=(k // S) % 2)            # consumer_wait
            lm.mma_async(acc, a_s[k % S], b_s[k % S], transpose_b=True, init=(k == 0))
            lm.mma_wait(pending=0)                           # warpgroup_wait<0>
            with lm.warps(0, 8, 4):
                empty[k % S].arrive()                        # consumer_release, this stage
        full[(KT - 1) % S].wait(parity=(KT // S) % 2)  # expect: P006
        lm.mma_async(acc, a_s[(KT - 1) % S], b_s[(KT - 1) % S], transpose_b=True, init=(KT == 1))
        lm.mma_wait(pending=0)
        with lm.warps(0, 8, 4):
            empty[(KT - 1) % S].arrive()
        lm.store(C, at=(m0, n0), src=acc, mask=True)
