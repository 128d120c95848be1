"""CUTLASS's cooperative warp-specialized GEMM, persistent, on a cluster of 2 CTAs with TMA
multicast (`include/cutlass/gemm/kernel/sm90_gemm_tma_warpspecialized_cooperative.hpp`,
its tile scheduler `include/cutlass/gemm/kernel/static_tile_scheduler.hpp` /
`sm90_tile_scheduler.hpp` and `PipelineTmaAsync` of
`include/cutlass/pipeline/sm90_pipeline.hpp`).

The grid is `min(SM count, cluster tiles)` clusters of 2 CTAs along M (`get_grid_shape`;
SMS = 132, an H100 SXM). The scheduler walks the output tiles with the stride of the
grid: cluster c takes cluster tiles c, c + G/2, c + G, ... (`advance_to_next_work` adds
the grid size to the linear index), both CTAs of a cluster the same ones, rank r the
r-th 128-row half of each (`get_work_idx_m_and_n`). One loader warpgroup and two
consumer warpgroups (one 8-warp math role: the cooperative kernel splits each 128 x 128
tile between them) share a 4-stage ring. Its position is the counter `it`, CUTLASS's
`PipelineState`: both roles advance it once per K block and keep it from tile to tile
(`mainloop_pipe_producer_state.advance(work_k_tile_count)`), so a tile starts on the
stage and phase where the last one stopped. Rank 0 multicasts the shared B tile into both
CTAs; each consumer warp releases its stage on its own CTA's `empty[s]` and on the
peer's (`cta=peer`), so `empty` counts (cluster_x + cluster_y - 1) x 8 warps. After its
last tile the loader runs `load_tail`: it acquires S more positions, i.e. waits until
every stage of its CTA has been released by the consumers of both CTAs, so no CTA exits
while a peer's release may still land in it.

Phase trace (S = 4, K = 256: KT = 4 K blocks per tile; a CTA with 2 tiles): tile 0 uses
positions it = 0..3 (stages 0..3, full parity 0, empty parity 1: the fresh barriers let
the loader through), tile 1 positions 4..7 (stages 0..3 again, full parity 1, empty
parity 0: the releases of tile 0); the tail acquires positions 8..11 (empty parity 1:
the releases of tile 1). A CTA past the last cluster tile has no tile (the grid is never
larger than the tiles here, but a ragged M leaves rank 1 of the last cluster a tile
wholly outside A: zero-filled loads, masked store)."""
# expect: clean
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def gemm_coop_persistent_cluster2_s4(lm, A, B, C):
    BM, BN, BK, S, CX, SMS = 128, 128, 64, 4, 2, 132
    KT = lm.cdiv(lm.K, BK)
    CTM = lm.cdiv(lm.M, CX * BM)                   # cluster tiles along M
    TILES = CTM * lm.cdiv(lm.N, BN)                # cluster tiles, M fastest
    lm.launch(grid=(CX * lm.min(SMS // CX, TILES),), warps=12, cluster=(CX, 1, 1))
    a_s = lm.smem("bf16", (BM, BK), stages=S, swizzle="128B")
    b_s = lm.smem("bf16", (BN, BK), stages=S, swizzle="128B")
    full = lm.mbarrier(count=1, stages=S)
    empty = lm.mbarrier(count=CX * 8, stages=S)    # 8 consumer warps of each CTA
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 12), regs=232)
    acc = lm.fragment("f32", (BM, BN), role=math)
    rank = lm.cluster_rank(0)
    peer = 1 - rank
    it = lm.counter()                              # PipelineState: the ring position
    with loader:
        for t in lm.range(lm.block(0) // CX, TILES, lm.grid(0) // CX):
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
    with math:
        for t in lm.range(lm.block(0) // CX, TILES, lm.grid(0) // CX):
            m0, n0 = ((t % CTM) * CX + rank) * BM, (t // CTM) * BN
            for k in lm.range(0, KT, counter=it):
                full[it % S].wait(parity=(it // S) % 2)
                lm.mma(acc, a_s[it % S], b_s[it % S], transpose_b=True, init=(k == 0))
                empty[it % S].arrive()             # this CTA's producer
                empty[it % S].arrive(cta=peer)     # the peer's producer (multicast)
            lm.store(C, at=(m0, n0), src=acc, mask=True)
