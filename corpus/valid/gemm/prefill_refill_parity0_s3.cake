"""GEMM whose loader fills every stage in a prologue and then, indexing by the tile it
frees rather than the tile it loads, refills stage `j % S` with tile `j + S` after waiting
on `empty[j % S]` with parity `(j // S) % 2`. The math role releases tile j by completing
phase `j // S` of `empty[j % S]`, so the wait observes exactly the release of the tile
whose stage it reuses: parity 0 on the first refill is the first completed phase, not an
inverted producer parity. (The common CUTLASS form, `PipelineTmaAsync` with a producer
start state of phase 1, indexes by the loaded tile; both describe the same phases.)
Phase trace for S = 3, KT = 5: the prologue loads tiles 0, 1, 2; refill j = 0 waits
`empty[0]` phase 0 (math released tile 0) and loads tile 3 into stage 0; j = 1 waits
`empty[1]` phase 0 and loads tile 4; math waits `full[0]` parity 1 for tile 3."""
# expect: clean
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def gemm_prefill_refill_s3(lm, A, B, C):
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
        for k in lm.range(0, lm.min(S, KT)):          # prologue: every stage starts free
            full[k].arrive_expect_tx(bytes=lm.nbytes(a_s, b_s))
            a_s[k].load(A, at=(m0, k * BK), barrier=full[k], pad=True)
            b_s[k].load(B, at=(n0, k * BK), barrier=full[k], pad=True)
        for j in lm.range(0, KT - S):                 # refill stage j % S with tile j + S
            empty[j % S].wait(parity=(j // S) % 2)    # math released tile j
            full[j % S].arrive_expect_tx(bytes=lm.nbytes(a_s, b_s))
            a_s[j % S].load(A, at=(m0, (j + S) * BK), barrier=full[j % S], pad=True)
            b_s[j % S].load(B, at=(n0, (j + S) * BK), barrier=full[j % S], pad=True)
    with math:
        for k in lm.range(0, KT):
            full[k % S].wait(parity=(k // S) % 2)
            lm.mma(acc, a_s[k % S], b_s[k % S], transpose_b=True, init=(k == 0))
            empty[k % S].arrive()
        lm.store(C, at=(m0, n0), src=acc, mask=True)
