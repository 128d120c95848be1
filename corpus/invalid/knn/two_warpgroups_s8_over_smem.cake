"""Derived from corpus/valid/knn/rows_two_warpgroups_s6.cake with the ring deepened to 8
stages: 8 x 32 KiB point stages, the 4 KiB centroid tile and the barriers need 266,488
bytes of shared memory, more than the 232,448 bytes a CTA may have on sm_90a, so the
launch fails. (With 128-row tiles at most 6 stages fit.)"""
@cake.schedule(target="sm_90a", workload="knn", sizes={"K": 16, "D": 64, "T": 4})
def knn_two_wg_s8(lm, X, C, idx):
    BR, TILES, S = 128, 8, 8
    lm.launch(grid=(lm.cdiv(lm.N, BR * TILES),), warps=12)
    c_s = lm.smem("f32", (16, 64))
    x_s = lm.smem("f32", (BR, 64), stages=S)  # expect: R001
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
            ring.wait(t)
            lm.sqdist(dist, x_s[ring.stage(t)], c_s)
            ring.release(t)
            lm.topk(nn, dist, k=4)
            lm.store(idx, at=(r0 + t * BR, 0), src=nn, mask=True)
