"""valid/kmeans_assign/manual_init_thread_release_s6.cake with `empty` counting one
arrival too few: each of the 128 math threads releases its stage itself
(`arrive(per="thread")`) but the barrier is initialised for 127. Whatever the order of
the arrivals, the phase completes after 127 of them, before the last thread has read
the stage, and the loader refills it under that thread's read (race); the 128th arrival
lands in the next phase, which then completes one release early again. The repair is
the declared count (128), at the declaration."""
@cake.schedule(target="sm_90a", workload="kmeans_assign", sizes={"K": 16, "D": 64})
def kmeans_thread_release_count_127(lm, X, C, labels):
    BR, TILES, S = 64, 8, 6
    lm.launch(grid=(lm.cdiv(lm.N, BR * TILES),), warps=8)
    c_s = lm.smem("f32", (16, 64))
    x_s = lm.smem("f32", (BR, 64), stages=S)
    cbar = lm.mbarrier(count=1, init="manual")
    full = lm.mbarrier(count=1, stages=S, init="manual")
    empty = lm.mbarrier(count=127, stages=S, init="manual")   # expect: P002
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 8), regs=232)
    dist = lm.fragment("f32", (BR, 16), role=math)
    lab = lm.fragment("i32", (BR,), role=math)
    r0 = lm.block(0) * BR * TILES
    with loader:
        lm.sync_cta()                               # the math role's inits are visible
        cbar[0].arrive_expect_tx(bytes=lm.nbytes(c_s))
        c_s[0].load(C, at=(0, 0), barrier=cbar[0])
        for t in lm.range(0, TILES):
            empty[t % S].wait(parity=(t // S + 1) % 2)
            full[t % S].arrive_expect_tx(bytes=lm.nbytes(x_s))
            x_s[t % S].load(X, at=(r0 + t * BR, 0), barrier=full[t % S], pad=True)
    with math:
        cbar[0].init()
        for s in lm.range(0, S):
            full[s].init()
            empty[s].init()
        lm.fence_barrier_init()
        lm.sync_cta()
        cbar[0].wait(parity=0)
        for t in lm.range(0, TILES):
            full[t % S].wait(parity=(t // S) % 2)
            lm.sqdist(dist, x_s[t % S], c_s)
            empty[t % S].arrive(per="thread")       # each thread releases its own reads
            lm.reduce(lab, dist, op="argmin", axis=1)
            lm.store(labels, at=(r0 + t * BR,), src=lab, mask=True)
