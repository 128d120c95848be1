"""DeepGEMM's block-scaled fp8 GEMM, persistent (deepseek-ai/DeepGEMM,
`deep_gemm/include/deep_gemm/impls/sm90_fp8_gemm_1d2d.cuh` and its scheduler
`deep_gemm/include/deep_gemm/scheduler/gemm.cuh`): the data flow and scale format of
deepgemm_fp8_s2.cake, with the kernel's persistent loop over output blocks.

DeepGEMM launches one CTA per SM whatever the problem (`set_num_sms` chooses how many;
SMS = 5 here, so that the check shapes give CTAs with several blocks, CTAs with one
fewer and, at M = N = 256, a CTA with none), and each CTA takes the blocks blockIdx.x,
blockIdx.x + SMS, ... (`get_next_block`: `(++current_iter) * kNumSMs + blockIdx.x`,
valid while below the number of blocks). The 2-stage ring's stage and phase
(`stage_idx`, `phase`, advanced by `advance_pipeline` across blocks) are the counter
`kb`; the loader ends with DeepGEMM's tail, acquiring every stage once more. The B scales
of a block (one row of SB) change with the block: the loader brings them through the
raw pair `sfull` / `sempty`, whose phase is the block's ordinal `nt` in this CTA (the
counter the block loop advances, DeepGEMM's `current_iter` over the valid blocks);
DeepGEMM's math warps read them from global memory themselves, which the bulk loads of
this language express through the loader. The math warpgroups release the scales after
the block's last promotion (`lm.syncwarp()` first: every lane read them).

Phase trace (KB = 4 K blocks, CTA 0 with 2 blocks): block 0 takes ring positions kb =
0..3 (stages 0, 1, 0, 1; full parities 0, 0, 1, 1), waits `sfull` parity 0; block 1
takes kb = 4..7 (full parities 0, 0, 1, 1 again: phases 2 and 3) and waits `sfull`
parity 1, which the loader fills only after `sempty` phase 0 (block 0's release); the
tail acquires kb = 8, 9 (empty parities 1: the releases of positions 6, 7). A CTA
without a block only runs the tail, on fresh barriers."""
# expect: clean
@cake.schedule(target="sm_90a", workload="gemm_fp8", sizes={"K": 512, "KB": 4},
               divisible={"N": 128})
def gemm_fp8_deepgemm_persistent_s2(lm, A, B, SA, SB, C):
    BM, BN, BK, SMS = 128, 128, 128, 5
    TM = lm.cdiv(lm.M, BM)
    BLOCKS = TM * lm.cdiv(lm.N, BN)
    lm.launch(grid=(SMS,), warps=12)
    a_s = lm.smem("f8e4m3", (BM, BK), stages=2)
    b_s = lm.smem("f8e4m3", (BN, BK), stages=2)
    sa_s = lm.smem("f32", (1, BM), stages=2)              # row scales of this K block
    sb_s = lm.smem("f32", (1, 4))                        # SB[n block, 0 .. KB - 1]
    sfull = lm.mbarrier(count=1)
    sempty = lm.mbarrier(count=8)                        # one arrive per math warp
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 12), regs=232)
    part = lm.fragment("f32", (BM, BN), role=math)
    acc = lm.fragment("f32", (BM, BN), role=math)
    ring = lm.pipeline(stages=2, buffers=[a_s, b_s, sa_s], producer=loader, consumer=math)
    kb = lm.counter()                                    # stage_idx / phase
    nt = lm.counter()                                    # blocks this CTA took
    with loader:
        for blk in lm.range(lm.block(0), BLOCKS, lm.grid(0), counter=nt):
            m0, n0 = (blk % TM) * BM, (blk // TM) * BN
            sempty[0].wait(parity=(nt + 1) % 2)
            sfull[0].arrive_expect_tx(bytes=lm.nbytes(sb_s))
            sb_s[0].load(SB, at=(blk // TM, 0), barrier=sfull[0])
            for k in lm.range(0, lm.KB, counter=kb):
                ring.acquire(kb)
                a_s[ring.stage(kb)].load(A, at=(m0, k * BK), barrier=ring.full(kb), pad=True)
                b_s[ring.stage(kb)].load(B, at=(n0, k * BK), barrier=ring.full(kb), pad=True)
                sa_s[ring.stage(kb)].load(SA, at=(k, m0), barrier=ring.full(kb), pad=True)
        for tail in lm.range(0, 2, counter=kb):          # every stage released
            ring.acquire(kb)
    with math:
        for blk in lm.range(lm.block(0), BLOCKS, lm.grid(0), counter=nt):
            m0, n0 = (blk % TM) * BM, (blk // TM) * BN
            lm.fill(acc, 0.0)
            sfull[0].wait(parity=nt % 2)
            for k in lm.range(0, lm.KB, counter=kb):
                ring.wait(kb)
                lm.mma(part, a_s[ring.stage(kb)], b_s[ring.stage(kb)], transpose_b=True,
                       init=True)
                lm.scale_accumulate(acc, part, sa_s[ring.stage(kb)], sb_s[0], at=k)
                ring.release(kb)
            lm.syncwarp()                                # every lane read the scales
            sempty[0].arrive()
            lm.store(C, at=(m0, n0), src=acc, mask=True)
