"""Derived from corpus/valid/kmeans_assign/centroid_tiles_d128.cake with the centroid stage
released before the distances that read it: the loader, which waits for every hand-back,
can refill the stage (three centroid tiles later) while the math warps still compute
distances from it, a race between the bulk copy's write and their reads (wrong labels
when the copy wins)."""
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
                cring.release(t * CT + c)                # expect: P010
                lm.sqdist(dist, x_s[xring.stage(t)], c_s[cring.stage(t * CT + c)])
                lm.argmin_update(best, lab, dist, base=c * BK)
            xring.release(t)
            lm.store(labels, at=(r0 + t * BR,), src=lab, mask=True)
