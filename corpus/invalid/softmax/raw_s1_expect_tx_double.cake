"""corpus/valid/softmax/rows_raw_s1_loader_warp.cake with the producer warp arming `full[0]`
with twice the tile's bytes (65,536 for the 32,768 B the copy delivers): no phase of
`full` completes and the math warpgroup waits for its first tile forever. One defect:
the armed byte count."""
@cake.schedule(target="sm_90a", workload="softmax", sizes={"N": 128})
def softmax_rows_raw_s1(lm, X, Y):
    BR, TILES, S = 64, 4, 1
    lm.launch(grid=(lm.cdiv(lm.M, BR * TILES),), warps=8)
    x_s = lm.smem("f32", (BR, 128), stages=S)
    full = lm.mbarrier(count=1, stages=S)
    empty = lm.mbarrier(count=4, stages=S)                   # one arrive per math warp
    loader = lm.role(warps=range(0, 4), regs=24)
    math = lm.role(warps=range(4, 8), regs=240)
    mx = lm.fragment("f32", (BR,), role=math)
    sm = lm.fragment("f32", (BR,), role=math)
    e = lm.fragment("f32", (BR, 128), role=math)
    r0 = lm.block(0) * BR * TILES
    with loader:
        with lm.warps(0, 1):                                 # the producer warp
            for t in lm.range(0, TILES):
                empty[t % S].wait(parity=(t // S + 1) % 2)
                full[t % S].arrive_expect_tx(bytes=2 * lm.nbytes(x_s))  # expect: P003
                x_s[t % S].load(X, at=(r0 + t * BR, 0), barrier=full[t % S], pad=True)
    with math:
        for t in lm.range(0, TILES):
            full[t % S].wait(parity=(t // S) % 2)
            lm.reduce(mx, x_s[t % S], op="max", axis=1)
            lm.rowwise(e, x_s[t % S], mx, op="sub")           # last read of the stage
            lm.syncwarp()                                     # every lane has read it
            empty[t % S].arrive()
            lm.elementwise(e, e, op="exp")
            lm.reduce(sm, e, op="sum", axis=1)
            lm.rowwise(e, e, sm, op="div")
            lm.store(Y, at=(r0 + t * BR, 0), src=e, mask=True)
