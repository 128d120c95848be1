"""Derived from corpus/valid/softmax/rows_manual_init_s8.cake for rows of 256 logits
(`sizes={"N": 256}`) with the ring depth kept at 8: each stage of `x_s` is now 32 x 256
x 4 = 32,768 bytes, 262,144 bytes for the ring, more than the 232,448 bytes of dynamic
shared memory a CTA may have on sm_90a. The launch fails."""
@cake.schedule(target="sm_90a", workload="softmax", sizes={"N": 256})
def softmax_manual_init_s8_n256(lm, X, Y):
    BR, TILES, S = 32, 16, 8
    lm.launch(grid=(lm.cdiv(lm.M, BR * TILES),), warps=5)
    x_s = lm.smem("f32", (BR, 256), stages=S)  # expect: R001
    full = lm.mbarrier(count=1, stages=S, init="manual")
    empty = lm.mbarrier(count=4, stages=S, init="manual")    # one arrive per math warp
    loader = lm.role(warps=range(0, 1))
    math = lm.role(warps=range(1, 5))
    mx = lm.fragment("f32", (BR,), role=math)
    sm = lm.fragment("f32", (BR,), role=math)
    e = lm.fragment("f32", (BR, 256), role=math)
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
