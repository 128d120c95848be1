"""GEMM with raw barriers whose math warpgroup hands each stage back with one arrive for
the whole role (`per="role"`, count 1) right after its MMA: the arrive orders only the
elected thread's reads of the stage (and, through mma.sync, the reads of its warp), not
those of warps 5..7, so the loader's next bulk copy into the stage may overwrite it
while they still load their A and B fragments (PTX memory model: an mbarrier arrive
releases the arriving thread's prior accesses only). Phase trace: empty[0] phase 0
completes with the single arrive of warp 4 at k = 0; the loader's wait for k = 2 (parity
0) passes and its copy writes a_s stage 0, unordered with warp 5's reads at k = 0. The
fix is a barrier over the role before the arrive (or one arrive per warp, count 4)."""
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def gemm_raw_role_release(lm, A, B, C):
    BM, BN, BK, S = 64, 128, 64, 2
    lm.launch(grid=(lm.cdiv(lm.M, BM), lm.cdiv(lm.N, BN)), warps=8)
    a_s = lm.smem("bf16", (BM, BK), stages=S, swizzle="128B")
    b_s = lm.smem("bf16", (BN, BK), stages=S, swizzle="128B")
    full = lm.mbarrier(count=1, stages=S)
    empty = lm.mbarrier(count=1, stages=S)          # one arrive for the whole math role
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
            full[k % S].wait(parity=(k // S) % 2)
            lm.mma(acc, a_s[k % S], b_s[k % S], transpose_b=True, init=(k == 0))
            empty[k % S].arrive(per="role")  # expect: P011
        lm.store(C, at=(m0, n0), src=acc, mask=True)
