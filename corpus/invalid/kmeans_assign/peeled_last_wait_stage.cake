"""corpus/valid/kmeans_assign/peeled_last_s5.cake with the peeled iteration's wait
written for position `TILES` instead of `TILES - 1`: stage 3 of the 5-stage ring is
filled for position 3 only, so the wait for its phase 1 never completes and the math
role hangs before its last tile. Its read and release name the right position. One
defect: the position of the peeled wait."""
@cake.schedule(target="sm_90a", workload="kmeans_assign", sizes={"K": 16, "D": 64})
def kmeans_peeled_last_s5(lm, X, C, labels):
    BR, TILES, S = 64, 8, 5
    lm.launch(grid=(lm.cdiv(lm.N, BR * TILES),), warps=8)
    c_s = lm.smem("f32", (16, 64))
    x_s = lm.smem("f32", (BR, 64), stages=S)
    cbar = lm.mbarrier(count=1)
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 8), regs=232)
    dist = lm.fragment("f32", (BR, 16), role=math)
    lab = lm.fragment("i32", (BR,), role=math)
    ring = lm.pipeline(stages=S, buffers=[x_s], producer=loader, consumer=math)
    r0 = lm.block(0) * BR * TILES
    with loader:
        cbar[0].arrive_expect_tx(bytes=lm.nbytes(c_s))
        c_s[0].load(C, at=(0, 0), barrier=cbar[0])
        for t in lm.range(0, S):                      # prologue: fill every stage
            ring.acquire(t)
            x_s[ring.stage(t)].load(X, at=(r0 + t * BR, 0), barrier=ring.full(t), pad=True)
        for t in lm.range(S, TILES):                  # steady state: refill released stages
            ring.acquire(t)
            x_s[ring.stage(t)].load(X, at=(r0 + t * BR, 0), barrier=ring.full(t), pad=True)
    with math:
        cbar[0].wait(parity=0)
        for t in lm.range(0, TILES - 1):
            ring.wait(t)
            lm.sqdist(dist, x_s[ring.stage(t)], c_s)
            ring.release(t)
            lm.reduce(lab, dist, op="argmin", axis=1)
            lm.store(labels, at=(r0 + t * BR,), src=lab, mask=True)
        ring.wait(TILES)  # expect: P029
        lm.sqdist(dist, x_s[ring.stage(TILES - 1)], c_s)
        ring.release(TILES - 1)
        lm.reduce(lab, dist, op="argmin", axis=1)
        lm.store(labels, at=(r0 + (TILES - 1) * BR,), src=lab, mask=True)
