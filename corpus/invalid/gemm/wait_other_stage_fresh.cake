"""The producer waits on the other stage's empty slot (a stage-index mutant of
valid/gemm/raw_barriers_s2.cake). At k=1 it waits parity 1 on empty[0]; if the math
warpgroup releases stage 0 first, phase 0 completes before the wait is reached, the
parity no longer differs and the loader waits for phase 1, which needs the stage it has
not filled yet: a deadlock under consumer-ahead scheduling, on the fresh barrier. The
parity is right for the stage the iteration fills; the repair is the wait's index, the
slot every other ring statement of the iteration names (`empty[k % S]`)."""
# origin: mutant valid/gemm/raw_barriers_s2.cake stage-plus-one 0
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def gemm_raw_s2(lm, A, B, C):
    BM, BN, BK, S = 64, 128, 64, 2
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
            empty[(k + 1) % S].wait(parity=(k // S + 1) % 2)  # expect: P029
            full[k % S].arrive_expect_tx(bytes=lm.nbytes(a_s, b_s))
            a_s[k % S].load(A, at=(m0, k * BK), barrier=full[k % S], pad=True)
            b_s[k % S].load(B, at=(n0, k * BK), barrier=full[k % S], pad=True)
    with math:
        for k in lm.range(0, lm.cdiv(lm.K, BK)):
            full[k % S].wait(parity=(k // S) % 2)
            lm.mma(acc, a_s[k % S], b_s[k % S], transpose_b=True, init=(k == 0))
            empty[k % S].arrive()
        lm.store(C, at=(m0, n0), src=acc, mask=True)
