"""Derived from corpus/valid/knn/rows_pipelined_s2.cake with the math role arming the
centroid barrier too, right before it waits on it (as if the waiter had to announce the
bytes it waits for): `cbar[0]` is armed twice in its only phase, by the loader and by
the math role, 2 arrivals and 2 x 4,096 bytes against a count of 1 and one 4,096-byte
copy. Whichever arm comes second arrives on a phase whose arrivals are all in
(over-arrival), and the phase waits for 4,096 bytes that never come: the math role
deadlocks on `cbar[0].wait(parity=0)`."""
@cake.schedule(target="sm_90a", workload="knn", sizes={"K": 16, "D": 64, "T": 4})
def knn_rows_s2_cbar_armed_twice(lm, X, C, idx):
    BR, TILES = 64, 4
    lm.launch(grid=(lm.cdiv(lm.N, BR * TILES),), warps=8)
    c_s = lm.smem("f32", (16, 64))
    x_s = lm.smem("f32", (BR, 64), stages=2)
    cbar = lm.mbarrier(count=1)
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 8), regs=232)
    dist = lm.fragment("f32", (BR, 16), role=math)
    nn = lm.fragment("i32", (BR, 4), role=math)
    ring = lm.pipeline(stages=2, buffers=[x_s], producer=loader, consumer=math)
    r0 = lm.block(0) * BR * TILES
    with loader:
        cbar[0].arrive_expect_tx(bytes=lm.nbytes(c_s))
        c_s[0].load(C, at=(0, 0), barrier=cbar[0])
        for t in lm.range(0, TILES):
            ring.acquire(t)
            x_s[ring.stage(t)].load(X, at=(r0 + t * BR, 0), barrier=ring.full(t), pad=True)
    with math:
        cbar[0].arrive_expect_tx(bytes=lm.nbytes(c_s))  # expect: P004
        cbar[0].wait(parity=0)
        for t in lm.range(0, TILES):
            ring.wait(t)
            lm.sqdist(dist, x_s[ring.stage(t)], c_s)
            ring.release(t)
            lm.topk(nn, dist, k=4)
            lm.store(idx, at=(r0 + t * BR, 0), src=nn, mask=True)
