"""k-means assignment with a raw 2-stage ring whose math role waits on the full barrier
with `parity=t % 2`, the stage index, instead of the phase parity `(t // 2) % 2`. The two
agree at t = 0 and t = 3 only: stage 1 at t = 1 waits with parity 1
on a fresh barrier and passes before its tile has landed, and stage 0 at t = 2 waits
with parity 0 again and passes on the phase it observed at t = 0.
Derived from corpus/valid/kmeans_assign/rows_pipelined_s2.cake: the pipeline is written
out as raw `full`/`empty` barriers with explicit parities."""
@cake.schedule(target="sm_90a", workload="kmeans_assign", sizes={"K": 16, "D": 64})
def kmeans_raw_stage_bit(lm, X, C, labels):
    BR, TILES, S = 64, 4, 2
    lm.launch(grid=(lm.cdiv(lm.N, BR * TILES),), warps=8)
    c_s = lm.smem("f32", (16, 64))
    x_s = lm.smem("f32", (BR, 64), stages=S)
    cbar = lm.mbarrier(count=1)
    full = lm.mbarrier(count=1, stages=S)
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
            full[t % S].arrive_expect_tx(bytes=lm.nbytes(x_s))
            x_s[t % S].load(X, at=(r0 + t * BR, 0), barrier=full[t % S], pad=True)
    with math:
        cbar[0].wait(parity=0)
        for t in lm.range(0, TILES):
            full[t % S].wait(parity=t % 2)  # expect: P006
            lm.sqdist(dist, x_s[t % S], c_s)
            lm.syncwarp()                         # every lane has read the stage
            empty[t % S].arrive()
            lm.reduce(lab, dist, op="argmin", axis=1)
            lm.store(labels, at=(r0 + t * BR,), src=lab, mask=True)
