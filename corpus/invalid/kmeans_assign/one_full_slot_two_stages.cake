"""k-means assignment with a raw 2-stage ring of point tiles whose full barrier has a
single slot: the loader may fill both stages, so two phases of `full[0]` can be in
flight while the math role still waits for the first, more than one parity bit can tell
apart. The arrive for tile 1 can land in the phase of tile 0, and a wait passes on the
wrong phase.
Derived from corpus/valid/kmeans_assign/rows_pipelined_s2.cake with the pipeline written
out as raw barriers; the valid form gives `full` one slot per stage
(`lm.mbarrier(count=1, stages=S)`, indexed `full[t % S]`, parity `(t // S) % 2`)."""
@cake.schedule(target="sm_90a", workload="kmeans_assign", sizes={"K": 16, "D": 64})
def kmeans_one_full_slot(lm, X, C, labels):
    BR, TILES, S = 64, 4, 2
    lm.launch(grid=(lm.cdiv(lm.N, BR * TILES),), warps=8)
    c_s = lm.smem("f32", (16, 64))
    x_s = lm.smem("f32", (BR, 64), stages=S)
    cbar = lm.mbarrier(count=1)
    full = lm.mbarrier(count=1)  # expect: P007
    empty = lm.mbarrier(count=4, stages=S)          # one arrive per math warp
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 8), regs=232)
    dist = lm.fragment("f32", (BR, 16), role=math)
    lab = lm.fragment("i32", (BR,), role=math)
    r0 = lm.block(0) * BR * TILES
    with loader:
        cbar[0].arrive_expect_tx(bytes=lm.nbytes(c_s))
        c_s[0].load(C, at=(0, 0), barrier=cbar[0])
        for t in lm.range(0, TILES):
            empty[t % S].wait(parity=(t // S + 1) % 2)
            full[0].arrive_expect_tx(bytes=lm.nbytes(x_s))
            x_s[t % S].load(X, at=(r0 + t * BR, 0), barrier=full[0], pad=True)
    with math:
        cbar[0].wait(parity=0)
        for t in lm.range(0, TILES):
            full[0].wait(parity=t % 2)
            lm.sqdist(dist, x_s[t % S], c_s)
            lm.syncwarp()                         # every lane has read the stage
            empty[t % S].arrive()
            lm.reduce(lab, dist, op="argmin", axis=1)
            lm.store(labels, at=(r0 + t * BR,), src=lab, mask=True)
