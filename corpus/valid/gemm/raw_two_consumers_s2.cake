"""GEMM with raw mbarriers, one loader warpgroup and two math warpgroups that share a
2-stage ring: each math warpgroup computes 64 rows of the 128-row tile from its own half
of A (`a0_s`, `a1_s`) and all of B. Both warpgroups release every stage, one arrive per
warp, so the empty barrier counts 2 x 4 = 8 arrivals per phase."""
# expect: clean
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def gemm_raw_two_consumers_s2(lm, A, B, C):
    BH, BN, BK, S = 64, 128, 64, 2
    lm.launch(grid=(lm.cdiv(lm.M, 2 * BH), lm.cdiv(lm.N, BN)), warps=12)
    a0_s = lm.smem("bf16", (BH, BK), stages=S, swizzle="128B")
    a1_s = lm.smem("bf16", (BH, BK), stages=S, swizzle="128B")
    b_s = lm.smem("bf16", (BN, BK), stages=S, swizzle="128B")
    full = lm.mbarrier(count=1, stages=S)
    empty = lm.mbarrier(count=8, stages=S)          # 4 warps of math0 + 4 warps of math1
    loader = lm.role(warps=range(0, 4), regs=40)
    math0 = lm.role(warps=range(4, 8), regs=232)
    math1 = lm.role(warps=range(8, 12), regs=232)
    acc0 = lm.fragment("f32", (BH, BN), role=math0)
    acc1 = lm.fragment("f32", (BH, BN), role=math1)
    m0, n0 = lm.block(0) * 2 * BH, lm.block(1) * BN
    with loader:
        for k in lm.range(0, lm.cdiv(lm.K, BK)):
            empty[k % S].wait(parity=(k // S + 1) % 2)
            full[k % S].arrive_expect_tx(bytes=lm.nbytes(a0_s, a1_s, b_s))
            a0_s[k % S].load(A, at=(m0, k * BK), barrier=full[k % S], pad=True)
            a1_s[k % S].load(A, at=(m0 + BH, k * BK), barrier=full[k % S], pad=True)
            b_s[k % S].load(B, at=(n0, k * BK), barrier=full[k % S], pad=True)
    with math0:
        for k in lm.range(0, lm.cdiv(lm.K, BK)):
            full[k % S].wait(parity=(k // S) % 2)
            lm.mma(acc0, a0_s[k % S], b_s[k % S], transpose_b=True, init=(k == 0))
            empty[k % S].arrive()
        lm.store(C, at=(m0, n0), src=acc0, mask=True)
    with math1:
        for k in lm.range(0, lm.cdiv(lm.K, BK)):
            full[k % S].wait(parity=(k // S) % 2)
            lm.mma(acc1, a1_s[k % S], b_s[k % S], transpose_b=True, init=(k == 0))
            empty[k % S].arrive()
        lm.store(C, at=(m0 + BH, n0), src=acc1, mask=True)
