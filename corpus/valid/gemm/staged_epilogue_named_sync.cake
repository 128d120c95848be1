"""GEMM with a staged epilogue: the math warpgroup writes the accumulator tile into shared
memory (`c_s`) with generic stores by all 128 threads, synchronises the whole role at a
named barrier that only it uses, and only then lets one elected thread arrive on `cdone`
(`per="role"`). An epilogue warpgroup waits on `cdone`, reads the tile and stores it. A
`lm.syncwarp()` would not do here: it orders the lanes of one warp, not the four warps."""
# expect: clean
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def gemm_staged_epilogue(lm, A, B, C):
    BM, BN, BK = 64, 128, 64
    lm.launch(grid=(lm.cdiv(lm.M, BM), lm.cdiv(lm.N, BN)), warps=12)
    a_s = lm.smem("bf16", (BM, BK), stages=2, swizzle="128B")
    b_s = lm.smem("bf16", (BN, BK), stages=2, swizzle="128B")
    c_s = lm.smem("f32", (BM, BN))
    cdone = lm.mbarrier(count=1)
    written = lm.named_barrier(id=1, threads=128)    # the math warpgroup only
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 8), regs=232)
    epilogue = lm.role(warps=range(8, 12), regs=232)
    acc = lm.fragment("f32", (BM, BN), role=math)
    out = lm.fragment("f32", (BM, BN), role=epilogue)
    ring = lm.pipeline(stages=2, buffers=[a_s, b_s], producer=loader, consumer=math)
    m0, n0 = lm.block(0) * BM, lm.block(1) * BN
    with loader:
        for k in lm.range(0, lm.cdiv(lm.K, BK)):
            ring.acquire(k)
            a_s[ring.stage(k)].load(A, at=(m0, k * BK), barrier=ring.full(k), pad=True)
            b_s[ring.stage(k)].load(B, at=(n0, k * BK), barrier=ring.full(k), pad=True)
    with math:
        for k in lm.range(0, lm.cdiv(lm.K, BK)):
            ring.wait(k)
            lm.mma(acc, a_s[ring.stage(k)], b_s[ring.stage(k)], transpose_b=True, init=(k == 0))
            ring.release(k)
        lm.elementwise(c_s[0], acc, op="copy")
        written.sync()                                # all 128 threads have written c_s
        cdone[0].arrive(per="role")
    with epilogue:
        cdone[0].wait(parity=0)
        lm.elementwise(out, c_s[0], op="copy")
        lm.store(C, at=(m0, n0), src=out, mask=True)
