"""Twin of valid/gemm/cutlass_pingpong_wgmma_s4.cake (CUTLASS ping-pong,
`include/cutlass/gemm/kernel/sm90_gemm_tma_warpspecialized_pingpong.hpp`) in which math0's
mainloop uses the synchronous `lm.mma` (`mma.sync`) and releases each stage right after
reading it, still with one signalling thread (`arrive(per="role")`, `empty` counting 1).
`mma.sync` completes each warp's reads for that warp only: the elected arrive of warp 0
carries none of warps 1-3's reads, so the producer can refill a stage math0's other warps
are still reading. math1 is unchanged (wgmma groups retired before its elected
releases). One defect: the missing barrier over math0 before its elected arrive."""
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def gemm_cutlass_pingpong_wgmma_s4(lm, A, B, C):
    BM, BN, BK, S, T = 64, 128, 64, 4, 2
    KT = lm.cdiv(lm.K, BK)
    lm.launch(grid=(lm.cdiv(lm.M, 2 * T * BM), lm.cdiv(lm.N, BN)), warps=12)
    a_s = lm.smem("bf16", (BM, BK), stages=S, swizzle="128B")
    b_s = lm.smem("bf16", (BN, BK), stages=S, swizzle="128B")
    full = lm.mbarrier(count=1, stages=S)
    empty = lm.mbarrier(count=1, stages=S)          # the signalling thread of whichever warpgroup
    tok0 = lm.mbarrier(count=128)                   # math1 hands the order token to math0
    tok1 = lm.mbarrier(count=128)                   # math0 hands the order token to math1
    producer = lm.role(warps=range(0, 4), regs=40)
    math0 = lm.role(warps=range(4, 8), regs=232)
    math1 = lm.role(warps=range(8, 12), regs=232)
    acc0 = lm.fragment("f32", (BM, BN), role=math0)
    acc1 = lm.fragment("f32", (BM, BN), role=math1)
    m0, n0 = lm.block(0) * 2 * T * BM, lm.block(1) * BN
    with producer:
        with lm.warps(0, 1):
            for p in lm.range(0, 2 * T * KT):
                empty[p % S].wait(parity=(p // S + 1) % 2)
                full[p % S].arrive_expect_tx(bytes=lm.nbytes(a_s, b_s))
                a_s[p % S].load(A, at=(m0 + (p // KT) * BM, (p % KT) * BK), barrier=full[p % S], pad=True)
                b_s[p % S].load(B, at=(n0, (p % KT) * BK), barrier=full[p % S], pad=True)
            for p in lm.range(2 * T * KT, 2 * T * KT + S):   # load_tail
                empty[p % S].wait(parity=(p // S + 1) % 2)
    with math0:
        for t in lm.range(0, T):
            P = 2 * t * KT                                   # first ring position of this tile
            tok0[0].wait(parity=(t + 1) % 2)                 # math_wg_order_barrier.wait()
            for k in lm.range(0, KT):
                full[(P + k) % S].wait(parity=((P + k) // S) % 2)
                lm.mma(acc0, a_s[(P + k) % S], b_s[(P + k) % S], transpose_b=True, init=(k == 0))
                empty[(P + k) % S].arrive(per="role")  # expect: P011
            tok1[0].arrive(per="thread")                     # math_wg_order_barrier.arrive()
            lm.store(C, at=(m0 + 2 * t * BM, n0), src=acc0, mask=True)
    with math1:
        for t in lm.range(0, T):
            P = (2 * t + 1) * KT
            tok1[0].wait(parity=t % 2)
            full[P % S].wait(parity=(P // S) % 2)
            lm.mma_async(acc1, a_s[P % S], b_s[P % S], transpose_b=True, init=True)
            for k in lm.range(1, KT):
                full[(P + k) % S].wait(parity=((P + k) // S) % 2)
                lm.mma_async(acc1, a_s[(P + k) % S], b_s[(P + k) % S], transpose_b=True)
                lm.mma_wait(pending=1)
                empty[(P + k - 1) % S].arrive(per="role")
            tok0[0].arrive(per="thread")
            lm.mma_wait(pending=0)
            empty[(P + KT - 1) % S].arrive(per="role")
            lm.store(C, at=(m0 + (2 * t + 1) * BM, n0), src=acc1, mask=True)
