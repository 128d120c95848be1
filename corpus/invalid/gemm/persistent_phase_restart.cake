"""A persistent GEMM whose math role restarts the ring position at every tile: it derives
stage and parity from the K-block index `k`, which starts again at 0 for each tile, while
the loader keeps counting (`it`, CUTLASS's `PipelineState`) and the barriers' phases carry
over. With K = 256 each tile takes 4 positions of the 4-stage ring, one phase of every
stage, so on its second tile the math role waits on `full[0]` with parity 0 while the
barrier has completed phases 0 and 1: it waits for phase 2, which the loader fills only
after the math role released the tile it never read (deadlock), or passes on a later
phase than the data it reads. Only CTAs with two tiles or more show it: at M = N = 256
(4 tiles) and M = N = 257 (9 tiles) every CTA has one; at M = 1000, N = 520 (40 tiles over
16 CTAs) each has 2 or 3."""
@cake.schedule(target="sm_90a", workload="gemm", sizes={"K": 256})
def gemm_persistent_phase_restart(lm, A, B, C):
    BM, BN, BK, S, SMS = 128, 128, 64, 4, 16
    TM = lm.cdiv(lm.M, BM)
    TILES = TM * lm.cdiv(lm.N, BN)
    lm.launch(grid=(lm.min(SMS, TILES),), warps=12)
    a_s = lm.smem("bf16", (BM, BK), stages=S, swizzle="128B")
    b_s = lm.smem("bf16", (BN, BK), stages=S, swizzle="128B")
    full = lm.mbarrier(count=1, stages=S)
    empty = lm.mbarrier(count=8, stages=S)
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 12), regs=232)
    acc = lm.fragment("f32", (BM, BN), role=math)
    it = lm.counter()
    with loader:
        for t in lm.range(lm.block(0), TILES, lm.grid(0)):
            m0, n0 = (t % TM) * BM, (t // TM) * BN
            for k in lm.range(0, 4, counter=it):
                empty[it % S].wait(parity=(it // S + 1) % 2)
                full[it % S].arrive_expect_tx(bytes=lm.nbytes(a_s, b_s))
                a_s[it % S].load(A, at=(m0, k * BK), barrier=full[it % S], pad=True)
                b_s[it % S].load(B, at=(n0, k * BK), barrier=full[it % S], pad=True)
    with math:
        for t in lm.range(lm.block(0), TILES, lm.grid(0)):
            m0, n0 = (t % TM) * BM, (t // TM) * BN
            for k in lm.range(0, 4):  # expect: P026
                full[k % S].wait(parity=(k // S) % 2)
                lm.mma(acc, a_s[k % S], b_s[k % S], transpose_b=True, init=(k == 0))
                empty[k % S].arrive()
            lm.store(C, at=(m0, n0), src=acc, mask=True)
