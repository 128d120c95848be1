"""GEMM with raw barriers whose consumer computes its parity through `lm.min(k, 3)`:
`(lm.min(k, 3) // S) % 2` equals the right parity `(k // S) % 2` for k = 0..3 and is 1
for every later k, so the pattern changes only after iteration 3, beyond a window that
counts `%` and `//` alone. Phase trace (S = 2): full[0] phases 0, 1, 2 serve k = 0, 2,
4; at k = 4 the consumer waits with parity 1 for phase 2 (parity 0): it passes on phase
1 (already observed, tile 2's data) while tile 4 is still landing, or, once phase 2 is
done, blocks for phase 3, which needs its own release (deadlock)."""
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def gemm_raw_parity_min(lm, A, B, C):
    BM, BN, BK, S = 64, 128, 64, 2
    lm.launch(grid=(lm.cdiv(lm.M, BM), lm.cdiv(lm.N, BN)), warps=8)
    a_s = lm.smem("bf16", (BM, BK), stages=S, swizzle="128B")
    b_s = lm.smem("bf16", (BN, BK), stages=S, swizzle="128B")
    full = lm.mbarrier(count=1, stages=S)
    empty = lm.mbarrier(count=4, stages=S)
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 8), regs=232)
    acc = lm.fragment("f32", (BM, BN), role=math)
    m0, n0 = lm.block(0) * BM, lm.block(1) * BN
    with loader:
        for k in lm.range(0, lm.cdiv(lm.K, BK)):
            empty[k % S].wait(parity=(k // S + 1) % 2)
            full[k % S].arrive_expect_tx(bytes=lm.nbytes(a_s, b_s))
            a_s[k % S].load(A, at=(m0, k * BK), barrier=full[k % S], pad=True)
            b_s[k % S].load(B, at=(n0, k * BK), barrier=full[k % S], pad=True)
    with math:
        for k in lm.range(0, lm.cdiv(lm.K, BK)):
            full[k % S].wait(parity=(lm.min(k, 3) // S) % 2)  # expect: P006
            lm.mma(acc, a_s[k % S], b_s[k % S], transpose_b=True, init=(k == 0))
            empty[k % S].arrive()
        lm.store(C, at=(m0, n0), src=acc, mask=True)
