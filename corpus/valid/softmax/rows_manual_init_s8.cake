"""Row softmax through an 8-stage raw ring whose barriers the schedule initialises
itself (`init="manual"`): the loader, a role of one warp, initialises every `full` and
`empty` barrier, fences the inits (`fence.mbarrier_init`) and meets the math role at
`lm.sync_cta()` before anything uses them; the math role (warps 1..4, no register
budget: neither role is an aligned warpgroup) meets it there first. Then the loader
streams 16 tiles of 32 rows through the 8 stages (each stage twice per CTA: `full`
parity `(t // 8) % 2` for math, `empty` parity `(t // 8 + 1) % 2` for the loader), and
each math warp syncs its lanes before its elected lane releases the stage (`empty`
counts 4 warps)."""
# expect: clean
@cake.schedule(target="sm_90a", workload="softmax", sizes={"N": 128})
def softmax_rows_manual_init_s8(lm, X, Y):
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
