"""The cooperative mainloop of cutlass_coop_wgmma_wait0_s4.cake in CUTLASS's persistent
form (`include/cutlass/gemm/kernel/sm90_gemm_tma_warpspecialized_cooperative.hpp` with
`PersistentTileSchedulerSm90`, `include/cutlass/gemm/kernel/sm90_tile_scheduler.hpp` /
`static_tile_scheduler.hpp`; collective
`include/cutlass/gemm/collective/sm90_mma_tma_gmma_ss_warpspecialized.hpp`; `PipelineTmaAsync`
of `include/cutlass/pipeline/sm90_pipeline.hpp`): the grid is `min(SMS, tiles)` CTAs
(SMS = 132, an H100 SXM), each walking the output tiles with the stride of
the grid (`advance_to_next_work`). The ring position is the running counter `it`,
CUTLASS's `PipelineState`, which the producer and consumer states keep from tile to tile
(`mainloop_pipe_consumer_state.advance(k_tile_count)`), so the barriers' phases carry
over. The producer's warp 0 arms and loads; after its last tile it runs `load_tail`
(S more acquires). The consumer role is two wgmma warpgroups (64 rows of the 128 x 128
tile each); per K tile it waits, issues, retires the group with `warpgroup_wait<0>()`
and releases with one signalling thread per warpgroup (`with lm.warps(0, 8, 4)`, lane 0
of role warps 0 and 4; `empty` counts 2), with no named barrier before the arrive.

Why it is legal (S = 4; K = 256: KT = 4; a CTA with two tiles): tile 0 takes positions
it = 0..3 (full parity 0; empty parity 1, fresh), tile 1 positions 4..7 (full parity 1;
empty parity 0: the releases of positions 0..3), and the tail positions 8..11 (empty
parity 1: the releases of positions 4..7). Every position is released once, after the
group that read it retired; a CTA without a tile runs only the tail, on fresh barriers."""
# expect: clean
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def gemm_persistent_coop_wgmma_s4(lm, A, B, C):
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
            for k in lm.range(0, KT, counter=it):
                full[it % S].wait(parity=(it // S) % 2)      # consumer_wait
                lm.mma_async(acc, a_s[it % S], b_s[it % S], transpose_b=True, init=(k == 0))
                lm.mma_wait(pending=0)                       # warpgroup_wait<0>
                with lm.warps(0, 8, 4):
                    empty[it % S].arrive()                   # consumer_release, this stage
            lm.store(C, at=(m0, n0), src=acc, mask=True)
