"""valid/gemm/cutlass_coop_wgmma_s4.cake with the elected release of the previous stage
moved above `lm.mma_wait(pending=1)`: at that point two wgmma groups (k - 1 and k) may be
in flight, so `empty[(k - 1) % S]` is handed back while group k - 1 may still read stage
(k - 1) % S through the async proxy, and the producer's next copy into it races with the
tensor cores (CUTLASS `include/cutlass/gemm/collective/sm90_mma_tma_gmma_ss_warpspecialized.hpp`
releases only after `warpgroup_wait<K_PIPE_MMAS>()`). One defect: the release precedes the
group wait that retires its reader."""
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def gemm_cutlass_coop_wgmma_s4(lm, A, B, C):
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
        full[0].wait(parity=0)                               # first K tile, peeled
        lm.mma_async(acc, a_s[0], b_s[0], transpose_b=True, init=True)
        for k in lm.range(1, KT):
            full[k % S].wait(parity=(k // S) % 2)            # consumer_wait
            lm.mma_async(acc, a_s[k % S], b_s[k % S], transpose_b=True)
            with lm.warps(0, 8, 4):
                empty[(k - 1) % S].arrive()  # expect: P010
            lm.mma_wait(pending=1)                           # warpgroup_wait<K_PIPE_MMAS>
        lm.mma_wait(pending=0)                               # mma_tail: warpgroup_wait<0>
        with lm.warps(0, 8, 4):
            empty[(KT - 1) % S].arrive()
        lm.store(C, at=(m0, n0), src=acc, mask=True)
