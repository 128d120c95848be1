"""Elementwise scale with a manually initialised full barrier: the one-warp loader
initialises it, fences the initialisation, arms it and loads the tile, and only then
meets the worker at `lm.sync_cta()`. The worker waits on the barrier before that CTA
sync, so nothing orders the loader's `mbarrier.init` before the worker's
`try_wait.parity`: the worker may poll a barrier that is not initialised yet (PTX ISA:
an mbarrier is used only after `mbarrier.init` is visible to the using thread), and the
sync that would publish it comes after the wait. Phase trace: loader init (count 1),
fence, arm; worker wait parity 0 -- unordered with the init."""
@cake.schedule(target="sm_90a", workload="scale", divisible={"N": 4})
def scale_manual_init_waiter_early(lm, X, Y):
    TM, TN = 32, 256
    lm.launch(grid=(lm.cdiv(lm.M, TM), lm.cdiv(lm.N, TN)), warps=5)
    x_s = lm.smem("f32", (TM, TN))
    full = lm.mbarrier(count=1, init="manual")
    loader = lm.role(warps=range(0, 1))
    worker = lm.role(warps=range(1, 5))
    y = lm.fragment("f32", (TM, TN), role=worker)
    m0, n0 = lm.block(0) * TM, lm.block(1) * TN
    with loader:
        full[0].init()
        lm.fence_barrier_init()
        full[0].arrive_expect_tx(bytes=lm.nbytes(x_s))
        x_s[0].load(X, at=(m0, n0), barrier=full[0], pad=True)
        lm.sync_cta()
    with worker:
        full[0].wait(parity=0)  # expect: P012
        lm.sync_cta()
        lm.elementwise(y, x_s[0], op="scale", alpha=2.5)
        lm.store(Y, at=(m0, n0), src=y, mask=True)
