"""Persistent k nearest centroids (4 of 16): the grid is the number of SMs the kernel is
given (here 8, a persistent launch with a reduced `sm_count`), or fewer when N has fewer
32-row tiles, and each CTA walks the tiles blockIdx.x, blockIdx.x + gridDim.x, ...
through a 7-stage pipeline whose position is the running counter `it`, so the ring's
phases carry from tile to tile (the i-th tile of a CTA: stage i % 7, phase i // 7). The
centroids are loaded once per CTA and the math role waits for them before its tile loop,
so every CTA observes the copy before it exits, whatever its number of tiles. At N =
4096 (128 tiles) each CTA takes 16 tiles and wraps the ring twice."""
# expect: clean
@cake.schedule(target="sm_90a", workload="knn", sizes={"K": 16, "D": 64, "T": 4})
def knn_persistent_rows_s7(lm, X, C, idx):
    BR, SMS, S = 32, 8, 7
    TILES = lm.cdiv(lm.N, BR)
    lm.launch(grid=(lm.min(SMS, TILES),), warps=8)
    c_s = lm.smem("f32", (16, 64))
    x_s = lm.smem("f32", (BR, 64), stages=S)
    cbar = lm.mbarrier(count=1)
    loader = lm.role(warps=range(0, 4), regs=56)
    math = lm.role(warps=range(4, 8), regs=216)
    dist = lm.fragment("f32", (BR, 16), role=math)
    nn = lm.fragment("i32", (BR, 4), role=math)
    ring = lm.pipeline(stages=S, buffers=[x_s], producer=loader, consumer=math)
    it = lm.counter()
    with loader:
        cbar[0].arrive_expect_tx(bytes=lm.nbytes(c_s))
        c_s[0].load(C, at=(0, 0), barrier=cbar[0])
        for t in lm.range(lm.block(0), TILES, lm.grid(0), counter=it):
            ring.acquire(it)
            x_s[ring.stage(it)].load(X, at=(t * BR, 0), barrier=ring.full(it), pad=True)
    with math:
        cbar[0].wait(parity=0)                               # once per CTA, tile or not
        for t in lm.range(lm.block(0), TILES, lm.grid(0), counter=it):
            ring.wait(it)
            lm.sqdist(dist, x_s[ring.stage(it)], c_s)
            ring.release(it)
            lm.topk(nn, dist, k=4)
            lm.store(idx, at=(t * BR, 0), src=nn, mask=True)
