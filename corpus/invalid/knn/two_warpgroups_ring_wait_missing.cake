"""Derived from corpus/valid/knn/rows_two_warpgroups_s6.cake with the math role's
`ring.wait(t)` deleted ("the centroid wait already synchronised with the loader"): the
math warps compute distances from `x_s[t % 6]` without waiting for its copy to land.
On the first pass over the ring they read bytes no copy has written yet (the simulator
reports the uninitialised read of stage 0), otherwise rows the bulk copy is writing at
the same time (race), and once the ring wraps the previous tile of that stage."""
@cake.schedule(target="sm_90a", workload="knn", sizes={"K": 16, "D": 64, "T": 4})
def knn_two_wg_no_ring_wait(lm, X, C, idx):
    BR, TILES, S = 128, 8, 6
    lm.launch(grid=(lm.cdiv(lm.N, BR * TILES),), warps=12)
    c_s = lm.smem("f32", (16, 64))
    x_s = lm.smem("f32", (BR, 64), stages=S)
    cbar = lm.mbarrier(count=1)
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 12), regs=232)
    dist = lm.fragment("f32", (BR, 16), role=math)
    nn = lm.fragment("i32", (BR, 4), role=math)
    ring = lm.pipeline(stages=S, buffers=[x_s], producer=loader, consumer=math)
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
            lm.sqdist(dist, x_s[ring.stage(t)], c_s)  # expect: P008
            ring.release(t)
            lm.topk(nn, dist, k=4)
            lm.store(idx, at=(r0 + t * BR, 0), src=nn, mask=True)
