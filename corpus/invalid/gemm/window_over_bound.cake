"""A triangular schedule whose protocol is not periodic: for each row block `i` of a
K-long scan the roles exchange `i + 1` tiles through a 2-stage ring, so the ring
iteration `i * (i + 1) // 2 + j` grows quadratically and no stretch of iterations
repeats. At K = 4096 (256 row blocks) the unrolled protocol has about 230,000 events,
over the analysis' bound of 60,000 per program, and no sound window can shorten it: the
verdict is incomplete, never clean. The protocol itself is correct at every size the
analysis can unroll."""
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 16})
def gemm_triangle(lm, A, B, C):  # expect: P098
    BM, BN, BK = 64, 128, 16
    lm.launch(grid=(lm.cdiv(lm.M, BM), lm.cdiv(lm.N, BN)), warps=8)
    a_s = lm.smem("bf16", (BM, BK), stages=2)
    b_s = lm.smem("bf16", (BN, BK), stages=2)
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 8), regs=232)
    acc = lm.fragment("f32", (BM, BN), role=math)
    ring = lm.pipeline(stages=2, buffers=[a_s, b_s], producer=loader, consumer=math)
    m0, n0 = lm.block(0) * BM, lm.block(1) * BN
    with loader:
        for i in lm.range(0, lm.K // BK):
            for j in lm.range(0, i + 1):
                ring.acquire(i * (i + 1) // 2 + j)
                a_s[ring.stage(i * (i + 1) // 2 + j)].load(
                    A, at=(m0, j * BK), barrier=ring.full(i * (i + 1) // 2 + j), pad=True)
                b_s[ring.stage(i * (i + 1) // 2 + j)].load(
                    B, at=(n0, j * BK), barrier=ring.full(i * (i + 1) // 2 + j), pad=True)
    with math:
        for i in lm.range(0, lm.K // BK):
            for j in lm.range(0, i + 1):
                ring.wait(i * (i + 1) // 2 + j)
                lm.mma(acc, a_s[ring.stage(i * (i + 1) // 2 + j)],
                       b_s[ring.stage(i * (i + 1) // 2 + j)], transpose_b=True,
                       init=(i + j == 0))
                ring.release(i * (i + 1) // 2 + j)
        lm.store(C, at=(m0, n0), src=acc, mask=True)
