"""GEMM with raw mbarriers and a 3-stage ring whose producer skips the first empty wait.

Every stage starts free, so the loader peels the first pass (`k < S`) and issues those
loads without waiting; from iteration S on it waits on `empty[k % S]` with parity
`(k // S + 1) % 2`, i.e. for the phase the math role completes when it releases iteration
`k - S`. A naive checker that demands a wait before every load flags the prologue. The
loader is a single warp (no `regs=`: setmaxnreg needs whole warpgroups)."""
# expect: clean
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def gemm_raw_peeled_s3(lm, A, B, C):
    BM, BN, BK, S = 64, 128, 64, 3
    KT = lm.cdiv(lm.K, BK)
    lm.launch(grid=(lm.cdiv(lm.M, BM), lm.cdiv(lm.N, BN)), warps=5)
    a_s = lm.smem("bf16", (BM, BK), stages=S, swizzle="128B")
    b_s = lm.smem("bf16", (BN, BK), stages=S, swizzle="128B")
    full = lm.mbarrier(count=1, stages=S)
    empty = lm.mbarrier(count=4, stages=S)          # one arrive per math warp
    loader = lm.role(warps=range(0, 1))
    math = lm.role(warps=range(1, 5))
    acc = lm.fragment("f32", (BM, BN), role=math)
    m0, n0 = lm.block(0) * BM, lm.block(1) * BN
    with loader:
        for k in lm.range(0, lm.min(S, KT)):          # first pass: no empty wait
            full[k].arrive_expect_tx(bytes=lm.nbytes(a_s, b_s))
            a_s[k].load(A, at=(m0, k * BK), barrier=full[k], pad=True)
            b_s[k].load(B, at=(n0, k * BK), barrier=full[k], pad=True)
        for k in lm.range(S, KT):
            empty[k % S].wait(parity=(k // S + 1) % 2)   # phase k // S - 1 of the stage
            full[k % S].arrive_expect_tx(bytes=lm.nbytes(a_s, b_s))
            a_s[k % S].load(A, at=(m0, k * BK), barrier=full[k % S], pad=True)
            b_s[k % S].load(B, at=(n0, k * BK), barrier=full[k % S], pad=True)
    with math:
        for k in lm.range(0, KT):
            full[k % S].wait(parity=(k // S) % 2)
            lm.mma(acc, a_s[k % S], b_s[k % S], transpose_b=True, init=(k == 0))
            empty[k % S].arrive()
        lm.store(C, at=(m0, n0), src=acc, mask=True)
