"""CUTLASS's cooperative warp-specialized GEMM mainloop as the source writes it
(`include/cutlass/gemm/kernel/sm90_gemm_tma_warpspecialized_cooperative.hpp`, kernel schedule
`KernelTmaWarpSpecializedCooperative`; collective
`include/cutlass/gemm/collective/sm90_mma_tma_gmma_ss_warpspecialized.hpp`; pipeline
`PipelineTmaAsync` of `include/cutlass/pipeline/sm90_pipeline.hpp`), one tile per CTA.

- Producer warpgroup (40 registers): only its warp 0 works (`ProducerWarpRole::Mainloop`,
  the elected `is_leader` thread arms `full[s]` with the A + B bytes in `producer_acquire`),
  here `with lm.warps(0, 1):`; after the K loop it runs `load_tail` (`producer_tail`:
  acquire S more positions, i.e. wait until the consumers released every stage).
- Consumer: one role of 8 warps (two warpgroups, 232 registers) sharing the 128 x 128
  tile, 64 rows per warpgroup; A and B tiles are 128B-swizzled and K-major, so
  `lm.mma_async` lowers to wgmma m64n128k16 on each warpgroup (docs/lowering.md "wgmma").
- Mainloop as `CollectiveMma::mma`: the first K tile is peeled (wait, issue, no release),
  then per K tile `consumer_wait`, issue, `warpgroup_wait<K_PIPE_MMAS>()` with
  K_PIPE_MMAS = 1 (`lm.mma_wait(pending=1)`: the group of k - 1 has finished) and
  `consumer_release(smem_pipe_release)` of the previous stage; `mma_tail` is
  `warpgroup_wait<0>()` and the release of the last stage.
- Release: `PipelineTmaAsync` elects one signalling thread per consumer warpgroup
  (`is_signalling_thread_`; with a 1 x 1 cluster only thread 0 of each warpgroup signals
  destination block 0), and the empty barrier counts
  `(cluster_x + cluster_y - 1) * num_consumer_warpgroups_per_cluster` = 2 arrivals:
  `with lm.warps(0, 8, 4): empty[...].arrive()` is lane 0 of warps 0 and 4 of the role.
  There is no named barrier before it: the warpgroup's wgmma group is issued by all four
  warps together and `wgmma.wait_group` returns only once that group, i.e. every warp's
  operand reads, has completed.

Why it is legal (S = 4, K = 512: KT = 8). Stage s is filled at positions s and s + 4. The
producer waits `empty[s]` with parity `(k // S + 1) % 2`: 1 for k < 4 (fresh barrier), 0
for k = 4..7 (phase 0: the release of position k - 4), and the tail waits positions 8..11
with parity 1 (phase 1: the release of position k - 4 again). The consumer waits `full[s]`
with parity `(k // S) % 2`. Position p is released at iteration p + 1 (after
`mma_wait(pending=1)` retired group p) or, for p = KT - 1, after `mma_wait(pending=0)`:
each stage receives exactly one release (2 arrivals) per phase, never before the group
reading it has completed, and every phase the producer waits for is completed by the
releases of the positions before it."""
# expect: clean
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
            lm.mma_wait(pending=1)                           # warpgroup_wait<K_PIPE_MMAS>
            with lm.warps(0, 8, 4):
                empty[(k - 1) % S].arrive()                  # consumer_release(smem_pipe_release)
        lm.mma_wait(pending=0)                               # mma_tail: warpgroup_wait<0>
        with lm.warps(0, 8, 4):
            empty[(KT - 1) % S].arrive()
        lm.store(C, at=(m0, n0), src=acc, mask=True)
