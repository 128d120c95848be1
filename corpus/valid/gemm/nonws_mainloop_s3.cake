"""A non-warp-specialized TMA mainloop, as in CUTLASS's `sm90_mma_tma_gmma_ss.hpp`: one
warpgroup is both producer and consumer. It fills `min(S, KT)` stages in a prologue,
then for each tile k waits `full[k % S]`, runs the MMA, releases the stage on
`empty[k % S]` (one arrive per warp) and, while tiles remain, waits on that same
`empty[k % S]` with parity `(k // S) % 2` before refilling the stage with tile k + S.
The role waits for the phase its own arrives complete: every one of its four warps has
arrived before any thread can pass, so the refill cannot overwrite a stage another warp
is still reading. The last `min(S, KT)` tiles are consumed without a refill (peeled,
as the language has no conditionals) and leave their `empty` phases complete but
unobserved. Phase trace for S = 3, KT = 4: prologue loads tiles 0..2; k = 0 waits
`full[0]` parity 0, arrives `empty[0]` (phase 0 completes with the 4th warp), waits it
with parity 0 and loads tile 3 into stage 0; k = 1..3 consume without refill, k = 3
waiting `full[0]` parity 1."""
# expect: clean
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def gemm_nonws_mainloop_s3(lm, A, B, C):
    BM, BN, BK, S = 64, 128, 64, 3
    KT = lm.cdiv(lm.K, BK)
    lm.launch(grid=(lm.cdiv(lm.M, BM), lm.cdiv(lm.N, BN)), warps=4)
    a_s = lm.smem("bf16", (BM, BK), stages=S, swizzle="128B")
    b_s = lm.smem("bf16", (BN, BK), stages=S, swizzle="128B")
    full = lm.mbarrier(count=1, stages=S)
    empty = lm.mbarrier(count=4, stages=S)          # one arrive per warp of the warpgroup
    wg = lm.role(warps=range(0, 4))
    acc = lm.fragment("f32", (BM, BN), role=wg)
    m0, n0 = lm.block(0) * BM, lm.block(1) * BN
    with wg:
        for k in lm.range(0, lm.min(S, KT)):
            full[k].arrive_expect_tx(bytes=lm.nbytes(a_s, b_s))
            a_s[k].load(A, at=(m0, k * BK), barrier=full[k], pad=True)
            b_s[k].load(B, at=(n0, k * BK), barrier=full[k], pad=True)
        for k in lm.range(0, KT - S):                 # consume tile k, refill with k + S
            full[k % S].wait(parity=(k // S) % 2)
            lm.mma(acc, a_s[k % S], b_s[k % S], transpose_b=True, init=(k == 0))
            empty[k % S].arrive()
            empty[k % S].wait(parity=(k // S) % 2)    # every warp has finished reading
            full[k % S].arrive_expect_tx(bytes=lm.nbytes(a_s, b_s))
            a_s[k % S].load(A, at=(m0, (k + S) * BK), barrier=full[k % S], pad=True)
            b_s[k % S].load(B, at=(n0, (k + S) * BK), barrier=full[k % S], pad=True)
        for k in lm.range(KT - lm.min(S, KT), KT):    # the last tiles: nothing to refill
            full[k % S].wait(parity=(k // S) % 2)
            lm.mma(acc, a_s[k % S], b_s[k % S], transpose_b=True, init=(k == 0))
        lm.store(C, at=(m0, n0), src=acc, mask=True)
