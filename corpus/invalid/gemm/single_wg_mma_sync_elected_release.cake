"""Twin of valid/gemm/single_wg_wgmma_elected_release_s4.cake with the GEMM as synchronous
`lm.mma` (`mma.sync`: each warp reads its own operand rows) instead of `lm.mma_async` +
`lm.mma_wait(pending=0)`: the single `empty[s].arrive(per="role")` (lane 0 of warp 0,
`empty` counting 1, CUTLASS's one signalling thread of `PipelineTmaAsync` in
`include/cutlass/pipeline/sm90_pipeline.hpp`) then carries only warp 0's reads, and the
producer may refill the stage while warps 1-3 still read it. One defect: the missing
warpgroup barrier before the elected arrive."""
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
            lm.mma(acc, a_s[k % S], b_s[k % S], transpose_b=True, init=(k == 0))
            empty[k % S].arrive(per="role")  # expect: P011
        lm.store(C, at=(m0, n0), src=acc, mask=True)
