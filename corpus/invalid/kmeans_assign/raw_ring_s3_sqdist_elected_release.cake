"""corpus/valid/kmeans_assign/raw_ring_s3_two_math_wgs.cake released the CUTLASS way, one
signalling thread per math warpgroup (`with lm.warps(0, 8, 4)`, `empty` counting 2;
`PipelineTmaAsync`, `include/cutlass/pipeline/sm90_pipeline.hpp`), but after per-thread
generic reads: every thread of the 8 warps reads its point rows of the stage in
`lm.sqdist`, and no barrier over each warpgroup orders warps 1-3 (5-7) before the arrive
of warp 0 (4). The loader can refill the stage under them. One defect: the missing
warpgroup barriers before the elected release (the count matches the arrivals)."""
@cake.schedule(target="sm_90a", workload="kmeans_assign", sizes={"K": 16, "D": 64})
def kmeans_raw_ring_s3_2wg(lm, X, C, labels):
    BR, TILES, S = 128, 6, 3
    lm.launch(grid=(lm.cdiv(lm.N, BR * TILES),), warps=12)
    c_s = lm.smem("f32", (16, 64))
    x_s = lm.smem("f32", (BR, 64), stages=S)
    cbar = lm.mbarrier(count=1)
    full = lm.mbarrier(count=1, stages=S)
    empty = lm.mbarrier(count=2, stages=S)          # one signalling thread per math warpgroup
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
            with lm.warps(0, 8, 4):
                empty[t % S].arrive()  # expect: P011
            lm.reduce(lab, dist, op="argmin", axis=1)
            lm.store(labels, at=(r0 + t * BR,), src=lab, mask=True)
