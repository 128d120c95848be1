"""The synchronisation skeleton of FlashAttention-3's forward kernel
(`hopper/mainloop_fwd_sm90_tma_gmma_ws.hpp`, `hopper/flash_fwd_kernel_sm90.h`),
transcribed onto GEMM: a loader warpgroup and two math warpgroups that share a 2-stage
ring (each computes half the rows from its own A tile) and take turns on the tensor
cores through two 256-thread named barriers, `WarpSchedulerWG1` and `WarpSchedulerWG2`.
At `mma_init` math0 arrives once on its own barrier (`bar.arrive 9, 256`), so its first
`bar.sync 9, 256` completes with its own 128 threads twice; after each MMA a warpgroup
arrives on the other's barrier. math1's last arrive on barrier 9 has no partner: 128 of
its 256 threads never come, the barrier never completes, and a barrier left pending at
exit is legal (PTX ISA, `bar.sync`: the barrier completes when the expected number of
threads arrive). The loader first waits on `o_done` with parity 1, the
`(work_idx + 1) % 2` of the kernel's first tile: on a fresh barrier the phase before
phase 0 counts as complete, so the wait passes (PTX ISA, `mbarrier.try_wait.parity`).
Phase trace for KT = 2: math0 arrives 9 (128 of 256), syncs 9 (complete), MMA k = 0,
arrives 10; math1 syncs 10 (complete), MMA k = 0, arrives 9; math0 syncs 9 ... math1
arrives 9 after k = 1: pending at exit."""
# expect: clean
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def gemm_fa3_scheduler(lm, A, B, C):
    BH, BN, BK, S = 64, 128, 64, 2
    lm.launch(grid=(lm.cdiv(lm.M, 2 * BH), lm.cdiv(lm.N, BN)), warps=12)
    a0_s = lm.smem("bf16", (BH, BK), stages=S, swizzle="128B")
    a1_s = lm.smem("bf16", (BH, BK), stages=S, swizzle="128B")
    b_s = lm.smem("bf16", (BN, BK), stages=S, swizzle="128B")
    full = lm.mbarrier(count=1, stages=S)
    empty = lm.mbarrier(count=8, stages=S)          # 4 warps of math0 + 4 warps of math1
    o_done = lm.mbarrier(count=2)                   # one elected arrive per math warpgroup
    sched0 = lm.named_barrier(id=9, threads=256)    # WarpSchedulerWG1
    sched1 = lm.named_barrier(id=10, threads=256)   # WarpSchedulerWG2
    loader = lm.role(warps=range(0, 4), regs=40)
    math0 = lm.role(warps=range(4, 8), regs=232)
    math1 = lm.role(warps=range(8, 12), regs=232)
    acc0 = lm.fragment("f32", (BH, BN), role=math0)
    acc1 = lm.fragment("f32", (BH, BN), role=math1)
    m0, n0 = lm.block(0) * 2 * BH, lm.block(1) * BN
    with loader:
        o_done[0].wait(parity=1)                    # work_idx 0: passes on the fresh barrier
        for k in lm.range(0, lm.cdiv(lm.K, BK)):
            empty[k % S].wait(parity=(k // S + 1) % 2)
            full[k % S].arrive_expect_tx(bytes=lm.nbytes(a0_s, a1_s, b_s))
            a0_s[k % S].load(A, at=(m0, k * BK), barrier=full[k % S], pad=True)
            a1_s[k % S].load(A, at=(m0 + BH, k * BK), barrier=full[k % S], pad=True)
            b_s[k % S].load(B, at=(n0, k * BK), barrier=full[k % S], pad=True)
    with math0:
        sched0.arrive()                             # mma_init: WG1 needs the first signal
        for k in lm.range(0, lm.cdiv(lm.K, BK)):
            full[k % S].wait(parity=(k // S) % 2)
            sched0.sync()
            lm.mma(acc0, a0_s[k % S], b_s[k % S], transpose_b=True, init=(k == 0))
            sched1.arrive()
            empty[k % S].arrive()
        lm.store(C, at=(m0, n0), src=acc0, mask=True)
        o_done[0].arrive(per="role")
    with math1:
        for k in lm.range(0, lm.cdiv(lm.K, BK)):
            full[k % S].wait(parity=(k // S) % 2)
            sched1.sync()
            lm.mma(acc1, a1_s[k % S], b_s[k % S], transpose_b=True, init=(k == 0))
            sched0.arrive()
            empty[k % S].arrive()
        lm.store(C, at=(m0 + BH, n0), src=acc1, mask=True)
        o_done[0].arrive(per="role")
