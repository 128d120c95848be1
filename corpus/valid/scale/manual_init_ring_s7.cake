"""Elementwise scale through a raw 7-stage ring whose barriers the schedule initialises
itself (`init="manual"`): the loader's elected thread runs `init()` on the 14 barriers,
`lm.fence_barrier_init()` publishes them to the other threads and to the copy engine, and
both roles meet at `lm.sync_cta()` before anyone waits, arrives or copies. The worker
hands each stage back with a single arrival for the whole role (`per="role"`, `empty`
count 1), after a named barrier over its 128 threads (`bar.sync 1, 128`) has ordered
every thread's reads of the stage before that one arrive. Parities are the phase
parities of a 7-stage ring: full `(t // 7) % 2`, empty `(t // 7 + 1) % 2`; with 16
tiles per CTA stages 0 and 1 go round three times."""
# expect: clean
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
            lm.fence_proxy()                             # generic reads before the TMA refill (A19)
            done.sync()                                 # every thread has read the stage
            empty[t % S].arrive(per="role")
            lm.store(Y, at=(m0 + t * TM, n0), src=y, mask=True)
