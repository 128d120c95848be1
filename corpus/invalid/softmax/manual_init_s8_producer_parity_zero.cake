"""Derived from corpus/valid/softmax/rows_manual_init_s8.cake with the loader's
empty-barrier wait written with the consumer's parity, `(t // 8) % 2`: on the freshly
initialised `empty[0]` the loader waits for phase 0, a release of stage 0 by the math
role, which cannot come before the loader has filled stage 0. Nobody moves (deadlock).
A producer's first pass over a ring waits with parity 1, which the fresh barrier passes."""
@cake.schedule(target="sm_90a", workload="softmax", sizes={"N": 128})
def softmax_manual_init_s8_parity0(lm, X, Y):
    BR, TILES, S = 32, 16, 8
    lm.launch(grid=(lm.cdiv(lm.M, BR * TILES),), warps=5)
    x_s = lm.smem("f32", (BR, 128), stages=S)
    full = lm.mbarrier(count=1, stages=S, init="manual")
    empty = lm.mbarrier(count=4, stages=S, init="manual")    # one arrive per math warp
    loader = lm.role(warps=range(0, 1))
    math = lm.role(warps=range(1, 5))
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
            empty[t % S].wait(parity=(t // S) % 2)  # expect: P005
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
