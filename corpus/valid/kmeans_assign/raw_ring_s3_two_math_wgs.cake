"""k-means assignment with a raw 3-stage ring and a math role of two warpgroups: each
128-row point tile (32 KiB) is read by 256 math threads (8 warps, `regs=232`; the loader
warpgroup runs on 40: 128 x 40 + 256 x 232 = 64,512 registers). `full` counts the
loader's one arming per phase (the tile's 32,768 bytes), `empty` one arrive per math
warp (8), each after `lm.syncwarp()` has ordered its lanes' reads of the stage. The
centroids arrive once through `cbar`. Parities follow the phases of each stage:
full `(t // 3) % 2`, empty `(t // 3 + 1) % 2` (the loader's first pass over a stage
goes through on the fresh barrier); 6 tiles per CTA take every stage round twice."""
# expect: clean
@cake.schedule(target="sm_90a", workload="kmeans_assign", sizes={"K": 16, "D": 64})
def kmeans_raw_ring_s3_2wg(lm, X, C, labels):
    BR, TILES, S = 128, 6, 3
    lm.launch(grid=(lm.cdiv(lm.N, BR * TILES),), warps=12)
    c_s = lm.smem("f32", (16, 64))
    x_s = lm.smem("f32", (BR, 64), stages=S)
    cbar = lm.mbarrier(count=1)
    full = lm.mbarrier(count=1, stages=S)
    empty = lm.mbarrier(count=8, stages=S)          # one arrive per math warp
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 12), regs=232)
    dist = lm.fragment("f32", (BR, 16), role=math)
    lab = lm.fragment("i32", (BR,), role=math)
    r0 = lm.block(0) * BR * TILES
    with loader:
        cbar[0].arrive_expect_tx(bytes=lm.nbytes(c_s))
        c_s[0].load(C, at=(0, 0), barrier=cbar[0])
        for t in lm.range(0, TILES):
            empty[t % S].wait(parity=(t // S + 1) % 2)
            full[t % S].arrive_expect_tx(bytes=lm.nbytes(x_s))
            x_s[t % S].load(X, at=(r0 + t * BR, 0), barrier=full[t % S], pad=True)
    with math:
        cbar[0].wait(parity=0)
        for t in lm.range(0, TILES):
            full[t % S].wait(parity=(t // S) % 2)
            lm.sqdist(dist, x_s[t % S], c_s)
            lm.syncwarp()                           # every lane has read the stage
            empty[t % S].arrive()
            lm.reduce(lab, dist, op="argmin", axis=1)
            lm.store(labels, at=(r0 + t * BR,), src=lab, mask=True)
