"""Derived from corpus/valid/softmax/rows_manual_init_s8.cake with the loader's CTA
barrier moved above the initialisation loop ("meet first, then set up"): the math role
leaves `lm.sync_cta()` and waits on `full[0]` while the loader may not yet have run
`full[0].init()`, so the wait reads a barrier word that still holds whatever the
previous CTA left there (undefined: a hang or a phase that appears complete). The inits
and their fence must come before the CTA sync that publishes them."""
@cake.schedule(target="sm_90a", workload="softmax", sizes={"N": 128})
def softmax_manual_init_s8_late_init(lm, X, Y):
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
        lm.sync_cta()                                        # meet the math role first
        for s in lm.range(0, S):
            full[s].init()
            empty[s].init()
        lm.fence_barrier_init()
        for t in lm.range(0, TILES):
            empty[t % S].wait(parity=(t // S + 1) % 2)
            full[t % S].arrive_expect_tx(bytes=lm.nbytes(x_s))
            x_s[t % S].load(X, at=(r0 + t * BR, 0), barrier=full[t % S], pad=True)
    with math:
        lm.sync_cta()                                        # barriers initialised
        for t in lm.range(0, TILES):
            full[t % S].wait(parity=(t // S) % 2)  # expect: P012
            lm.reduce(mx, x_s[t % S], op="max", axis=1)
            lm.rowwise(e, x_s[t % S], mx, op="sub")
            lm.syncwarp()                                    # every lane has read the stage
            empty[t % S].arrive()
            lm.elementwise(e, e, op="exp")
            lm.reduce(sm, e, op="sum", axis=1)
            lm.rowwise(e, e, sm, op="div")
            lm.store(Y, at=(r0 + t * BR, 0), src=e, mask=True)
