"""Elementwise scale split over two roles, where the loader warpgroup scales the tile into
the worker's register fragment `y` before signalling the named barrier. Registers belong
to the threads of one role: the worker's copy of `y` is never written, so it stores
garbage."""
@cake.schedule(target="sm_90a", workload="scale", divisible={"N": 4})
def scale_handoff_foreign_fragment(lm, X, Y):
    TM, TN = 32, 256
    lm.launch(grid=(lm.cdiv(lm.M, TM), lm.cdiv(lm.N, TN)), warps=8)
    x_s = lm.smem("f32", (TM, TN))
    full = lm.mbarrier(count=1)
    ready = lm.named_barrier(id=1, threads=256)     # loader 128 + worker 128 threads
    loader = lm.role(warps=range(0, 4))
    worker = lm.role(warps=range(4, 8))
    y = lm.fragment("f32", (TM, TN), role=worker)
    m0, n0 = lm.block(0) * TM, lm.block(1) * TN
    with loader:
        full[0].arrive_expect_tx(bytes=lm.nbytes(x_s))
        x_s[0].load(X, at=(m0, n0), barrier=full[0], pad=True)
        full[0].wait(parity=0)
        lm.elementwise(y, x_s[0], op="scale", alpha=2.5)  # expect: R020
        ready.arrive()
    with worker:
        ready.sync()
        lm.store(Y, at=(m0, n0), src=y, mask=True)
