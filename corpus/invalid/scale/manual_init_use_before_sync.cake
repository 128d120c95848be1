"""Derived from corpus/valid/scale/tile_1stage.cake with the full barrier declared
`init="manual"`: the worker initialises it and fences the initialisation, but arms and
loads through it before `lm.sync_cta()`, the CTA-wide synchronisation that publishes the
initialisation to every thread. A barrier may be used only after init, fence and CTA
sync; here the elected thread's init is not yet guaranteed visible to the thread that
arms the barrier and to the copy engine that completes on it."""
@cake.schedule(target="sm_90a", workload="scale", divisible={"N": 4})
def scale_tile(lm, X, Y):
    TM, TN = 32, 256
    lm.launch(grid=(lm.cdiv(lm.M, TM), lm.cdiv(lm.N, TN)), warps=4)
    x_s = lm.smem("f32", (TM, TN))
    full = lm.mbarrier(count=1, init="manual")
    worker = lm.role(warps=range(0, 4))
    y = lm.fragment("f32", (TM, TN), role=worker)
    m0, n0 = lm.block(0) * TM, lm.block(1) * TN
    with worker:
        full[0].init()
        lm.fence_barrier_init()
        full[0].arrive_expect_tx(bytes=lm.nbytes(x_s))  # expect: P012
        x_s[0].load(X, at=(m0, n0), barrier=full[0], pad=True)
        lm.sync_cta()                                   # too late: full[0] already used
        full[0].wait(parity=0)
        lm.elementwise(y, x_s[0], op="scale", alpha=2.5)
        lm.store(Y, at=(m0, n0), src=y, mask=True)
