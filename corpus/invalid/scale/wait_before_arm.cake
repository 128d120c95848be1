"""Derived from corpus/valid/scale/tile_1stage.cake with `full[0].wait(parity=0)` moved
before the arming and the load: the worker waits for phase 0 of `full[0]`, which only its
own later `arrive_expect_tx` and bulk copy can complete. The wait-for graph has the cycle
worker -> full[0] -> worker (deadlock). Counts, bytes and parity are all right."""
@cake.schedule(target="sm_90a", workload="scale", divisible={"N": 4})
def scale_tile_wait_first(lm, X, Y):
    TM, TN = 32, 256
    lm.launch(grid=(lm.cdiv(lm.M, TM), lm.cdiv(lm.N, TN)), warps=4)
    x_s = lm.smem("f32", (TM, TN))
    full = lm.mbarrier(count=1)
    worker = lm.role(warps=range(0, 4))
    y = lm.fragment("f32", (TM, TN), role=worker)
    m0, n0 = lm.block(0) * TM, lm.block(1) * TN
    with worker:
        full[0].wait(parity=0)  # expect: P016
        full[0].arrive_expect_tx(bytes=lm.nbytes(x_s))
        x_s[0].load(X, at=(m0, n0), barrier=full[0], pad=True)
        lm.elementwise(y, x_s[0], op="scale", alpha=2.5)
        lm.store(Y, at=(m0, n0), src=y, mask=True)
