"""Elementwise scale with a named-barrier hand-off whose 4-warp loader arms the tile barrier
once per warp (`per="warp"`): the phase expects 4 x 32,768 B and 4 arrivals for a count
of 1, the one copy delivers 32,768 B, and the loader deadlocks on its own wait.
Same as corpus/valid/scale/named_barrier_handoff.cake except the loader arms `full` with
`per="warp"`."""
@cake.schedule(target="sm_90a", workload="scale", divisible={"N": 4})
def scale_handoff_arm_per_warp(lm, X, Y):
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
        full[0].arrive_expect_tx(bytes=lm.nbytes(x_s), per="warp")  # expect: P004
        x_s[0].load(X, at=(m0, n0), barrier=full[0], pad=True)
        full[0].wait(parity=0)
        ready.arrive()
    with worker:
        ready.sync()
        lm.elementwise(y, x_s[0], op="scale", alpha=2.5)
        lm.store(Y, at=(m0, n0), src=y, mask=True)
