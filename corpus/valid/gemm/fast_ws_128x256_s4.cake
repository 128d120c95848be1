"""The Hopper fast path for bf16 GEMM: warp-specialized, 128 x 256 output tile per CTA. One
producer warpgroup (40 registers) streams 128 x 64 tiles of A and 256 x 64 tiles of B through
a 4-stage ring with tensor-map copies (128B swizzle: one `cp.async.bulk.tensor.2d` per
operand per stage, out-of-bounds rows and columns of tail tiles filled with zeros by the
copy); two consumer warpgroups (232 registers) each own 64 rows of the tile and issue, per
stage, four `wgmma.mma_async.m64n256k16` (one per 16 of K) reading both operands through
shared-memory matrix descriptors. The consumer keeps one wgmma group in flight: iteration k
issues its group, waits until at most one group is pending (`lm.mma_wait(pending=1)`: the
group of k - 1 has finished reading its stage) and releases stage k - 1; the first
iteration is peeled and the last stage is released after `lm.mma_wait(pending=0)`. The
accumulator goes straight from registers to C with a tail mask."""
# expect: clean
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def gemm_fast_ws_128x256_s4(lm, A, B, C):
    BM, BN, BK = 128, 256, 64
    lm.launch(grid=(lm.cdiv(lm.M, BM), lm.cdiv(lm.N, BN)), warps=12)
    a_s = lm.smem("bf16", (BM, BK), stages=4, swizzle="128B")
    b_s = lm.smem("bf16", (BN, BK), stages=4, swizzle="128B")
    producer = lm.role(warps=range(0, 4), regs=40)
    consumer = lm.role(warps=range(4, 12), regs=232)
    acc = lm.fragment("f32", (BM, BN), role=consumer)
    ring = lm.pipeline(stages=4, buffers=[a_s, b_s], producer=producer, consumer=consumer)
    m0, n0 = lm.block(0) * BM, lm.block(1) * BN
    KT = lm.cdiv(lm.K, BK)
    with producer:
        for k in lm.range(0, KT):
            ring.acquire(k)
            a_s[ring.stage(k)].load(A, at=(m0, k * BK), barrier=ring.full(k), pad=True)
            b_s[ring.stage(k)].load(B, at=(n0, k * BK), barrier=ring.full(k), pad=True)
    with consumer:
        ring.wait(0)
        lm.mma_async(acc, a_s[ring.stage(0)], b_s[ring.stage(0)], transpose_b=True, init=True)
        for k in lm.range(1, KT):
            ring.wait(k)
            lm.mma_async(acc, a_s[ring.stage(k)], b_s[ring.stage(k)], transpose_b=True)
            lm.mma_wait(pending=1)                            # group k - 1 has finished
            ring.release(k - 1)
        lm.mma_wait(pending=0)
        ring.release(KT - 1)
        lm.store(C, at=(m0, n0), src=acc, mask=True)
