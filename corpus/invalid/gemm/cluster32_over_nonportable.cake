"""GEMM with raw mbarriers in clusters of 32 CTAs with the non-portable opt-in: sm_90a runs
at most 16 CTAs per cluster even then. Same as
corpus/valid/gemm/cluster16_nonportable_s2.cake except the cluster size."""
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def gemm_raw_cluster32_s2(lm, A, B, C):
    BM, BN, BK, S, CX = 64, 128, 64, 2, 32
    lm.launch(grid=(CX * lm.cdiv(lm.M, CX * BM), lm.cdiv(lm.N, BN)), warps=8,  # expect: R008
              cluster=(CX, 1, 1), cluster_nonportable=True)
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
            empty[k % S].wait(parity=(k // S + 1) % 2)   # producer starts on parity 1
            full[k % S].arrive_expect_tx(bytes=lm.nbytes(a_s, b_s))
            a_s[k % S].load(A, at=(m0, k * BK), barrier=full[k % S], pad=True)
            b_s[k % S].load(B, at=(n0, k * BK), barrier=full[k % S], pad=True)
    with math:
        for k in lm.range(0, lm.cdiv(lm.K, BK)):
            full[k % S].wait(parity=(k // S) % 2)
            lm.mma(acc, a_s[k % S], b_s[k % S], transpose_b=True, init=(k == 0))
            empty[k % S].arrive()
        lm.store(C, at=(m0, n0), src=acc, mask=True)
