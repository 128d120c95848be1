"""Elementwise scale through a raw 7-stage ring with manually initialised barriers whose
loader skips `lm.fence_barrier_init()` between its `init()`s and the CTA sync: the
`bar.sync 0` orders the initialisation before the worker's generic-proxy waits, but the
copy engine completes the bulk copies' bytes on `full` through the async proxy, and only
`fence.mbarrier_init.release.cluster` makes an `mbarrier.init` visible to it. The first
copies may complete their transactions on a barrier the async proxy still sees
uninitialised. Same as corpus/valid/scale/manual_init_ring_s7.cake except the fence is
gone."""
@cake.schedule(target="sm_90a", workload="scale", divisible={"N": 4})
def scale_manual_init_ring_s7(lm, X, Y):
    TM, TN, TILES, S = 16, 256, 16, 7
    lm.launch(grid=(lm.cdiv(lm.M, TM * TILES), lm.cdiv(lm.N, TN)), warps=8)
    x_s = lm.smem("f32", (TM, TN), stages=S)
    full = lm.mbarrier(count=1, stages=S, init="manual")
    empty = lm.mbarrier(count=1, stages=S, init="manual")  # one arrive for the worker role
    done = lm.named_barrier(id=1, threads=128)          # the worker's 4 warps
    loader = lm.role(warps=range(0, 4), regs=40)
    worker = lm.role(warps=range(4, 8), regs=232)
    y = lm.fragment("f32", (TM, TN), role=worker)
    m0, n0 = lm.block(0) * TM * TILES, lm.block(1) * TN
    with loader:
        for s in lm.range(0, S):
            full[s].init()
            empty[s].init()

        lm.sync_cta()                                   # ... to every role
        for t in lm.range(0, TILES):
            empty[t % S].wait(parity=(t // S + 1) % 2)
            full[t % S].arrive_expect_tx(bytes=lm.nbytes(x_s))
            x_s[t % S].load(X, at=(m0 + t * TM, n0), barrier=full[t % S], pad=True)  # expect: P012
    with worker:
        lm.sync_cta()
        for t in lm.range(0, TILES):
            full[t % S].wait(parity=(t // S) % 2)
            lm.elementwise(y, x_s[t % S], op="scale", alpha=2.5)
            lm.fence_proxy()                             # generic reads before the TMA refill (A19)
            done.sync()                                 # every thread has read the stage
            empty[t % S].arrive(per="role")
            lm.store(Y, at=(m0 + t * TM, n0), src=y, mask=True)
