"""Elementwise scale over a 2-stage ring of row tiles whose full barrier has a single
slot: the loader may fill both stages, so two phases of `full[0]` can be outstanding
while the worker still waits for the first, more than its one parity bit can tell apart.
The loader's arrive for tile 1 can land in the phase of tile 0 (more arrivals than the
count) and the worker's wait for tile t passes on the wrong phase.
Derived from the valid form of this ring, where `full` has one slot per stage
(`lm.mbarrier(count=1, stages=2)`, indexed `full[t % 2]`, waited with parity
`(t // 2) % 2`)."""
@cake.schedule(target="sm_90a", workload="scale", divisible={"N": 4})
def scale_rows_one_full_slot(lm, X, Y):
    TM, TN, TILES = 32, 256, 4
    lm.launch(grid=(lm.cdiv(lm.M, TM * TILES), lm.cdiv(lm.N, TN)), warps=8)
    x_s = lm.smem("f32", (TM, TN), stages=2)
    full = lm.mbarrier(count=1)  # expect: P007
    empty = lm.mbarrier(count=4, stages=2)          # one arrive per worker warp
    loader = lm.role(warps=range(0, 4), regs=40)
    worker = lm.role(warps=range(4, 8), regs=232)
    y = lm.fragment("f32", (TM, TN), role=worker)
    m0, n0 = lm.block(0) * TM * TILES, lm.block(1) * TN
    with loader:
        for t in lm.range(0, TILES):
            empty[t % 2].wait(parity=(t // 2 + 1) % 2)
            full[0].arrive_expect_tx(bytes=lm.nbytes(x_s))
            x_s[t % 2].load(X, at=(m0 + t * TM, n0), barrier=full[0], pad=True)
    with worker:
        for t in lm.range(0, TILES):
            full[0].wait(parity=t % 2)
            lm.elementwise(y, x_s[t % 2], op="scale", alpha=2.5)
            lm.syncwarp()                         # every lane has read the stage
            empty[t % 2].arrive()
            lm.store(Y, at=(m0 + t * TM, n0), src=y, mask=True)
