"""Derived from corpus/valid/scale/named_barrier_handoff.cake with a second `ready.sync()`
in the worker: the worker reaches named barrier 1 twice, the loader once, so the second
`bar.sync 1, 256` waits for 128 threads that never come (deadlock). R007 is satisfied:
the two roles that use the barrier do add up to its 256 threads."""
@cake.schedule(target="sm_90a", workload="scale", divisible={"N": 4})
def scale_handoff_extra_sync(lm, X, Y):
    TM, TN = 32, 256
    lm.launch(grid=(lm.cdiv(lm.M, TM), lm.cdiv(lm.N, TN)), warps=8)
    x_s = lm.smem("f32", (TM, TN))
    full = lm.mbarrier(count=1)
    ready = lm.named_barrier(id=1, threads=256)
    loader = lm.role(warps=range(0, 4))
    worker = lm.role(warps=range(4, 8))
    y = lm.fragment("f32", (TM, TN), role=worker)
    m0, n0 = lm.block(0) * TM, lm.block(1) * TN
    with loader:
        full[0].arrive_expect_tx(bytes=lm.nbytes(x_s))
        x_s[0].load(X, at=(m0, n0), barrier=full[0], pad=True)
        full[0].wait(parity=0)
        ready.arrive()
    with worker:
        ready.sync()
        lm.elementwise(y, x_s[0], op="scale", alpha=2.5)
        ready.sync()  # expect: P015
        lm.store(Y, at=(m0, n0), src=y, mask=True)
