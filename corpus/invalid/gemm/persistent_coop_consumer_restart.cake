"""valid/gemm/persistent_coop_wgmma_s4.cake with the consumer restarting the ring position at every tile: its K loop derives
stage and parity from the per-tile index `k` instead of the running counter `it`
(CUTLASS keeps `mainloop_pipe_consumer_state` across tiles,
`include/cutlass/gemm/kernel/sm90_gemm_tma_warpspecialized_cooperative.hpp`), while the
producer keeps counting. At the check shape M=1000, N=520, K=320 a tile takes 5
positions of the 4-stage ring and there are 40 tiles for 32 CTAs, so CTAs 0-7 run a
second tile: the producer continues at position 5, the consumer restarts at position 0.
Its waits then name phases by the parity of the wrong position: `full[0]` passes on a
phase it already consumed, and at k = 1 it waits `full[1]` for a phase the producer
fills only after releases the consumer never makes (a deadlock).
Only CTAs with two tiles or more show it. (32 CTAs, not CUTLASS's one per SM: with 16,
the repaired schedule has 64 tiles per CTA at 4096^3 and its analysis exceeds the event
bound, so the fix could not be re-checked in full.) One defect: the consumer's ring position."""
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def gemm_persistent_coop_wgmma_s4(lm, A, B, C):
    BM, BN, BK, S, SMS = 128, 128, 64, 4, 32
    KT = lm.cdiv(lm.K, BK)
    TM = lm.cdiv(lm.M, BM)
    TILES = TM * lm.cdiv(lm.N, BN)                           # output tiles, M fastest
    lm.launch(grid=(lm.min(SMS, TILES),), warps=12)
    a_s = lm.smem("bf16", (BM, BK), stages=S, swizzle="128B")
    b_s = lm.smem("bf16", (BN, BK), stages=S, swizzle="128B")
    full = lm.mbarrier(count=1, stages=S)                    # one arm by the producer leader
    empty = lm.mbarrier(count=2, stages=S)                   # one signalling thread per consumer warpgroup
    producer = lm.role(warps=range(0, 4), regs=40)
    consumer = lm.role(warps=range(4, 12), regs=232)
    acc = lm.fragment("f32", (BM, BN), role=consumer)
    it = lm.counter()                                        # PipelineState: the ring position
    with producer:
        with lm.warps(0, 1):                                 # ProducerWarpRole::Mainloop
            for t in lm.range(lm.block(0), TILES, lm.grid(0)):
                m0, n0 = (t % TM) * BM, (t // TM) * BN
                for k in lm.range(0, KT, counter=it):
                    empty[it % S].wait(parity=(it // S + 1) % 2)   # producer_acquire
                    full[it % S].arrive_expect_tx(bytes=lm.nbytes(a_s, b_s))
                    a_s[it % S].load(A, at=(m0, k * BK), barrier=full[it % S], pad=True)
                    b_s[it % S].load(B, at=(n0, k * BK), barrier=full[it % S], pad=True)
            for tail in lm.range(0, S, counter=it):          # load_tail / producer_tail
                empty[it % S].wait(parity=(it // S + 1) % 2)
    with consumer:
        for t in lm.range(lm.block(0), TILES, lm.grid(0)):
            m0, n0 = (t % TM) * BM, (t // TM) * BN
            for k in lm.range(0, KT):  # expect: P026
                full[k % S].wait(parity=(k // S) % 2)        # consumer_wait
                lm.mma_async(acc, a_s[k % S], b_s[k % S], transpose_b=True, init=(k == 0))
                lm.mma_wait(pending=0)                       # warpgroup_wait<0>
                with lm.warps(0, 8, 4):
                    empty[k % S].arrive()                    # consumer_release, this stage
            lm.store(C, at=(m0, n0), src=acc, mask=True)
