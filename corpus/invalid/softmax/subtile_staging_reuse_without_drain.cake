"""The sub-tiled softmax epilogue of rows_subtile_store_last_warp.cake without the last
warp's `lm.store_wait(pending=1)`: the role refills `y_s[c % 2]` with sub-tile c while the
bulk store of sub-tile c - 2 may still be reading it through the async proxy."""
@cake.schedule(target="sm_90a", workload="softmax", sizes={"N": 128}, divisible={"M": 32})
def softmax_subtile_store_last_warp(lm, X, Y):
    BR, CW = 32, 32
    lm.launch(grid=(lm.cdiv(lm.M, BR),), warps=4)
    x_s = lm.smem("f32", (BR, 128))
    y_s = lm.smem("f32", (BR, CW), stages=2)                 # staging ring of sub-tiles
    full = lm.mbarrier(count=1)
    epi = lm.named_barrier(id=1, threads=128)
    worker = lm.role(warps=range(0, 4))
    mx = lm.fragment("f32", (BR,), role=worker)
    sm = lm.fragment("f32", (BR,), role=worker)
    e = lm.fragment("f32", (BR, 128), role=worker)
    r0 = lm.block(0) * BR
    with worker:
        full[0].arrive_expect_tx(bytes=lm.nbytes(x_s))
        x_s[0].load(X, at=(r0, 0), barrier=full[0])
        full[0].wait(parity=0)
        lm.reduce(mx, x_s[0], op="max", axis=1)
        lm.rowwise(e, x_s[0], mx, op="sub")
        lm.elementwise(e, e, op="exp")
        lm.reduce(sm, e, op="sum", axis=1)
        lm.rowwise(e, e, sm, op="div")
        for c in lm.range(0, 128 // CW):
            epi.sync()  # expect: P014
            lm.elementwise(y_s[c % 2], e[:, c * CW:(c + 1) * CW], op="copy")
            lm.fence_proxy()                                 # generic writes -> bulk store
            epi.sync()                                       # every row of sub-tile c written
            with lm.warps(3, 4):                             # the last warp stores it
                y_s[c % 2].store_async(Y, at=(r0, c * CW))
        with lm.warps(3, 4):
            lm.store_wait(pending=0)                         # drained before exit
