"""Derived from corpus/valid/gemm/deepgemm_fp8_s2.cake with `ring.release(k)` moved above the
promotion: the stage is handed back while `lm.scale_accumulate` still reads its row scales
`sa_s`, so the loader may overwrite them with the next block's (race)."""
@cake.schedule(target="sm_90a", workload="gemm_fp8", sizes={"K": 512, "KB": 4},
               divisible={"N": 128})
def gemm_fp8_release_early(lm, A, B, SA, SB, C):
    BM, BN, BK = 128, 128, 128
    lm.launch(grid=(lm.cdiv(lm.M, BM), lm.cdiv(lm.N, BN)), warps=12)
    a_s = lm.smem("f8e4m3", (BM, BK), stages=2)
    b_s = lm.smem("f8e4m3", (BN, BK), stages=2)
    sa_s = lm.smem("f32", (1, BM), stages=2)              # row scales of this K block
    sb_s = lm.smem("f32", (1, 4))                        # SB[n block, 0 .. KB - 1]
    sbar = lm.mbarrier(count=1)
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 12), regs=232)
    part = lm.fragment("f32", (BM, BN), role=math)
    acc = lm.fragment("f32", (BM, BN), role=math)
    ring = lm.pipeline(stages=2, buffers=[a_s, b_s, sa_s], producer=loader, consumer=math)
    m0, n0 = lm.block(0) * BM, lm.block(1) * BN
    with loader:
        sbar[0].arrive_expect_tx(bytes=lm.nbytes(sb_s))
        sb_s[0].load(SB, at=(lm.block(1), 0), barrier=sbar[0])
        for k in lm.range(0, lm.KB):
            ring.acquire(k)
            a_s[ring.stage(k)].load(A, at=(m0, k * BK), barrier=ring.full(k), pad=True)
            b_s[ring.stage(k)].load(B, at=(n0, k * BK), barrier=ring.full(k), pad=True)
            sa_s[ring.stage(k)].load(SA, at=(k, m0), barrier=ring.full(k), pad=True)
    with math:
        lm.fill(acc, 0.0)
        sbar[0].wait(parity=0)
        for k in lm.range(0, lm.KB):
            ring.wait(k)
            lm.mma(part, a_s[ring.stage(k)], b_s[ring.stage(k)], transpose_b=True, init=True)
            ring.release(k)  # expect: P010
            lm.scale_accumulate(acc, part, sa_s[ring.stage(k)], sb_s[0], at=k)
        lm.store(C, at=(m0, n0), src=acc, mask=True)
