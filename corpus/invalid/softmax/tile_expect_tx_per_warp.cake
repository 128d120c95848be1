"""Derived from corpus/valid/softmax/tile_store_async.cake with the input barrier armed by
every warp of the worker warpgroup (`arrive_expect_tx(..., per="warp")`), the way a
schedule arms when it believes each warp waits for its own rows: the one bulk copy
delivers 16,384 B, but the four warps arm 4 x 16,384 B and bring 4 arrivals to a barrier
declared with count 1. The first arrival is the whole count, the others arrive on a phase
whose arrivals are all in (over-arrival), and the phase waits for 49,152 B that never
come: the worker deadlocks on `full[0].wait(parity=0)`. Arm once (`per="role"`)."""
@cake.schedule(target="sm_90a", workload="softmax", sizes={"N": 128}, divisible={"M": 32})
def softmax_tile_expect_tx_per_warp(lm, X, Y):
    BR = 32
    lm.launch(grid=(lm.cdiv(lm.M, BR),), warps=4)
    x_s = lm.smem("f32", (BR, 128))
    y_s = lm.smem("f32", (BR, 128))
    full = lm.mbarrier(count=1)
    worker = lm.role(warps=range(0, 4))
    mx = lm.fragment("f32", (BR,), role=worker)
    sm = lm.fragment("f32", (BR,), role=worker)
    e = lm.fragment("f32", (BR, 128), role=worker)
    r0 = lm.block(0) * BR
    with worker:
        full[0].arrive_expect_tx(bytes=lm.nbytes(x_s), per="warp")  # expect: P004
        x_s[0].load(X, at=(r0, 0), barrier=full[0])
        full[0].wait(parity=0)
        lm.reduce(mx, x_s[0], op="max", axis=1)
        lm.rowwise(e, x_s[0], mx, op="sub")
        lm.elementwise(e, e, op="exp")
        lm.reduce(sm, e, op="sum", axis=1)
        lm.rowwise(e, e, sm, op="div")
        lm.elementwise(y_s[0], e, op="copy")
        lm.fence_proxy()                                      # generic writes -> async proxy
        y_s[0].store_async(Y, at=(r0, 0))
        lm.store_wait(pending=0)                              # drained before exit
