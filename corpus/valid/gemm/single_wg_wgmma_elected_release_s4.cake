"""A one-consumer-warpgroup warp-specialized GEMM (CUTLASS `KernelTmaWarpSpecialized`,
`include/cutlass/gemm/kernel/sm90_gemm_tma_warpspecialized.hpp`: one producer warpgroup
whose warp 0 loads, one consumer warpgroup; mainloop of
`include/cutlass/gemm/collective/sm90_mma_tma_gmma_ss_warpspecialized.hpp` with
`warpgroup_wait<0>()`; `PipelineTmaAsync` of `include/cutlass/pipeline/sm90_pipeline.hpp`).

The consumer role is one warpgroup (4 warps, 64 x 128 tile, wgmma m64n128k16 on 128B
swizzled K-major tiles). Per K tile it waits on `full[s]`, issues the group, retires it
with `lm.mma_wait(pending=0)` and hands the stage back with ONE arrival for the whole
warpgroup, `empty[s].arrive(per="role")` (lane 0 of warp 0: CUTLASS's single signalling
thread of the consumer warpgroup in a 1 x 1 cluster), so `empty` counts 1. No named
barrier precedes the arrive: the group was issued by the four warps together and
`wgmma.wait_group 0` returns only after it, with every operand read of the warpgroup,
has completed.

Why it is legal (S = 4, KT = 8): the producer's warp 0 waits `empty[k % 4]` with parity
`(k // 4 + 1) % 2` (passes on the fresh barrier for k < 4, then waits for phase 0: the
release of position k - 4), arms `full[k % 4]` once with the A + B bytes and issues both
copies; `load_tail` waits positions 8..11 (phase 1 of each stage: the release of
positions 4..7). The consumer waits `full[k % 4]` with parity `(k // 4) % 2` and releases
position k after its group retired: one arrival per stage per phase."""
# expect: clean
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def gemm_single_wg_wgmma_elected_release_s4(lm, A, B, C):
    BM, BN, BK, S = 64, 128, 64, 4
    KT = lm.cdiv(lm.K, BK)
    lm.launch(grid=(lm.cdiv(lm.M, BM), lm.cdiv(lm.N, BN)), warps=8)
    a_s = lm.smem("bf16", (BM, BK), stages=S, swizzle="128B")
    b_s = lm.smem("bf16", (BN, BK), stages=S, swizzle="128B")
    full = lm.mbarrier(count=1, stages=S)
    empty = lm.mbarrier(count=1, stages=S)                   # one signalling thread, one warpgroup
    producer = lm.role(warps=range(0, 4), regs=40)
    consumer = lm.role(warps=range(4, 8), regs=232)
    acc = lm.fragment("f32", (BM, BN), role=consumer)
    m0, n0 = lm.block(0) * BM, lm.block(1) * BN
    with producer:
        with lm.warps(0, 1):
            for k in lm.range(0, KT):
                empty[k % S].wait(parity=(k // S + 1) % 2)
                full[k % S].arrive_expect_tx(bytes=lm.nbytes(a_s, b_s))
                a_s[k % S].load(A, at=(m0, k * BK), barrier=full[k % S], pad=True)
                b_s[k % S].load(B, at=(n0, k * BK), barrier=full[k % S], pad=True)
            for k in lm.range(KT, KT + S):                   # load_tail
                empty[k % S].wait(parity=(k // S + 1) % 2)
    with consumer:
        for k in lm.range(0, KT):
            full[k % S].wait(parity=(k // S) % 2)
            lm.mma_async(acc, a_s[k % S], b_s[k % S], transpose_b=True, init=(k == 0))
            lm.mma_wait(pending=0)
            empty[k % S].arrive(per="role")                  # consumer_release
        lm.store(C, at=(m0, n0), src=acc, mask=True)
