"""The persistent cooperative mainloop of valid/gemm/persistent_coop_wgmma_s4.cake with
the grid CUTLASS launches on an H100 SXM (SMS = 132 CTAs), whose consumer restarts the
ring position at every tile: it derives stage and parity from the K-block index `k`
(`full[k % S]`, `(k // S) % 2`, `empty[k % S]`) while the producer keeps counting with
`it` (CUTLASS's `PipelineState`) and the barriers' phases carry over. At the workload's
check shapes no CTA both walks two tiles and has a K-block count that is not a multiple
of 2 S (M = N = 256: 4 tiles; M = N = 4096: 8 tiles a CTA, but 64 K blocks, where the
restarted position lands on the carried phase). The analysis adds a shape in which a CTA
walks several tiles (M = N = 4096, K = 256: 4 K blocks a tile): on its second tile
(t = 132) CTA 0's producer is at position 4 (stage 0, phase 1) while the consumer waits
`full[0]` with parity 0, passes on the phase of its first tile and reads `a_s` stage 0
while the copy for tile 132 is still in flight (race). The repair is the counter:
`lm.range(0, KT, counter=it)`, and `it` wherever the consumer's loop derives a position."""
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def gemm_persistent_coop_consumer_restart_sms132(lm, A, B, C):
    BM, BN, BK, S, SMS = 128, 128, 64, 4, 132
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
                full[k % S].wait(parity=(k // S) % 2)      # consumer_wait
                lm.mma_async(acc, a_s[k % S], b_s[k % S], transpose_b=True, init=(k == 0))
                lm.mma_wait(pending=0)                       # warpgroup_wait<0>
                with lm.warps(0, 8, 4):
                    empty[k % S].arrive()                   # consumer_release, this stage
            lm.store(C, at=(m0, n0), src=acc, mask=True)
