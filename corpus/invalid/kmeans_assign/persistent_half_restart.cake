"""A persistent k-means assignment on raw barriers whose math role indexes the ring by the
half's index `h` (`full[h % S]`, parity `(h // S) % 2`, `x_s[h % S]`, `empty[h % S]`)
while the loader uses the running counter `it`: the math role restarts at stage 0,
parity 0 on every tile, the loader does not. A tile takes 2 of the 4 positions, so a
CTA's second tile is loaded into stages 2 and 3 while the math role reads stages 0 and 1
again: its waits pass on the first tile's phases, it assigns the first tile's points a
second time under the second tile's rows, and nothing waits for the copies into stages 2
and 3 (the loader's tail then waits for releases of stages 2 and 3 that never come).
CTAs with one tile hide it; at N = 4097 (33 tiles on 16 CTAs) every CTA has 2 or 3.
Same as corpus/valid/kmeans_assign/persistent_raw_counter_s4.cake except the math role's
inner loop has no counter and uses `h`."""
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
            for h in lm.range(0, BR // HR):  # expect: P026
                full[h % S].wait(parity=(h // S) % 2)
                lm.sqdist(dist, x_s[h % S], c_s)
                lm.syncwarp()                       # every lane has read the stage
                empty[h % S].arrive()
                lm.reduce(lab, dist, op="argmin", axis=1)
                lm.store(labels, at=(t * BR + h * HR,), src=lab, mask=True)
