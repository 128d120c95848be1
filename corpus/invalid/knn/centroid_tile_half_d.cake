"""k nearest centroids with the centroid tile declared 32 columns wide (copied from a
D = 32 variant) while the points have D = 64: the load fills the 16 x 32 tile, and the
distance loop reads columns 32..63 of each centroid row past its end (the next row, and
past the tile for the last one).
Same as corpus/valid/knn/rows_pipelined_s2.cake except the width of `c_s`."""
@cake.schedule(target="sm_90a", workload="knn", sizes={"K": 16, "D": 64, "T": 4})
def knn_rows_centroids_half_d(lm, X, C, idx):
    BR, TILES = 64, 4
    lm.launch(grid=(lm.cdiv(lm.N, BR * TILES),), warps=8)
    c_s = lm.smem("f32", (16, 32))
    x_s = lm.smem("f32", (BR, 64), stages=2)
    cbar = lm.mbarrier(count=1)
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 8), regs=232)
    dist = lm.fragment("f32", (BR, 16), role=math)
    nn = lm.fragment("i32", (BR, 4), role=math)
    ring = lm.pipeline(stages=2, buffers=[x_s], producer=loader, consumer=math)
    r0 = lm.block(0) * BR * TILES
    with loader:
        cbar[0].arrive_expect_tx(bytes=lm.nbytes(c_s))
        c_s[0].load(C, at=(0, 0), barrier=cbar[0])
        for t in lm.range(0, TILES):
            ring.acquire(t)
            x_s[ring.stage(t)].load(X, at=(r0 + t * BR, 0), barrier=ring.full(t), pad=True)
    with math:
        cbar[0].wait(parity=0)
        for t in lm.range(0, TILES):
            ring.wait(t)
            lm.sqdist(dist, x_s[ring.stage(t)], c_s)  # expect: H008
            ring.release(t)
            lm.topk(nn, dist, k=4)
            lm.store(idx, at=(r0 + t * BR, 0), src=nn, mask=True)
