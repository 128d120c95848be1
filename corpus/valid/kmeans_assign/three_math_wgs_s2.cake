"""k-means assignment with three math warpgroups: a 384-row point tile (96 KiB) is
shared by 12 math warps (`regs=152`, one row per thread for the argmin) and double
buffered (2 x 96 KiB + the 4 KiB centroid tile = 200 KiB of shared memory). The loader
warpgroup keeps 40 registers: 128 x 40 + 384 x 152 = 63,488 of 65,536. The ring's
empty barrier counts the 12 math warps (the default `empty_count`)."""
# expect: clean
@cake.schedule(target="sm_90a", workload="kmeans_assign", sizes={"K": 16, "D": 64})
def kmeans_three_math_wgs_s2(lm, X, C, labels):
    BR, TILES = 384, 3
    lm.launch(grid=(lm.cdiv(lm.N, BR * TILES),), warps=16)
    c_s = lm.smem("f32", (16, 64))
    x_s = lm.smem("f32", (BR, 64), stages=2)
    cbar = lm.mbarrier(count=1)
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 16), regs=152)
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
