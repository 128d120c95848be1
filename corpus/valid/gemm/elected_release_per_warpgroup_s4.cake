"""GEMM with a math role of two warpgroups that hands each stage back with one arrival
per warpgroup, as CUTLASS's `PipelineTmaAsync` does (`include/cutlass/pipeline/
sm90_pipeline.hpp`: the consumer threads of each warpgroup elect one signalling thread
per destination CTA, so the empty barrier of a one-CTA cluster counts one arrival per
consumer warpgroup), without splitting the role (its `setmaxnreg` runs on both
warpgroups together).

Each warp reads its operand rows with `mma.sync`, so before warp 0 of a warpgroup may
release the stage for all four, the warpgroup meets at its own named barrier (`wg0`,
`wg1`, 128 threads each: `with lm.warps(0, 4)` / `with lm.warps(4, 8)`); then
`with lm.warps(0, 8, 4)` (warps 0 and 4 of the role) arrives once per warpgroup on
`empty`, whose count is 2. The loader role issues everything from its warp 0.

Phase trace, stage 0, K = 512 (8 iterations): the loader passes `empty[0]` parity 1 on
the fresh barrier (k = 0) and arms `full[0]` with 32,768 B; math's 8 warps wait on
`full[0]` parity 0, multiply, meet per warpgroup, and warps 0 and 4 arrive: `empty[0]`
completes phase 0 with 2 of 2 arrivals; at k = 4 the loader's wait with parity 0
observes it and refills stage 0."""
# expect: clean
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def gemm_elected_release_per_warpgroup(lm, A, B, C):
    BM, BN, BK, S = 128, 128, 64, 4
    lm.launch(grid=(lm.cdiv(lm.M, BM), lm.cdiv(lm.N, BN)), warps=12)
    a_s = lm.smem("bf16", (BM, BK), stages=S, swizzle="128B")
    b_s = lm.smem("bf16", (BN, BK), stages=S, swizzle="128B")
    full = lm.mbarrier(count=1, stages=S)
    empty = lm.mbarrier(count=2, stages=S)                   # one arrival per math warpgroup
    wg0 = lm.named_barrier(id=1, threads=128)                # math warps 0..3
    wg1 = lm.named_barrier(id=2, threads=128)                # math warps 4..7
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 12), regs=232)
    acc = lm.fragment("f32", (BM, BN), role=math)
    m0, n0 = lm.block(0) * BM, lm.block(1) * BN
    with loader:
        with lm.warps(0, 1):
            for k in lm.range(0, lm.cdiv(lm.K, BK)):
                empty[k % S].wait(parity=(k // S + 1) % 2)
                full[k % S].arrive_expect_tx(bytes=lm.nbytes(a_s, b_s))
                a_s[k % S].load(A, at=(m0, k * BK), barrier=full[k % S], pad=True)
                b_s[k % S].load(B, at=(n0, k * BK), barrier=full[k % S], pad=True)
    with math:
        for k in lm.range(0, lm.cdiv(lm.K, BK)):
            full[k % S].wait(parity=(k // S) % 2)
            lm.mma(acc, a_s[k % S], b_s[k % S], transpose_b=True, init=(k == 0))
            lm.fence_proxy()                             # generic reads before the TMA refill (A19)
            with lm.warps(0, 4):
                wg0.sync()                                   # warpgroup 0 is done with stage
            with lm.warps(4, 8):
                wg1.sync()                                   # warpgroup 1 is done with stage
            with lm.warps(0, 8, 4):
                empty[k % S].arrive()                        # lane 0 of warps 0 and 4
        lm.store(C, at=(m0, n0), src=acc, mask=True)
