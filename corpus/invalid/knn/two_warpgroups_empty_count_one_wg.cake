"""Derived from corpus/valid/knn/rows_two_warpgroups_s6.cake with the pipeline's empty
count written for one consumer warpgroup (`empty_count=4`) while the math role has two
(8 warps, each releasing every stage once): an empty phase of a stage completes as soon
as 4 warps have released it, so the loader may refill the stage while the other 4 math
warps still compute distances from it (race), and their releases complete a second
phase of the same stage. Each tile then flips the barrier's parity twice, and the
loader's acquire of tile 6 waits with parity 0 on a barrier that has completed phases 0
and 1: it waits for phase 2, which only a later release could bring (deadlock, the
simulator's outcome)."""
@cake.schedule(target="sm_90a", workload="knn", sizes={"K": 16, "D": 64, "T": 4})
def knn_two_wg_empty4(lm, X, C, idx):
    BR, TILES, S = 128, 8, 6
    lm.launch(grid=(lm.cdiv(lm.N, BR * TILES),), warps=12)
    c_s = lm.smem("f32", (16, 64))
    x_s = lm.smem("f32", (BR, 64), stages=S)
    cbar = lm.mbarrier(count=1)
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 12), regs=232)
    dist = lm.fragment("f32", (BR, 16), role=math)
    nn = lm.fragment("i32", (BR, 4), role=math)
    ring = lm.pipeline(stages=S, buffers=[x_s], producer=loader, consumer=math,  # expect: P002
                       empty_count=4)
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
            lm.topk(nn, dist, k=4)
            lm.store(idx, at=(r0 + t * BR, 0), src=nn, mask=True)
