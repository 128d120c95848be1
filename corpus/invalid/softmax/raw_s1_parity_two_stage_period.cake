"""Derived from corpus/valid/softmax/rows_raw_s1_loader_warp.cake with the math role's
full-barrier parity kept from a 2-stage version of the ring (`(t // 2) % 2`) after the
ring was cut to one stage: with S = 1 every tile completes one phase of `full[0]`, so
the parity must flip at every tile (`t % 2`). At t = 1 the wait asks for parity 0 again:
if tile 1's copy has not landed yet it passes on phase 0 (tile 0's copy) and the math
role reads `x_s` while the copy is writing it (race); if it has landed (phase 1 complete)
the wait is for phase 2, which needs a release of tile 1 that the math role never gets
to make (deadlock: the simulator's runs end this way)."""
@cake.schedule(target="sm_90a", workload="softmax", sizes={"N": 128})
def softmax_raw_s1_parity_period2(lm, X, Y):
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
                full[t % S].arrive_expect_tx(bytes=lm.nbytes(x_s))
                x_s[t % S].load(X, at=(r0 + t * BR, 0), barrier=full[t % S], pad=True)
    with math:
        for t in lm.range(0, TILES):
            full[t % S].wait(parity=(t // 2) % 2)  # expect: P006
            lm.reduce(mx, x_s[t % S], op="max", axis=1)
            lm.rowwise(e, x_s[t % S], mx, op="sub")           # last read of the stage
            lm.syncwarp()                                     # every lane has read it
            empty[t % S].arrive()
            lm.elementwise(e, e, op="exp")
            lm.reduce(sm, e, op="sum", axis=1)
            lm.rowwise(e, e, sm, op="div")
            lm.store(Y, at=(r0 + t * BR, 0), src=e, mask=True)
