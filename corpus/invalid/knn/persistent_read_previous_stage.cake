"""valid/knn/persistent_rows_s7.cake with the math role reading the stage of the previous
ring position: after `ring.wait(it)` it computes distances from
`x_s[ring.stage(it - 1)]`. On a CTA's first tile that is stage 6, which the loader
fills only at its seventh ring position: the read races with that copy (a CTA with fewer
tiles reads a stage nothing wrote); later it is the stage the math role has already
released, which the loader may be refilling. The repair is the index the wait
names (`ring.stage(it)`), not a load or another wait."""
@cake.schedule(target="sm_90a", workload="knn", sizes={"K": 16, "D": 64, "T": 4})
def knn_persistent_read_previous_stage(lm, X, C, idx):
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
            lm.sqdist(dist, x_s[ring.stage(it - 1)], c_s)          # expect: P029
            ring.release(it)
            lm.topk(nn, dist, k=4)
            lm.store(idx, at=(t * BR, 0), src=nn, mask=True)
