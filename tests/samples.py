"""Schedules the front-end tests edit. Kept here rather than read from corpus/ so that a
corpus change never silently changes what these tests exercise."""

SCALE = '''"""Scale tile."""
# expect: clean
@cake.schedule(target="sm_90a", workload="scale")
def scale_tile(lm, X, Y):
    TM, TN = 32, 256
    lm.launch(grid=(lm.cdiv(lm.M, TM), lm.cdiv(lm.N, TN)), warps=4)
    x_s = lm.smem("f32", (TM, TN))
    full = lm.mbarrier(count=1)
    worker = lm.role(warps=range(0, 4))
    y = lm.fragment("f32", (TM, TN), role=worker)
    m0, n0 = lm.block(0) * TM, lm.block(1) * TN
    with worker:
        full[0].arrive_expect_tx(bytes=lm.nbytes(x_s))
        x_s[0].load(X, at=(m0, n0), barrier=full[0], pad=True)
        full[0].wait(parity=0)
        lm.elementwise(y, x_s[0], op="scale", alpha=2.5)
        lm.store(Y, at=(m0, n0), src=y, mask=True)
'''

GEMM = '''"""Warp-specialized GEMM."""
# expect: clean
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def gemm_ws_s4(lm, A, B, C):
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
            lm.mma(acc, a_s[ring.stage(k)], b_s[ring.stage(k)], transpose_b=True, init=(k == 0))
            ring.release(k)
        lm.store(C, at=(m0, n0), src=acc, mask=True)
'''

RAW = '''"""GEMM with raw mbarriers and explicit parity: 2-stage ring, one loader warp issuing the
bulk copies, one math warpgroup releasing each stage with one arrive per warp."""
# expect: clean
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def gemm_raw_s2(lm, A, B, C):
    BM, BN, BK, S = 64, 128, 64, 2
    lm.launch(grid=(lm.cdiv(lm.M, BM), lm.cdiv(lm.N, BN)), warps=8)
    a_s = lm.smem("bf16", (BM, BK), stages=S, swizzle="128B")
    b_s = lm.smem("bf16", (BN, BK), stages=S, swizzle="128B")
    full = lm.mbarrier(count=1, stages=S)
    empty = lm.mbarrier(count=4, stages=S)          # one arrive per math warp
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 8), regs=232)
    acc = lm.fragment("f32", (BM, BN), role=math)
    m0, n0 = lm.block(0) * BM, lm.block(1) * BN
    with loader:
        for k in lm.range(0, lm.cdiv(lm.K, BK)):
            empty[k % S].wait(parity=(k // S + 1) % 2)   # producer starts on parity 1
            full[k % S].arrive_expect_tx(bytes=lm.nbytes(a_s, b_s))
            a_s[k % S].load(A, at=(m0, k * BK), barrier=full[k % S], pad=True)
            b_s[k % S].load(B, at=(n0, k * BK), barrier=full[k % S], pad=True)
    with math:
        for k in lm.range(0, lm.cdiv(lm.K, BK)):
            full[k % S].wait(parity=(k // S) % 2)
            lm.mma(acc, a_s[k % S], b_s[k % S], transpose_b=True, init=(k == 0))
            empty[k % S].arrive()
        lm.store(C, at=(m0, n0), src=acc, mask=True)
'''
