"""The producer warp of epilogue_subtiles_producer_warp.cake meets the math warps with
`lm.sync_cta()` (`__syncthreads()`) inside its `with lm.warps(0, 1)` block: warps 1-3 of
the loader never reach it, and the CUDA programming guide allows `__syncthreads()` in
conditional code only when the whole thread block takes the same branch."""
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def gemm_epilogue_subtiles_producer_warp(lm, A, B, C):
    BM, BN, BK, S, SN = 128, 128, 64, 4, 32
    lm.launch(grid=(lm.cdiv(lm.M, BM), lm.cdiv(lm.N, BN)), warps=8)
    a_s = lm.smem("bf16", (BM, BK), stages=S, swizzle="128B")
    b_s = lm.smem("bf16", (BN, BK), stages=S, swizzle="128B")
    c_s = lm.smem("f32", (BM, SN), stages=2)                 # staging ring of sub-tiles
    ready = lm.named_barrier(id=1, threads=160)              # 4 math warps + loader warp 0
    free = lm.named_barrier(id=2, threads=160)
    loader = lm.role(warps=range(0, 4), regs=56)
    math = lm.role(warps=range(4, 8), regs=232)
    acc = lm.fragment("f32", (BM, BN), role=math)
    ring = lm.pipeline(stages=S, buffers=[a_s, b_s], producer=loader, consumer=math)
    m0, n0 = lm.block(0) * BM, lm.block(1) * BN
    with loader:
        with lm.warps(0, 1):                                 # the producer warp
            for k in lm.range(0, lm.cdiv(lm.K, BK)):
                ring.acquire(k)
                a_s[ring.stage(k)].load(A, at=(m0, k * BK), barrier=ring.full(k), pad=True)
                b_s[ring.stage(k)].load(B, at=(n0, k * BK), barrier=ring.full(k), pad=True)
            for j in lm.range(0, BN // SN):
                ready.sync()                                 # sub-tile j is in c_s[j % 2]
                lm.sync_cta()  # expect: H007
                c_s[j % 2].store_async(C, at=(m0, n0 + j * SN), mask=True)
                lm.store_wait(pending=1)                     # store j - 1 has read its buffer
                free.arrive()                                # c_s[(j + 1) % 2] may be refilled
            lm.store_wait(pending=0)
    with math:
        for k in lm.range(0, lm.cdiv(lm.K, BK)):
            ring.wait(k)
            lm.mma(acc, a_s[ring.stage(k)], b_s[ring.stage(k)], transpose_b=True, init=(k == 0))
            ring.release(k)
        for j in lm.range(0, BN // SN):
            lm.elementwise(c_s[j % 2], acc[:, j * SN:(j + 1) * SN], op="copy")
            lm.fence_proxy()                                 # generic writes -> bulk store
            ready.arrive()
            free.sync()                                      # c_s[(j + 1) % 2] is free again
