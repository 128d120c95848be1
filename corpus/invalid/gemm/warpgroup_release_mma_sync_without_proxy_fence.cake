"""GEMM whose math role of two warpgroups reads each stage with `mma.sync` (`ldmatrix`,
the generic proxy), meets per warpgroup at a named barrier and releases the stage with
one elected arrive per warpgroup, as corpus/valid/gemm/elected_release_per_warpgroup_s4.cake
does, but with no `lm.fence_proxy()` before the warpgroup barrier. The lowering fences
before the arrive, in the arriving lane's warp only; the other warps' reads reach the
arrive through `bar.sync`, which orders them for generic accesses and not for the TMA
copy (the async proxy) the release lets the loader issue into the same bytes (PTX ISA,
memory consistency model: proxies; axiom A19). The copy may land while a warp's
`ldmatrix` loads of the old tile are still outstanding: wrong products, intermittently,
the defect three FlashAttention-3 transcriptions showed on an H200."""
# origin: transcription of the valid twin without its proxy fence
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def gemm_elected_release_per_warpgroup(lm, A, B, C):
    BM, BN, BK, S = 128, 128, 64, 4
    lm.launch(grid=(lm.cdiv(lm.M, BM), lm.cdiv(lm.N, BN)), warps=12)
    a_s = lm.smem("bf16", (BM, BK), stages=S, swizzle="128B")
    b_s = lm.smem("bf16", (BN, BK), stages=S, swizzle="128B")
    full = lm.mbarrier(count=1, stages=S)
    empty = lm.mbarrier(count=2, stages=S)                   # one arrival per math warpgroup
    wg0 = lm.named_barrier(id=1, threads=128)                # math warps 0..3
    wg1 = lm.named_barrier(id=2, threads=128)                # math warps 4..7
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 12), regs=232)
    acc = lm.fragment("f32", (BM, BN), role=math)
    m0, n0 = lm.block(0) * BM, lm.block(1) * BN
    with loader:
        with lm.warps(0, 1):
            for k in lm.range(0, lm.cdiv(lm.K, BK)):
                empty[k % S].wait(parity=(k // S + 1) % 2)
                full[k % S].arrive_expect_tx(bytes=lm.nbytes(a_s, b_s))
                a_s[k % S].load(A, at=(m0, k * BK), barrier=full[k % S], pad=True)
                b_s[k % S].load(B, at=(n0, k * BK), barrier=full[k % S], pad=True)
    with math:
        for k in lm.range(0, lm.cdiv(lm.K, BK)):
            full[k % S].wait(parity=(k // S) % 2)
            lm.mma(acc, a_s[k % S], b_s[k % S], transpose_b=True, init=(k == 0))  # expect: P013
            with lm.warps(0, 4):
                wg0.sync()                                   # warpgroup 0 is done with stage
            with lm.warps(4, 8):
                wg1.sync()                                   # warpgroup 1 is done with stage
            with lm.warps(0, 8, 4):
                empty[k % S].arrive()                        # lane 0 of warps 0 and 4
        lm.store(C, at=(m0, n0), src=acc, mask=True)
