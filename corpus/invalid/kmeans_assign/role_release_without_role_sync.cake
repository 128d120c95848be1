"""k-means assignment on a raw 2-stage ring whose math role (4 warps, 128 threads)
computes distances from a point tile and hands the stage back with a single arrive
(`per="role"`, empty count 1): the arrive orders the elected thread's reads of `x_s`,
not those of the other 127 threads, so the loader's refill of the stage may land while
warps 5..7 still read it (PTX memory model: an arrive releases the arriving thread's
prior accesses only). Phase trace: empty[0] completes phase 0 with the one arrive at
t = 0; the loader's wait for t = 2 (parity 0) passes and its copy writes x_s stage 0,
unordered with the reads of warp 5 at t = 0."""
@cake.schedule(target="sm_90a", workload="kmeans_assign", sizes={"K": 16, "D": 64})
def kmeans_rows_role_release(lm, X, C, labels):
    BR, TILES = 64, 4
    lm.launch(grid=(lm.cdiv(lm.N, BR * TILES),), warps=8)
    c_s = lm.smem("f32", (16, 64))
    x_s = lm.smem("f32", (BR, 64), stages=2)
    cbar = lm.mbarrier(count=1)
    full = lm.mbarrier(count=1, stages=2)
    empty = lm.mbarrier(count=1, stages=2)
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 8), regs=232)
    dist = lm.fragment("f32", (BR, 16), role=math)
    lab = lm.fragment("i32", (BR,), role=math)
    r0 = lm.block(0) * BR * TILES
    with loader:
        cbar[0].arrive_expect_tx(bytes=lm.nbytes(c_s))
        c_s[0].load(C, at=(0, 0), barrier=cbar[0])
        for t in lm.range(0, TILES):
            empty[t % 2].wait(parity=(t // 2 + 1) % 2)
            full[t % 2].arrive_expect_tx(bytes=lm.nbytes(x_s))
            x_s[t % 2].load(X, at=(r0 + t * BR, 0), barrier=full[t % 2], pad=True)
    with math:
        cbar[0].wait(parity=0)
        for t in lm.range(0, TILES):
            full[t % 2].wait(parity=(t // 2) % 2)
            lm.sqdist(dist, x_s[t % 2], c_s)
            empty[t % 2].arrive(per="role")  # expect: P011
            lm.reduce(lab, dist, op="argmin", axis=1)
            lm.store(labels, at=(r0 + t * BR,), src=lab, mask=True)
