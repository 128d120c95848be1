"""valid/gemm/raw_manual_init_s2.cake with the B copy landing in the next stage: the loader
arms `full[k % S]` and copies B into `b_s[(k + 1) % S]` with `barrier=full[k % S]`. The
bytes count on the barrier of stage k, so `full[k % S]` completes when B of tile k has
landed in the other stage, which the math role may still be reading (race), and stage k
of `b_s` holds the previous pass's tile when the MMA reads it. The repair is the copy's
stage: the one its `barrier=` counts the bytes on (`b_s[k % S]`)."""
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def gemm_raw_copy_into_next_stage(lm, A, B, C):
    BM, BN, BK, S = 64, 128, 64, 2
    lm.launch(grid=(lm.cdiv(lm.M, BM), lm.cdiv(lm.N, BN)), warps=8)
    a_s = lm.smem("bf16", (BM, BK), stages=S, swizzle="128B")
    b_s = lm.smem("bf16", (BN, BK), stages=S, swizzle="128B")
    full = lm.mbarrier(count=1, stages=S, init="manual")
    empty = lm.mbarrier(count=4, stages=S, init="manual")    # one arrive per math warp
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 8), regs=232)
    acc = lm.fragment("f32", (BM, BN), role=math)
    m0, n0 = lm.block(0) * BM, lm.block(1) * BN
    with loader:
        for s in lm.range(0, S):
            full[s].init()
            empty[s].init()
        lm.fence_barrier_init()                              # make the inits visible
        lm.sync_cta()                                        # ... to every role
        for k in lm.range(0, lm.cdiv(lm.K, BK)):
            empty[k % S].wait(parity=(k // S + 1) % 2)
            full[k % S].arrive_expect_tx(bytes=lm.nbytes(a_s, b_s))
            a_s[k % S].load(A, at=(m0, k * BK), barrier=full[k % S], pad=True)
            b_s[(k + 1) % S].load(B, at=(n0, k * BK), barrier=full[k % S], pad=True)  # expect: P029
    with math:
        lm.sync_cta()                                        # barriers are initialised
        for k in lm.range(0, lm.cdiv(lm.K, BK)):
            full[k % S].wait(parity=(k // S) % 2)
            lm.mma(acc, a_s[k % S], b_s[k % S], transpose_b=True, init=(k == 0))
            empty[k % S].arrive()
        lm.store(C, at=(m0, n0), src=acc, mask=True)
