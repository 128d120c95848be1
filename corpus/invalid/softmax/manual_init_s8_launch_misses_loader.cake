"""Derived from corpus/valid/softmax/rows_manual_init_s8.cake with the launch sized for
the math warpgroup only (`warps=4`), forgetting the one-warp loader role in front of it:
the math role's warps 1..4 reach past the 4 launched warps, so warp 4 never runs, its
arrivals on `empty` never come and its rows are never written. Roles must partition the
launched warps exactly (5 here)."""
@cake.schedule(target="sm_90a", workload="softmax", sizes={"N": 128})
def softmax_manual_init_s8_warps4(lm, X, Y):
    BR, TILES, S = 32, 16, 8
    lm.launch(grid=(lm.cdiv(lm.M, BR * TILES),), warps=4)
    x_s = lm.smem("f32", (BR, 128), stages=S)
    full = lm.mbarrier(count=1, stages=S, init="manual")
    empty = lm.mbarrier(count=4, stages=S, init="manual")    # one arrive per math warp
    loader = lm.role(warps=range(0, 1))
    math = lm.role(warps=range(1, 5))  # expect: R006
    mx = lm.fragment("f32", (BR,), role=math)
    sm = lm.fragment("f32", (BR,), role=math)
    e = lm.fragment("f32", (BR, 128), role=math)
    r0 = lm.block(0) * BR * TILES
    with loader:
        for s in lm.range(0, S):
            full[s].init()
            empty[s].init()
        lm.fence_barrier_init()                              # make the inits visible
        lm.sync_cta()                                        # ... to every role
        for t in lm.range(0, TILES):
            empty[t % S].wait(parity=(t // S + 1) % 2)
            full[t % S].arrive_expect_tx(bytes=lm.nbytes(x_s))
            x_s[t % S].load(X, at=(r0 + t * BR, 0), barrier=full[t % S], pad=True)
    with math:
        lm.sync_cta()                                        # barriers initialised
        for t in lm.range(0, TILES):
            full[t % S].wait(parity=(t // S) % 2)
            lm.reduce(mx, x_s[t % S], op="max", axis=1)
            lm.rowwise(e, x_s[t % S], mx, op="sub")
            lm.syncwarp()                                    # every lane has read the stage
            empty[t % S].arrive()
            lm.elementwise(e, e, op="exp")
            lm.reduce(sm, e, op="sum", axis=1)
            lm.rowwise(e, e, sm, op="div")
            lm.store(Y, at=(r0 + t * BR, 0), src=e, mask=True)
