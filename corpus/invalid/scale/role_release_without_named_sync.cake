"""Elementwise scale through a raw 7-stage ring whose worker hands each stage back with a
single arrival for the whole role (`per="role"`, `empty` count 1) but without the named
barrier over its 128 threads before it: the arrive of the role's elected thread releases
only that thread's reads of the stage. The loader's wait on `empty` then orders nothing
of what warps 5..7 (and the other lanes of warp 4) read, and its refill of the stage can
land while they still scale the old tile. Same as
corpus/valid/scale/manual_init_ring_s7.cake except `done.sync()` is gone (and with it
the named barrier)."""
@cake.schedule(target="sm_90a", workload="scale", divisible={"N": 4})
def scale_manual_init_ring_s7(lm, X, Y):
    TM, TN, TILES, S = 16, 256, 16, 7
    lm.launch(grid=(lm.cdiv(lm.M, TM * TILES), lm.cdiv(lm.N, TN)), warps=8)
    x_s = lm.smem("f32", (TM, TN), stages=S)
    full = lm.mbarrier(count=1, stages=S, init="manual")
    empty = lm.mbarrier(count=1, stages=S, init="manual")  # one arrive for the worker role

    loader = lm.role(warps=range(0, 4), regs=40)
    worker = lm.role(warps=range(4, 8), regs=232)
    y = lm.fragment("f32", (TM, TN), role=worker)
    m0, n0 = lm.block(0) * TM * TILES, lm.block(1) * TN
    with loader:
        for s in lm.range(0, S):
            full[s].init()
            empty[s].init()
        lm.fence_barrier_init()                         # make the inits visible
        lm.sync_cta()                                   # ... to every role
        for t in lm.range(0, TILES):
            empty[t % S].wait(parity=(t // S + 1) % 2)
            full[t % S].arrive_expect_tx(bytes=lm.nbytes(x_s))
            x_s[t % S].load(X, at=(m0 + t * TM, n0), barrier=full[t % S], pad=True)
    with worker:
        lm.sync_cta()
        for t in lm.range(0, TILES):
            full[t % S].wait(parity=(t // S) % 2)
            lm.elementwise(y, x_s[t % S], op="scale", alpha=2.5)
            empty[t % S].arrive(per="role")  # expect: P011
            lm.store(Y, at=(m0 + t * TM, n0), src=y, mask=True)
