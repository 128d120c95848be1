"""k-means assignment that arms each point tile with the bytes of the rows that lie inside
X, `lm.min(BR, lm.N - row) * 256`, although the load zero-pads the tile (`pad=True`) and
always delivers its full 64 rows (16,384 bytes). Every CTA but the last loads whole
tiles, where the two agree; in the last CTA (N = 1000: rows 960..1023, 40 inside) the
phase is armed with 10,240 bytes while 16,384 land, so its transaction count never
returns to zero (the surplus drives it below zero) and the math role waits forever. The
analysis evaluates the bytes per CTA and checks the first, the last and the tail ones."""
@cake.schedule(target="sm_90a", workload="kmeans_assign", sizes={"K": 16, "D": 64})
def kmeans_rows_tail_bytes(lm, X, C, labels):
    BR, TILES = 64, 4
    lm.launch(grid=(lm.cdiv(lm.N, BR * TILES),), warps=8)
    c_s = lm.smem("f32", (16, 64))
    x_s = lm.smem("f32", (BR, 64), stages=2)
    cbar = lm.mbarrier(count=1)
    full = lm.mbarrier(count=1, stages=2)
    empty = lm.mbarrier(count=4, stages=2)
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 8), regs=232)
    dist = lm.fragment("f32", (BR, 16), role=math)
    lab = lm.fragment("i32", (BR,), role=math)
    r0 = lm.block(0) * BR * TILES
    with loader:
        cbar[0].arrive_expect_tx(bytes=lm.nbytes(c_s))
        c_s[0].load(C, at=(0, 0), barrier=cbar[0])
        for t in lm.range(0, TILES):
            empty[t % 2].wait(parity=(t // 2 + 1) % 2)
            full[t % 2].arrive_expect_tx(bytes=lm.min(BR, lm.N - (r0 + t * BR)) * 256)  # expect: P003
            x_s[t % 2].load(X, at=(r0 + t * BR, 0), barrier=full[t % 2], pad=True)
    with math:
        cbar[0].wait(parity=0)
        for t in lm.range(0, TILES):
            full[t % 2].wait(parity=(t // 2) % 2)
            lm.sqdist(dist, x_s[t % 2], c_s)
            lm.syncwarp()
            empty[t % 2].arrive()
            lm.reduce(lab, dist, op="argmin", axis=1)
            lm.store(labels, at=(r0 + t * BR,), src=lab, mask=True)
