"""k-means assignment at head-line size (K = 1024 centroids of D = 128): the centroids no
longer fit one tile, so they stream 64 at a time through a 3-stage ring (32 KiB a
stage) for every 64-point tile, which waits once on its own 2-stage ring (32 KiB a
stage). For each centroid tile the math warpgroup computes the 64 x 64 distances,
releases the centroid stage, and merges the tile into a running (distance, index)
minimum per point with `lm.argmin_update` (strictly smaller only, so ties keep the lower
index as the reference's argmin does); after the last centroid tile it releases the
point stage and stores the labels. The loader runs from its first warp; both rings
derive their stages and phases from the nested ring positions `t * CT + c` and `t`."""
# expect: clean
@cake.schedule(target="sm_90a", workload="kmeans_assign", sizes={"D": 128},
               divisible={"K": 64})
def kmeans_centroid_tiles_d128(lm, X, C, labels):
    BR, BK, TILES = 64, 64, 4
    CT = lm.K // BK                                      # centroid tiles
    lm.launch(grid=(lm.cdiv(lm.N, BR * TILES),), warps=8)
    x_s = lm.smem("f32", (BR, 128), stages=2)
    c_s = lm.smem("f32", (BK, 128), stages=3)
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 8), regs=232)
    dist = lm.fragment("f32", (BR, BK), role=math)
    best = lm.fragment("f32", (BR,), role=math)
    lab = lm.fragment("i32", (BR,), role=math)
    xring = lm.pipeline(stages=2, buffers=[x_s], producer=loader, consumer=math)
    cring = lm.pipeline(stages=3, buffers=[c_s], producer=loader, consumer=math)
    r0 = lm.block(0) * BR * TILES
    with loader:
        with lm.warps(0, 1):                             # the producer warp
            for t in lm.range(0, TILES):
                xring.acquire(t)
                x_s[xring.stage(t)].load(X, at=(r0 + t * BR, 0), barrier=xring.full(t),
                                         pad=True)
                for c in lm.range(0, CT):
                    cring.acquire(t * CT + c)
                    c_s[cring.stage(t * CT + c)].load(C, at=(c * BK, 0),
                                                      barrier=cring.full(t * CT + c))
    with math:
        for t in lm.range(0, TILES):
            xring.wait(t)
            lm.fill(best, 1e30)                          # no centroid seen yet
            lm.fill(lab, 0.0)
            for c in lm.range(0, CT):
                cring.wait(t * CT + c)
                lm.sqdist(dist, x_s[xring.stage(t)], c_s[cring.stage(t * CT + c)])
                cring.release(t * CT + c)
                lm.argmin_update(best, lab, dist, base=c * BK)
            xring.release(t)
            lm.store(labels, at=(r0 + t * BR,), src=lab, mask=True)
