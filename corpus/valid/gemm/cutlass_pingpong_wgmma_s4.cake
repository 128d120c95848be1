"""CUTLASS's ping-pong warp-specialized GEMM as the source writes it
(`include/cutlass/gemm/kernel/sm90_gemm_tma_warpspecialized_pingpong.hpp`, kernel schedule
`KernelTmaWarpSpecializedPingpong`; mainloop
`include/cutlass/gemm/collective/sm90_mma_tma_gmma_ss_warpspecialized.hpp`; `PipelineTmaAsync`
and `OrderedSequenceBarrier` of `include/cutlass/pipeline/sm90_pipeline.hpp`), with the
four output tiles of a CTA walked in order as in pingpong_token_s4.cake.

- Producer warpgroup: warp 0 fills one 4-stage ring with the K tiles of the CTA's four
  64 x 128 output tiles in order (ring position p: tile p // KT, K block p % KT), then
  runs `load_tail` (S more acquires).
- Two consumer roles of one warpgroup each (math0 takes tiles 0 and 2, math1 tiles 1 and
  3). `PipelineTmaAsync` is built with `num_consumers = NumThreadsPerWarpGroup`, so each
  stage is read by one warpgroup and its empty barrier counts one arrival: the
  warpgroup's signalling thread, `arrive(per="role")`.
- Each warpgroup runs the collective's `mma` (peeled first K tile; then wait, issue,
  `warpgroup_wait<1>`, release the previous stage) between the order barrier's `wait()`
  and `arrive()` (`math_wg_order_barrier`), then `mma_tail` (`warpgroup_wait<0>`, release
  the last stage) and its store. The order barrier is a pair of one-slot mbarriers: math0
  waits `tok0` with parity `(t + 1) % 2` (passes on the fresh barrier: group 0 of the
  sequence starts), arrives on `tok1`; math1 waits `tok1` with parity `t % 2` and arrives
  on `tok0`. As in the source, every thread of the warpgroup arrives on the order
  barrier (`OrderedSequenceBarrier::arrive()` is called by all threads, its barriers are
  initialised with `group_size` = NumThreadsPerWarpGroup = 128): `arrive(per="thread")`,
  count 128.
- No named barrier precedes any elected arrive: each wgmma group is issued by the whole
  warpgroup, so when the signalling thread's `wgmma.wait_group` returns, every warp of the
  warpgroup has issued that group and its operand reads are complete.

Why it is legal (S = 4, KT = 2: positions 0..7; math0 reads 0, 1, 4, 5, math1 2, 3, 6, 7).
math0 t = 0 passes `tok0` (fresh), waits `full[0]`, `full[1]` parity 0, releases
positions 0 and 1, arrives `tok1` (phase 0); math1 t = 0 waits `tok1` parity 0, reads
positions 2, 3 (`full[2]`, `full[3]` phase 0) and arrives `tok0` (phase 0); math0 t = 1
waits `tok0` parity 0 and reads positions 4, 5 (`full[0]`, `full[1]` parity 1, phase 1:
filled only after the releases of positions 0 and 1). When a warpgroup starts a tile the
other has observed every earlier position, so no wait is more than one phase behind its
slot. Each position is released once, after the group that read it retired; the
producer's waits `(p // S + 1) % 2` and its tail see exactly those releases. math1's
last `tok0` arrive is never waited for (a half-used phase is not observable)."""
# expect: clean
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def gemm_cutlass_pingpong_wgmma_s4(lm, A, B, C):
    BM, BN, BK, S, T = 64, 128, 64, 4, 2
    KT = lm.cdiv(lm.K, BK)
    lm.launch(grid=(lm.cdiv(lm.M, 2 * T * BM), lm.cdiv(lm.N, BN)), warps=12)
    a_s = lm.smem("bf16", (BM, BK), stages=S, swizzle="128B")
    b_s = lm.smem("bf16", (BN, BK), stages=S, swizzle="128B")
    full = lm.mbarrier(count=1, stages=S)
    empty = lm.mbarrier(count=1, stages=S)          # the signalling thread of whichever warpgroup
    tok0 = lm.mbarrier(count=128)                   # math1 hands the order token to math0
    tok1 = lm.mbarrier(count=128)                   # math0 hands the order token to math1
    producer = lm.role(warps=range(0, 4), regs=40)
    math0 = lm.role(warps=range(4, 8), regs=232)
    math1 = lm.role(warps=range(8, 12), regs=232)
    acc0 = lm.fragment("f32", (BM, BN), role=math0)
    acc1 = lm.fragment("f32", (BM, BN), role=math1)
    m0, n0 = lm.block(0) * 2 * T * BM, lm.block(1) * BN
    with producer:
        with lm.warps(0, 1):
            for p in lm.range(0, 2 * T * KT):
                empty[p % S].wait(parity=(p // S + 1) % 2)
                full[p % S].arrive_expect_tx(bytes=lm.nbytes(a_s, b_s))
                a_s[p % S].load(A, at=(m0 + (p // KT) * BM, (p % KT) * BK), barrier=full[p % S], pad=True)
                b_s[p % S].load(B, at=(n0, (p % KT) * BK), barrier=full[p % S], pad=True)
            for p in lm.range(2 * T * KT, 2 * T * KT + S):   # load_tail
                empty[p % S].wait(parity=(p // S + 1) % 2)
    with math0:
        for t in lm.range(0, T):
            P = 2 * t * KT                                   # first ring position of this tile
            tok0[0].wait(parity=(t + 1) % 2)                 # math_wg_order_barrier.wait()
            full[P % S].wait(parity=(P // S) % 2)
            lm.mma_async(acc0, a_s[P % S], b_s[P % S], transpose_b=True, init=True)
            for k in lm.range(1, KT):
                full[(P + k) % S].wait(parity=((P + k) // S) % 2)
                lm.mma_async(acc0, a_s[(P + k) % S], b_s[(P + k) % S], transpose_b=True)
                lm.mma_wait(pending=1)
                empty[(P + k - 1) % S].arrive(per="role")    # consumer_release, previous stage
            tok1[0].arrive(per="thread")                     # math_wg_order_barrier.arrive()
            lm.mma_wait(pending=0)                           # mma_tail
            empty[(P + KT - 1) % S].arrive(per="role")
            lm.store(C, at=(m0 + 2 * t * BM, n0), src=acc0, mask=True)
    with math1:
        for t in lm.range(0, T):
            P = (2 * t + 1) * KT
            tok1[0].wait(parity=t % 2)
            full[P % S].wait(parity=(P // S) % 2)
            lm.mma_async(acc1, a_s[P % S], b_s[P % S], transpose_b=True, init=True)
            for k in lm.range(1, KT):
                full[(P + k) % S].wait(parity=((P + k) // S) % 2)
                lm.mma_async(acc1, a_s[(P + k) % S], b_s[(P + k) % S], transpose_b=True)
                lm.mma_wait(pending=1)
                empty[(P + k - 1) % S].arrive(per="role")
            tok0[0].arrive(per="thread")
            lm.mma_wait(pending=0)
            empty[(P + KT - 1) % S].arrive(per="role")
            lm.store(C, at=(m0 + (2 * t + 1) * BM, n0), src=acc1, mask=True)
