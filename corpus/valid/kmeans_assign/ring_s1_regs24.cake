"""k-means assignment through a 1-stage pipeline with the smallest loader budget
setmaxnreg allows: the loader warpgroup drops to 24 registers per thread and the two math
warpgroups rise to 240 (128 x 24 + 256 x 240 = 64,512 of 65,536). The single 128-row
stage (32 KiB) is refilled only after all 8 math warps released it, so every iteration
completes one phase of each barrier: tile t waits full phase t (parity `t % 2`) and the
loader's acquire of tile t + 1 observes empty phase t; its first acquire passes on the
fresh barrier."""
# expect: clean
@cake.schedule(target="sm_90a", workload="kmeans_assign", sizes={"K": 16, "D": 64})
def kmeans_ring_s1_regs24(lm, X, C, labels):
    BR, TILES = 128, 4
    lm.launch(grid=(lm.cdiv(lm.N, BR * TILES),), warps=12)
    c_s = lm.smem("f32", (16, 64))
    x_s = lm.smem("f32", (BR, 64), stages=1)
    cbar = lm.mbarrier(count=1)
    loader = lm.role(warps=range(0, 4), regs=24)
    math = lm.role(warps=range(4, 12), regs=240)
    dist = lm.fragment("f32", (BR, 16), role=math)
    lab = lm.fragment("i32", (BR,), role=math)
    ring = lm.pipeline(stages=1, buffers=[x_s], producer=loader, consumer=math)
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
