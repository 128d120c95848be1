"""Block-scaled fp8 GEMM in the style of DeepGEMM (deepseek-ai/DeepGEMM,
`deep_gemm/include/deep_gemm/impls/sm90_fp8_gemm_1d2d.cuh`): E4M3 operands, one f32 scale
per row of A and 128-wide K block, one per 128 x 128 block of B, f32 output. A loader
warpgroup streams, per K block, the A and B tiles and the block's row scales of A through
a 2-stage ring (the pipeline arms the bytes of all three); B's scales for this CTA's
column block (one row of SB) arrive once through a raw barrier. Per K block the math
warpgroups multiply into a fresh accumulator on the tensor cores (mma.sync m16n8k32) and
promote it into the running f32 accumulator with both scales (`lm.scale_accumulate`, the
step DeepGEMM does on the CUDA cores after each block because Hopper's fp8 accumulation
keeps few bits); only then is the stage, row scales included, released. DeepGEMM itself
uses TMA multicast, wgmma and a persistent scheduler; this schedule keeps its data flow and
scale format. N is declared a multiple of 128 because the extent NB of the B scales is a
size of the workload of its own (a ragged N would outrun it); M tails are covered."""
# expect: clean
@cake.schedule(target="sm_90a", workload="gemm_fp8", sizes={"K": 512, "KB": 4},
               divisible={"N": 128})
def gemm_fp8_deepgemm_s2(lm, A, B, SA, SB, C):
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
            lm.scale_accumulate(acc, part, sa_s[ring.stage(k)], sb_s[0], at=k)
            ring.release(k)
        lm.store(C, at=(m0, n0), src=acc, mask=True)
