"""Elementwise scale through a raw 3-stage ring: a loader warpgroup (`regs=40`) streams six
32 x 256 row tiles per CTA into `x_s`, two worker warpgroups (8 warps, `regs=232`: 128 x 40
+ 256 x 232 = 64,512 of the 65,536 registers) scale each tile in registers and store it.
`full` counts the loader's one arming arrival per phase, `empty` one arrive per worker
warp (8); each worker warp orders its lanes' reads of the stage with `lm.syncwarp()`
before its elected lane arrives. Parities: the workers wait `full[t % 3]` with
`(t // 3) % 2`, the loader waits `empty[t % 3]` with `(t // 3 + 1) % 2`, so its first
pass over each stage goes through on the fresh barrier. Phase trace, stage 0: t = 0 full
phase 0 (32,768 B), empty phase 0 after the 8 releases; t = 3 loader observes empty
phase 0, workers observe full phase 1."""
# expect: clean
@cake.schedule(target="sm_90a", workload="scale", divisible={"N": 4})
def scale_raw_ring_s3(lm, X, Y):
    TM, TN, TILES, S = 32, 256, 6, 3
    lm.launch(grid=(lm.cdiv(lm.M, TM * TILES), lm.cdiv(lm.N, TN)), warps=12)
    x_s = lm.smem("f32", (TM, TN), stages=S)
    full = lm.mbarrier(count=1, stages=S)
    empty = lm.mbarrier(count=8, stages=S)              # one arrive per worker warp
    loader = lm.role(warps=range(0, 4), regs=40)
    worker = lm.role(warps=range(4, 12), regs=232)
    y = lm.fragment("f32", (TM, TN), role=worker)
    m0, n0 = lm.block(0) * TM * TILES, lm.block(1) * TN
    with loader:
        for t in lm.range(0, TILES):
            empty[t % S].wait(parity=(t // S + 1) % 2)
            full[t % S].arrive_expect_tx(bytes=lm.nbytes(x_s))
            x_s[t % S].load(X, at=(m0 + t * TM, n0), barrier=full[t % S], pad=True)
    with worker:
        for t in lm.range(0, TILES):
            full[t % S].wait(parity=(t // S) % 2)
            lm.elementwise(y, x_s[t % S], op="scale", alpha=2.5)
            lm.syncwarp()                               # every lane has read the stage
            empty[t % S].arrive()
            lm.store(Y, at=(m0 + t * TM, n0), src=y, mask=True)
