"""Derived from corpus/valid/knn/rows_elected_release_s5.cake with the CTA's first row
computed from the ring depth instead of the tiles per CTA (`lm.block(0) * BR * S`, S = 5,
TILES = 10): each CTA still walks 10 tiles, but CTAs start only 5 tiles apart, so CTA b
rewrites the last 5 tiles of CTA b - 1 (two CTAs write the same rows of `idx`, unordered:
the simulator reports that race), and the grid, sized for 10 tiles per CTA, stops after
about half of the points: the rest of `idx` is never written."""
@cake.schedule(target="sm_90a", workload="knn", sizes={"K": 64, "D": 64, "T": 8})
def knn_elected_release_r0_stages(lm, X, C, idx):
    BR, TILES, S = 64, 10, 5
    lm.launch(grid=(lm.cdiv(lm.N, BR * TILES),), warps=8)
    c_s = lm.smem("f32", (64, 64))
    x_s = lm.smem("f32", (BR, 64), stages=S)
    cbar = lm.mbarrier(count=1)
    done = lm.named_barrier(id=1, threads=128)               # the math warpgroup
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 8), regs=232)
    dist = lm.fragment("f32", (BR, 64), role=math)
    nn = lm.fragment("i32", (BR, 8), role=math)
    ring = lm.pipeline(stages=S, buffers=[x_s], producer=loader, consumer=math,
                       empty_count=1)                        # one release per warpgroup
    r0 = lm.block(0) * BR * S
    with loader:
        with lm.warps(0, 1):
            cbar[0].arrive_expect_tx(bytes=lm.nbytes(c_s))
            c_s[0].load(C, at=(0, 0), barrier=cbar[0])
            for t in lm.range(0, TILES):
                ring.acquire(t)
                x_s[ring.stage(t)].load(X, at=(r0 + t * BR, 0), barrier=ring.full(t),
                                        pad=True)
    with math:
        cbar[0].wait(parity=0)
        for t in lm.range(0, TILES):
            ring.wait(t)
            lm.sqdist(dist, x_s[ring.stage(t)], c_s)
            lm.fence_proxy()                             # generic reads before the TMA refill (A19)
            done.sync()                                      # every warp has read x_s
            with lm.warps(0, 1):
                ring.release(t)                              # lane 0 of the first warp
            lm.topk(nn, dist, k=8)
            lm.store(idx, at=(r0 + t * BR, 0), src=nn, mask=True)  # expect: P017
