"""corpus/valid/kmeans_assign/raw_ring_s3_two_math_wgs.cake with the loader's copy indexed
`x_s[t % (S + 1)]` on a 3-stage buffer: tile 3 lands past the last stage (on whatever
follows `x_s` in shared memory) while the math role reads stage 0. One defect: a stage
index outside [0, S)."""
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
            x_s[t % (S + 1)].load(X, at=(r0 + t * BR, 0), barrier=full[t % S], pad=True)  # expect: H006
    with math:
        cbar[0].wait(parity=0)
        for t in lm.range(0, TILES):
            full[t % S].wait(parity=(t // S) % 2)
            lm.sqdist(dist, x_s[t % S], c_s)
            lm.syncwarp()                           # every lane has read the stage
            empty[t % S].arrive()
            lm.reduce(lab, dist, op="argmin", axis=1)
            lm.store(labels, at=(r0 + t * BR,), src=lab, mask=True)
