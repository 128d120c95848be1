"""Row softmax of one 32 x 128 tile per CTA whose result leaves through a 2-buffer staging
ring of 32 x 32 sub-tiles, each stored by the role's last warp (FlashAttention-3's
epilogue, `hopper/epilogue_fwd.hpp`: after a named barrier over the epilogue threads the
last warp issues the TMA store of O and later waits for it; CUTLASS's sm90 TMA epilogue
reuses its small staging buffer only after the store that read it has drained).

Per sub-tile c: the last warp waits until the store of sub-tile c - 2 has read its buffer
(`lm.store_wait(pending=1)` inside `with lm.warps(3, 4)`), the whole role meets at `epi`
so every warp knows the buffer is free, each thread copies the elements of its rows in
the window `e[:, c * CW:(c + 1) * CW]` into `y_s[c % 2]` and fences, the role meets again
so the tile is complete, and the last warp issues the bulk store."""
# expect: clean
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
            with lm.warps(3, 4):
                lm.store_wait(pending=1)                     # store c - 2 has read y_s[c % 2]
            epi.sync()                                       # ... and every warp knows it
            lm.elementwise(y_s[c % 2], e[:, c * CW:(c + 1) * CW], op="copy")
            lm.fence_proxy()                                 # generic writes -> bulk store
            epi.sync()                                       # every row of sub-tile c written
            with lm.warps(3, 4):                             # the last warp stores it
                y_s[c % 2].store_async(Y, at=(r0, c * CW))
        with lm.warps(3, 4):
            lm.store_wait(pending=0)                         # drained before exit
