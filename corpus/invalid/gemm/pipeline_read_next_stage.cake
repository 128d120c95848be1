"""valid/gemm/ws_pipeline_tail_s4.cake with the A operand read one stage ahead: after
`ring.wait(k)` the MMA reads `a_s[ring.stage(k + 1)]`, a stage whose copy the wait does
not cover. On the first iteration the loader's copy of tile 1 into `a_s` stage 1 is still
in flight when the MMA reads it (race); at the last the stage holds a tile of the previous
pass. The wait is right and present, so no wait is missing: the repair is the index, the
stage `ring.wait(k)` made visible (`ring.stage(k)`)."""
@cake.schedule(target="sm_90a", workload="gemm")
def gemm_pipeline_read_next_stage(lm, A, B, C):
    BM, BN, BK = 128, 128, 64
    lm.launch(grid=(lm.cdiv(lm.M, BM), lm.cdiv(lm.N, BN)), warps=12)
    a_s = lm.smem("bf16", (BM, BK), stages=4, swizzle="128B")
    b_s = lm.smem("bf16", (BN, BK), stages=4, swizzle="128B")
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 12), regs=232)
    acc = lm.fragment("f32", (BM, BN), role=math)
    ring = lm.pipeline(stages=4, buffers=[a_s, b_s], producer=loader, consumer=math)
    m0, n0 = lm.block(0) * BM, lm.block(1) * BN
    with loader:
        for k in lm.range(0, lm.cdiv(lm.K, BK)):
            ring.acquire(k)
            a_s[ring.stage(k)].load(A, at=(m0, k * BK), barrier=ring.full(k), pad=True)
            b_s[ring.stage(k)].load(B, at=(n0, k * BK), barrier=ring.full(k), pad=True)
    with math:
        for k in lm.range(0, lm.cdiv(lm.K, BK)):
            ring.wait(k)
            lm.mma(acc, a_s[ring.stage(k + 1)], b_s[ring.stage(k)],  # expect: P029
                   transpose_b=True, init=(k == 0))
            ring.release(k)
        lm.store(C, at=(m0, n0), src=acc, mask=True)
