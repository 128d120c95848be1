"""A persistent k-means assignment (one CTA per SM, 132, each walking the 64-row tiles
blockIdx.x, blockIdx.x + 132, ...) whose math role counts the tiles with `lm.N // BR`
while the loader walks `lm.cdiv(lm.N, BR)`: for N = 1000 there are 16 tiles, the last
one rows 960..999, and the CTA that owns it (CTA 15) loads it but never waits for it,
so it can exit while that bulk copy still writes its shared memory, and labels
960..999 are never written. Same as corpus/valid/kmeans_assign/persistent_rows_s2.cake
except the math role's tile loop bound."""
@cake.schedule(target="sm_90a", workload="kmeans_assign", sizes={"K": 16, "D": 64})
def kmeans_persistent_rows_s2(lm, X, C, labels):
    BR, SMS = 64, 132
    lm.launch(grid=(SMS,), warps=8)
    c_s = lm.smem("f32", (16, 64))
    x_s = lm.smem("f32", (BR, 64), stages=2)
    cbar = lm.mbarrier(count=1)
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 8), regs=232)
    dist = lm.fragment("f32", (BR, 16), role=math)
    lab = lm.fragment("i32", (BR,), role=math)
    ring = lm.pipeline(stages=2, buffers=[x_s], producer=loader, consumer=math)
    it = lm.counter()
    with loader:
        cbar[0].arrive_expect_tx(bytes=lm.nbytes(c_s))
        c_s[0].load(C, at=(0, 0), barrier=cbar[0])
        for t in lm.range(lm.block(0), lm.cdiv(lm.N, BR), lm.grid(0), counter=it):
            ring.acquire(it)
            x_s[ring.stage(it)].load(X, at=(t * BR, 0), barrier=ring.full(it), pad=True)
    with math:
        cbar[0].wait(parity=0)                         # once per CTA, tile or not
        for t in lm.range(lm.block(0), lm.N // BR, lm.grid(0), counter=it):  # expect: P019
            ring.wait(it)
            lm.sqdist(dist, x_s[ring.stage(it)], c_s)
            ring.release(it)
            lm.reduce(lab, dist, op="argmin", axis=1)
            lm.store(labels, at=(t * BR,), src=lab, mask=True)
