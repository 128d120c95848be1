"""A persistent GEMM whose two roles walk different numbers of tiles: the loader counts
the tiles along M with `lm.cdiv(lm.M, BM)`, the math role with `lm.M // BM`, so when M is
not a multiple of 128 the loader's tile loop has tiles the math role never visits. The
grid-stride loops then differ for some CTAs only (those that get a tile of the last
rows), which the analysis finds by running one CTA of every class of trip counts: the
loader fills the ring for a tile nobody reads and the CTA exits with those copies still
in flight (or, with more than a ring of extra positions, the loader waits forever for
releases)."""
@cake.schedule(target="sm_90a", workload="gemm", sizes={"K": 256})
def gemm_persistent_tile_count_floor(lm, A, B, C):
    BM, BN, BK, S, SMS = 128, 128, 64, 4, 4
    TN = lm.cdiv(lm.N, BN)
    lm.launch(grid=(lm.min(SMS, lm.cdiv(lm.M, BM) * TN),), warps=12)
    a_s = lm.smem("bf16", (BM, BK), stages=S, swizzle="128B")
    b_s = lm.smem("bf16", (BN, BK), stages=S, swizzle="128B")
    full = lm.mbarrier(count=1, stages=S)
    empty = lm.mbarrier(count=8, stages=S)
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 12), regs=232)
    acc = lm.fragment("f32", (BM, BN), role=math)
    it = lm.counter()
    with loader:
        for t in lm.range(lm.block(0), lm.cdiv(lm.M, BM) * TN, lm.grid(0)):
            m0, n0 = (t // TN) * BM, (t % TN) * BN
            for k in lm.range(0, 4, counter=it):
                empty[it % S].wait(parity=(it // S + 1) % 2)
                full[it % S].arrive_expect_tx(bytes=lm.nbytes(a_s, b_s))
                a_s[it % S].load(A, at=(m0, k * BK), barrier=full[it % S], pad=True)
                b_s[it % S].load(B, at=(n0, k * BK), barrier=full[it % S], pad=True)
    with math:
        for t in lm.range(lm.block(0), (lm.M // BM) * TN, lm.grid(0)):  # expect: P019
            m0, n0 = (t // TN) * BM, (t % TN) * BN
            for k in lm.range(0, 4, counter=it):
                full[it % S].wait(parity=(it // S) % 2)
                lm.mma(acc, a_s[it % S], b_s[it % S], transpose_b=True, init=(k == 0))
                empty[it % S].arrive()
            lm.store(C, at=(m0, n0), src=acc, mask=True)
