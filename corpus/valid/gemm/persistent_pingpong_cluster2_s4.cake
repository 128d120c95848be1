"""CUTLASS's ping-pong warp-specialized GEMM, persistent, on a cluster of 2 CTAs with TMA
multicast (`include/cutlass/gemm/kernel/sm90_gemm_tma_warpspecialized_pingpong.hpp`, the
static persistent scheduler of `include/cutlass/gemm/kernel/static_tile_scheduler.hpp`,
`PipelineTmaAsync` and `OrderedSequenceBarrier` of
`include/cutlass/pipeline/sm90_pipeline.hpp`).

The grid is `min(SM count, cluster tiles)` clusters of 2 CTAs along M (SMS = 132); cluster
c walks the cluster tiles c, c + G/2, ... and rank r takes the r-th 64-row half of each.
One loader warpgroup fills a 4-stage ring with the K blocks of every tile of its CTA in
order, its position the counter `it` (`mainloop_pipe_producer_state`). The two math
warpgroups take the CTA's tiles in turn: math0 the 1st, 3rd, ... (`advance_to_next_work
(NumMmaWarpGroups)`), math1 the 2nd, 4th, ... (it starts one tile later). Each keeps its
own copy of `it`; like CUTLASS's `mainloop_pipe_consumer_state` it advances it over its
own tile's K blocks and then once more over the other warpgroup's
(`advance(k_tile_count * NumMmaWarpGroups)`, here a loop with an empty body), and math1
first skips math0's first tile (`advance(k_tile_count)` at startup), so both read the
ring positions the loader wrote for their tiles. The order barrier
(`math_wg_order_barrier`, the tokens `tok0` / `tok1`) lets the warpgroups run their
mainloops in tile order: math0 waits on `tok0` with parity `(w + 1) % 2` (its `w`-th
tile; the fresh barrier lets the first one through), math1 on `tok1` with parity
`w % 2`, and each hands the token on after its mainloop (CUTLASS also orders the
epilogues with a second stage of the barrier; this transcription orders the mainloops
only). Rank 0 multicasts B into both CTAs; the consumers release to both CTAs' `empty`
(count (cluster_x + cluster_y - 1) x 4 warps of the one warpgroup that consumes a
position); the loader's `load_tail` acquires S more positions, so no CTA exits while a
peer's release may still land in it.

Phase trace (S = 4, K = 256: KT = 4; a CTA with 3 tiles): math0 takes tile 0 at positions
0..3 (full parity 0, phase 0) and skips 4..7, then tile 2 at 8..11 (parity 0 again:
phase 2); math1 skips 0..3, takes tile 1 at 4..7 (full parity 1, phase 1) and
skips 8..11. Token: math0 passes `tok0` parity 1 (fresh), arrives `tok1` (phase 0); math1
waits `tok1` parity 0, arrives `tok0` (phase 0); math0's second tile waits `tok0` parity
0. A CTA whose cluster has one tile leaves math1 without a tile: it only skips."""
# expect: clean
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def gemm_pingpong_persistent_cluster2_s4(lm, A, B, C):
    BM, BN, BK, S, CX, SMS = 64, 128, 64, 4, 2, 132
    KT = lm.cdiv(lm.K, BK)
    CTM = lm.cdiv(lm.M, CX * BM)                   # cluster tiles along M
    TILES = CTM * lm.cdiv(lm.N, BN)                # cluster tiles, M fastest
    lm.launch(grid=(CX * lm.min(SMS // CX, TILES),), warps=12, cluster=(CX, 1, 1))
    a_s = lm.smem("bf16", (BM, BK), stages=S, swizzle="128B")
    b_s = lm.smem("bf16", (BN, BK), stages=S, swizzle="128B")
    full = lm.mbarrier(count=1, stages=S)
    empty = lm.mbarrier(count=CX * 4, stages=S)    # one math warpgroup of each CTA
    tok0 = lm.mbarrier(count=4)                    # math1 hands the token to math0
    tok1 = lm.mbarrier(count=4)                    # math0 hands the token to math1
    loader = lm.role(warps=range(0, 4), regs=40)
    math0 = lm.role(warps=range(4, 8), regs=232)
    math1 = lm.role(warps=range(8, 12), regs=232)
    acc0 = lm.fragment("f32", (BM, BN), role=math0)
    acc1 = lm.fragment("f32", (BM, BN), role=math1)
    rank = lm.cluster_rank(0)
    peer = 1 - rank
    c0, G = lm.block(0) // CX, lm.grid(0) // CX    # this cluster, clusters in the grid
    it = lm.counter()                              # PipelineState: the ring position
    w = lm.counter()                               # tiles this math warpgroup took
    with loader:
        for t in lm.range(c0, TILES, G):
            m0, n0 = ((t % CTM) * CX + rank) * BM, (t // CTM) * BN
            for k in lm.range(0, KT, counter=it):
                empty[it % S].wait(parity=(it // S + 1) % 2)
                full[it % S].arrive_expect_tx(bytes=lm.nbytes(a_s, b_s))
                a_s[it % S].load(A, at=(m0, k * BK), barrier=full[it % S], pad=True)
                for lead in lm.range(rank, 1):     # rank 0 multicasts the shared B
                    b_s[it % S].load(B, at=(n0, k * BK), barrier=full[it % S], pad=True,
                                     multicast=0b11)
        for tail in lm.range(0, S, counter=it):    # load_tail: every stage released
            empty[it % S].wait(parity=(it // S + 1) % 2)
    with math0:
        for t in lm.range(c0, TILES, 2 * G, counter=w):
            m0, n0 = ((t % CTM) * CX + rank) * BM, (t // CTM) * BN
            tok0[0].wait(parity=(w + 1) % 2)
            for k in lm.range(0, KT, counter=it):
                full[it % S].wait(parity=(it // S) % 2)
                lm.mma(acc0, a_s[it % S], b_s[it % S], transpose_b=True, init=(k == 0))
                empty[it % S].arrive()
                empty[it % S].arrive(cta=peer)
            tok1[0].arrive()
            for skip in lm.range(0, KT, counter=it):   # math1's tile
                pass
            lm.store(C, at=(m0, n0), src=acc0, mask=True)
    with math1:
        for skip in lm.range(0, KT, counter=it):       # math0's first tile
            pass
        for t in lm.range(c0 + G, TILES, 2 * G, counter=w):
            m0, n0 = ((t % CTM) * CX + rank) * BM, (t // CTM) * BN
            tok1[0].wait(parity=w % 2)
            for k in lm.range(0, KT, counter=it):
                full[it % S].wait(parity=(it // S) % 2)
                lm.mma(acc1, a_s[it % S], b_s[it % S], transpose_b=True, init=(k == 0))
                empty[it % S].arrive()
                empty[it % S].arrive(cta=peer)
            tok0[0].arrive()
            for skip in lm.range(0, KT, counter=it):   # math0's next tile
                pass
            lm.store(C, at=(m0, n0), src=acc1, mask=True)
