"""Derived from corpus/valid/scale/store_async_epilogue.cake with `lm.fence_proxy()` deleted:
the worker writes `y_s` with generic stores (`lm.elementwise`) and then hands it to the
bulk store, which reads shared memory through the async proxy. Without
`fence.proxy.async` between the two, the bulk store may read stale data: the generic
writes are not ordered before async-proxy reads even in the same thread."""
@cake.schedule(target="sm_90a", workload="scale", divisible={"M": 32, "N": 256})
def scale_store_async(lm, X, Y):
    TM, TN = 32, 256
    lm.launch(grid=(lm.cdiv(lm.M, TM), lm.cdiv(lm.N, TN)), warps=4)
    x_s = lm.smem("f32", (TM, TN))
    y_s = lm.smem("f32", (TM, TN))
    full = lm.mbarrier(count=1)
    worker = lm.role(warps=range(0, 4))
    m0, n0 = lm.block(0) * TM, lm.block(1) * TN
    with worker:
        full[0].arrive_expect_tx(bytes=lm.nbytes(x_s))
        x_s[0].load(X, at=(m0, n0), barrier=full[0])
        full[0].wait(parity=0)
        lm.elementwise(y_s[0], x_s[0], op="scale", alpha=2.5)  # expect: P013
        y_s[0].store_async(Y, at=(m0, n0))
        lm.store_wait(pending=0)                              # drained before exit
