"""Elementwise scale with a manually initialised full barrier that one role both
initialises and uses: the elected thread that runs `full[0].init()` also arms the
barrier (program order orders its own operations), `lm.fence_barrier_init()` makes the
initialisation visible to the async proxy before the bulk copy that completes on it is
issued (the lowering synchronises the role before the copy, so the copying lanes are
ordered after the fence too), and `lm.sync_cta()` orders it before every other thread's
wait. Phase trace: init (count 1) -> fence -> arm 32,768 B (pending 0, tx 32,768) ->
copy lands (tx 0: phase 0 completes) -> after the CTA sync every thread waits parity 0
and observes phase 0. Using the barrier before the CTA sync is legal here because every
use before it is by the thread that initialised it or ordered after its fence."""
# expect: clean
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
        full[0].arrive_expect_tx(bytes=lm.nbytes(x_s))
        x_s[0].load(X, at=(m0, n0), barrier=full[0], pad=True)
        lm.sync_cta()                                   # publishes the init to every thread
        full[0].wait(parity=0)
        lm.elementwise(y, x_s[0], op="scale", alpha=2.5)
        lm.store(Y, at=(m0, n0), src=y, mask=True)
