"""k-means assignment whose math role was widened to eight warpgroups (32 warps, 1,024
threads for a 256 x 16 distance tile) next to the loader warpgroup: 36 warps, 1,152
threads per CTA, over the 1,024 a CTA may hold on sm_90a, so the launch fails
(`cudaErrorInvalidConfiguration`) before any thread runs. Derived from
corpus/valid/kmeans_assign/three_math_wgs_s2.cake with a 256-row tile, 36 warps and no
register budgets."""
@cake.schedule(target="sm_90a", workload="kmeans_assign", sizes={"K": 16, "D": 64})
def kmeans_three_math_wgs_s2(lm, X, C, labels):
    BR, TILES = 256, 4
    lm.launch(grid=(lm.cdiv(lm.N, BR * TILES),), warps=36)  # expect: R005
    c_s = lm.smem("f32", (16, 64))
    x_s = lm.smem("f32", (BR, 64), stages=2)
    cbar = lm.mbarrier(count=1)
    loader = lm.role(warps=range(0, 4))
    math = lm.role(warps=range(4, 36))
    dist = lm.fragment("f32", (BR, 16), role=math)
    lab = lm.fragment("i32", (BR,), role=math)
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
            lm.sqdist(dist, x_s[ring.stage(t)], c_s)
            ring.release(t)
            lm.reduce(lab, dist, op="argmin", axis=1)
            lm.store(labels, at=(r0 + t * BR,), src=lab, mask=True)
