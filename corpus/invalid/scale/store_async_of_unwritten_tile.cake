"""Derived from corpus/valid/scale/store_async_epilogue.cake with the scaled tile computed
into a register fragment `y` instead of the shared-memory tile `y_s`: the bulk store then
copies `y_s`, which nothing ever writes, so Y receives whatever the shared memory held
(uninitialised data) while the result is dropped."""
@cake.schedule(target="sm_90a", workload="scale", divisible={"M": 32, "N": 256})
def scale_store_async(lm, X, Y):
    TM, TN = 32, 256
    lm.launch(grid=(lm.cdiv(lm.M, TM), lm.cdiv(lm.N, TN)), warps=4)
    x_s = lm.smem("f32", (TM, TN))
    y_s = lm.smem("f32", (TM, TN))
    full = lm.mbarrier(count=1)
    worker = lm.role(warps=range(0, 4))
    y = lm.fragment("f32", (TM, TN), role=worker)
    m0, n0 = lm.block(0) * TM, lm.block(1) * TN
    with worker:
        full[0].arrive_expect_tx(bytes=lm.nbytes(x_s))
        x_s[0].load(X, at=(m0, n0), barrier=full[0])
        full[0].wait(parity=0)
        lm.elementwise(y, x_s[0], op="scale", alpha=2.5)     # result lands in registers
        lm.fence_proxy()                                      # generic writes -> async proxy
        y_s[0].store_async(Y, at=(m0, n0))  # expect: P018
        lm.store_wait(pending=0)                              # drained before exit
