"""Derived from corpus/valid/softmax/rows_subtile_store_last_warp.cake with an extra
`epi.sync()` in the last warp's final block, meant to let warp 3 drain its bulk stores
only "once every warp is done": warps 0..2 never reach that use (they leave the role
body after the loop), so its instance of named barrier 1 gets warp 3's 32 threads of the
128 it is declared for and never completes. Warp 3 waits forever and its stores are
never drained (deadlock). The loop's last `epi.sync()` already orders every warp's
writes; the drain needs no barrier."""
@cake.schedule(target="sm_90a", workload="softmax", sizes={"N": 128}, divisible={"M": 32})
def softmax_subtile_drain_sync(lm, X, Y):
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
            with lm.warps(3, 4):
                lm.store_wait(pending=1)                     # store c - 2 has read y_s[c % 2]
            epi.sync()                                       # ... and every warp knows it
            lm.elementwise(y_s[c % 2], e[:, c * CW:(c + 1) * CW], op="copy")
            lm.fence_proxy()                                 # generic writes -> bulk store
            epi.sync()                                       # every row of sub-tile c written
            with lm.warps(3, 4):                             # the last warp stores it
                y_s[c % 2].store_async(Y, at=(r0, c * CW))
        with lm.warps(3, 4):
            epi.sync()                                       # expect: P015
            lm.store_wait(pending=0)                         # drained before exit
