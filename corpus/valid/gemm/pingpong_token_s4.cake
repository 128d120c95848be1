"""CUTLASS's ping-pong warp-specialized GEMM (`sm90_gemm_tma_warpspecialized_pingpong.hpp`,
ordering by `OrderedSequenceBarrier` in `include/cutlass/pipeline/sm90_pipeline.hpp`):
one loader warpgroup fills a shared 4-stage ring with the K tiles of four output tiles
in order, and two math warpgroups take the output tiles alternately: math0 the ring
positions `[0, KT)` and `[2 KT, 3 KT)`, math1 `[KT, 2 KT)` and `[3 KT, 4 KT)`. Each math
warpgroup therefore skips every other block of ring phases; what stops it from passing
a same-parity phase two laps early is the token barrier pair: math0 waits `tok0` with
parity `(t + 1) % 2`, which passes on the fresh barrier (group 0 of the sequence barrier
starts at phase 1), runs its main loop and hands the token to math1 on `tok1`; math1
hands it back on `tok0`. When math1 starts position `KT`, math0 has observed every
position below it, so the stage's completed phase is at most one behind the one math1
waits for. Phase trace for S = 4, KT = 2: math0 t = 0 waits `tok0` parity 1 (fresh,
passes), consumes positions 0, 1 (`full[0]`, `full[1]` phase 0), arrives `tok1`; math1
waits `tok1` parity 0, consumes positions 2, 3 (`full[2]`, `full[3]` phase 0), arrives
`tok0`; math0 t = 1 waits `tok0` parity 0 and consumes positions 4, 5 (`full[0]`,
`full[1]` phase 1). The last arrive on `tok0` is never waited for and is legal."""
# expect: clean
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def gemm_pingpong_s4(lm, A, B, C):
    BM, BN, BK, S, T = 64, 128, 64, 4, 2
    KT = lm.cdiv(lm.K, BK)
    lm.launch(grid=(lm.cdiv(lm.M, 2 * T * BM), lm.cdiv(lm.N, BN)), warps=12)
    a_s = lm.smem("bf16", (BM, BK), stages=S, swizzle="128B")
    b_s = lm.smem("bf16", (BN, BK), stages=S, swizzle="128B")
    full = lm.mbarrier(count=1, stages=S)
    empty = lm.mbarrier(count=4, stages=S)          # the four warps of whichever math group
    tok0 = lm.mbarrier(count=4)                     # math1 hands the token to math0
    tok1 = lm.mbarrier(count=4)                     # math0 hands the token to math1
    loader = lm.role(warps=range(0, 4), regs=40)
    math0 = lm.role(warps=range(4, 8), regs=232)
    math1 = lm.role(warps=range(8, 12), regs=232)
    acc0 = lm.fragment("f32", (BM, BN), role=math0)
    acc1 = lm.fragment("f32", (BM, BN), role=math1)
    m0, n0 = lm.block(0) * 2 * T * BM, lm.block(1) * BN
    with loader:
        for p in lm.range(0, 2 * T * KT):             # ring position p: tile p // KT, k p % KT
            empty[p % S].wait(parity=(p // S + 1) % 2)
            full[p % S].arrive_expect_tx(bytes=lm.nbytes(a_s, b_s))
            a_s[p % S].load(A, at=(m0 + (p // KT) * BM, (p % KT) * BK), barrier=full[p % S], pad=True)
            b_s[p % S].load(B, at=(n0, (p % KT) * BK), barrier=full[p % S], pad=True)
    with math0:
        for t in lm.range(0, T):
            tok0[0].wait(parity=(t + 1) % 2)
            for k in lm.range(0, KT):
                full[(2 * t * KT + k) % S].wait(parity=((2 * t * KT + k) // S) % 2)
                lm.mma(acc0, a_s[(2 * t * KT + k) % S], b_s[(2 * t * KT + k) % S], transpose_b=True, init=(k == 0))
                empty[(2 * t * KT + k) % S].arrive()
            tok1[0].arrive()
            lm.store(C, at=(m0 + 2 * t * BM, n0), src=acc0, mask=True)
    with math1:
        for t in lm.range(0, T):
            tok1[0].wait(parity=t % 2)
            for k in lm.range(0, KT):
                full[((2 * t + 1) * KT + k) % S].wait(parity=(((2 * t + 1) * KT + k) // S) % 2)
                lm.mma(acc1, a_s[((2 * t + 1) * KT + k) % S], b_s[((2 * t + 1) * KT + k) % S], transpose_b=True, init=(k == 0))
                empty[((2 * t + 1) * KT + k) % S].arrive()
            tok0[0].arrive()
            lm.store(C, at=(m0 + (2 * t + 1) * BM, n0), src=acc1, mask=True)
