"""Derived from corpus/valid/softmax/tile_store_async.cake for rows of 50 logits (a
50-class classifier head, `sizes={"N": 50}`): a row of X and Y is 200 bytes, not a
multiple of the 16 bytes `cp.async.bulk` copies, and row m starts at byte 200 m of the
tensor, so most rows are not 16-byte aligned either. Neither the bulk load nor the bulk
store can move such rows (a misaligned-address error on the device)."""
@cake.schedule(target="sm_90a", workload="softmax", sizes={"N": 50}, divisible={"M": 32})
def softmax_tile_n50(lm, X, Y):
    BR = 32
    lm.launch(grid=(lm.cdiv(lm.M, BR),), warps=4)
    x_s = lm.smem("f32", (BR, 50))
    y_s = lm.smem("f32", (BR, 50))
    full = lm.mbarrier(count=1)
    worker = lm.role(warps=range(0, 4))
    mx = lm.fragment("f32", (BR,), role=worker)
    sm = lm.fragment("f32", (BR,), role=worker)
    e = lm.fragment("f32", (BR, 50), role=worker)
    r0 = lm.block(0) * BR
    with worker:
        full[0].arrive_expect_tx(bytes=lm.nbytes(x_s))
        x_s[0].load(X, at=(r0, 0), barrier=full[0])  # expect: H002
        full[0].wait(parity=0)
        lm.reduce(mx, x_s[0], op="max", axis=1)
        lm.rowwise(e, x_s[0], mx, op="sub")
        lm.elementwise(e, e, op="exp")
        lm.reduce(sm, e, op="sum", axis=1)
        lm.rowwise(e, e, sm, op="div")
        lm.elementwise(y_s[0], e, op="copy")
        lm.fence_proxy()                                      # generic writes -> async proxy
        y_s[0].store_async(Y, at=(r0, 0))  # expect: H002
        lm.store_wait(pending=0)                              # drained before exit
