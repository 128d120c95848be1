"""The CUTLASS cooperative mainloop of cutlass_coop_wgmma_s4.cake (same sources:
`include/cutlass/gemm/kernel/sm90_gemm_tma_warpspecialized_cooperative.hpp`,
`include/cutlass/gemm/collective/sm90_mma_tma_gmma_ss_warpspecialized.hpp`,
`PipelineTmaAsync` in `include/cutlass/pipeline/sm90_pipeline.hpp`) with no wgmma group
kept in flight across K tiles: `warpgroup_wait<0>()` where CUTLASS writes
`warpgroup_wait<K_PIPE_MMAS>()`, so every K tile is `consumer_wait`, issue,
`warpgroup_wait<0>()` and `consumer_release` of the stage just read (the shape of the
FA3 mainloop's `warpgroup_wait<0>(); pipeline_k.consumer_release(...)`), and no tail
release is needed. One signalling thread per consumer warpgroup releases
(`with lm.warps(0, 8, 4)`, lane 0 of role warps 0 and 4; `empty` counts 2), with no named
barrier before it: the wgmma group is issued by the whole warpgroup and
`wgmma.wait_group 0` returns only when every warp's operand reads are done.

Why it is legal (S = 4, KT = 8): position k fills stage k % 4; the producer waits
`empty[k % 4]` with parity `(k // 4 + 1) % 2` (1 on the fresh barrier for k < 4, 0 for
k = 4..7: phase 0, the release of position k - 4) and its load_tail waits parity 1 for
positions 8..11 (phase 1: the release of position k - 4). The consumer releases position
k at iteration k, after the group that read it retired: one release (two arrivals) per
stage per phase."""
# expect: clean
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
            full[k % S].wait(parity=(k // S) % 2)            # consumer_wait
            lm.mma_async(acc, a_s[k % S], b_s[k % S], transpose_b=True, init=(k == 0))
            lm.mma_wait(pending=0)                           # warpgroup_wait<0>
            with lm.warps(0, 8, 4):
                empty[k % S].arrive()                        # consumer_release, this stage
        lm.store(C, at=(m0, n0), src=acc, mask=True)
