"""A persistent k-means assignment for 64 centroids on raw barriers, confined to 16 SMs
(a partition of the GPU: the grid is `lm.min(CTAS, TILES)` with CTAS = 16, never a CTA
without a tile). Each CTA loads the 64 x 64 centroid tile once and walks the 128-row
tiles t = blockIdx.x, blockIdx.x + gridDim.x, ... Each tile is two 64-row halves through
a 4-stage ring whose position is the running counter `it`: stage `it % 4`, full parity
`(it // 4) % 2`, empty parity `(it // 4 + 1) % 2`, carried from tile to tile (a CTA's
i-th tile uses positions 2 i and 2 i + 1). After its tile loop the loader waits until
every stage has been released once more (CUTLASS's `load_tail`, four counted positions
on the same counter), so no copy it issued is still unread when it ends. At N = 4097
(33 tiles) CTA 0 takes 3 tiles and the others 2; at N = 65536 every CTA takes 32."""
# expect: clean
@cake.schedule(target="sm_90a", workload="kmeans_assign", sizes={"K": 64, "D": 64})
def kmeans_persistent_raw_counter_s4(lm, X, C, labels):
    BR, HR, S, CTAS = 128, 64, 4, 16
    TILES = lm.cdiv(lm.N, BR)
    lm.launch(grid=(lm.min(CTAS, TILES),), warps=8)
    c_s = lm.smem("f32", (64, 64))
    x_s = lm.smem("f32", (HR, 64), stages=S)
    cbar = lm.mbarrier(count=1)
    full = lm.mbarrier(count=1, stages=S)
    empty = lm.mbarrier(count=4, stages=S)          # one arrive per math warp
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 8), regs=232)
    dist = lm.fragment("f32", (HR, 64), role=math)
    lab = lm.fragment("i32", (HR,), role=math)
    it = lm.counter()                               # the ring position (PipelineState)
    with loader:
        cbar[0].arrive_expect_tx(bytes=lm.nbytes(c_s))
        c_s[0].load(C, at=(0, 0), barrier=cbar[0])
        for t in lm.range(lm.block(0), TILES, lm.grid(0)):
            for h in lm.range(0, BR // HR, counter=it):
                empty[it % S].wait(parity=(it // S + 1) % 2)
                full[it % S].arrive_expect_tx(bytes=lm.nbytes(x_s))
                x_s[it % S].load(X, at=(t * BR + h * HR, 0), barrier=full[it % S], pad=True)
        for tail in lm.range(0, S, counter=it):     # every stage released once more
            empty[it % S].wait(parity=(it // S + 1) % 2)
    with math:
        cbar[0].wait(parity=0)
        for t in lm.range(lm.block(0), TILES, lm.grid(0)):
            for h in lm.range(0, BR // HR, counter=it):
                full[it % S].wait(parity=(it // S) % 2)
                lm.sqdist(dist, x_s[it % S], c_s)
                lm.syncwarp()                       # every lane has read the stage
                empty[it % S].arrive()
                lm.reduce(lab, dist, op="argmin", axis=1)
                lm.store(labels, at=(t * BR + h * HR,), src=lab, mask=True)
