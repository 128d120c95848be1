"""GEMM with raw mbarriers and a 4-stage ring whose loader flips its empty-barrier parity
every 2 iterations, `(k // 2 + 1) % 2`, left over from a 2-stage version, instead of
every S = 4: the parity must stay 1 for the whole first pass over the ring (k = 0..3),
but at k = 2 it is already 0, so the loader waits for a release of stage 2 that can only
come after it has filled stage 2. Deadlock.
Derived from corpus/valid/gemm/raw_barriers_s2.cake with S = 4 (was 2) and the loader's
parity `(k // 2 + 1) % 2` (was `(k // S + 1) % 2`)."""
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def gemm_raw_s4_flip_period(lm, A, B, C):
    BM, BN, BK, S = 64, 128, 64, 4
    lm.launch(grid=(lm.cdiv(lm.M, BM), lm.cdiv(lm.N, BN)), warps=8)
    a_s = lm.smem("bf16", (BM, BK), stages=S, swizzle="128B")
    b_s = lm.smem("bf16", (BN, BK), stages=S, swizzle="128B")
    full = lm.mbarrier(count=1, stages=S)
    empty = lm.mbarrier(count=4, stages=S)          # one arrive per math warp
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 8), regs=232)
    acc = lm.fragment("f32", (BM, BN), role=math)
    m0, n0 = lm.block(0) * BM, lm.block(1) * BN
    with loader:
        for k in lm.range(0, lm.cdiv(lm.K, BK)):
            empty[k % S].wait(parity=(k // 2 + 1) % 2)  # expect: P006
            full[k % S].arrive_expect_tx(bytes=lm.nbytes(a_s, b_s))
            a_s[k % S].load(A, at=(m0, k * BK), barrier=full[k % S], pad=True)
            b_s[k % S].load(B, at=(n0, k * BK), barrier=full[k % S], pad=True)
    with math:
        for k in lm.range(0, lm.cdiv(lm.K, BK)):
            full[k % S].wait(parity=(k // S) % 2)
            lm.mma(acc, a_s[k % S], b_s[k % S], transpose_b=True, init=(k == 0))
            empty[k % S].arrive()
        lm.store(C, at=(m0, n0), src=acc, mask=True)
