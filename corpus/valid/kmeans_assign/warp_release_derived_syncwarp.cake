"""k-means assignment on a raw 6-stage ring whose math role releases each stage once per
warp (`empty` count 4, `arrive()` with its default `per="warp"`) with no `lm.syncwarp()`
written before it. Legal under the convergence contract (docs/language.md): the lanes of
each math warp read `x_s` per thread, so the lowering emits `__syncwarp()` before the
elected arrive (axiom A11: only `__syncwarp` orders the lanes' accesses before the elected
lane's release). Derived from corpus/valid/kmeans_assign/manual_init_thread_release_s6.cake
with `count=4` and `arrive()`."""
# expect: clean
@cake.schedule(target="sm_90a", workload="kmeans_assign", sizes={"K": 16, "D": 64})
def kmeans_manual_init_thread_release_s6(lm, X, C, labels):
    BR, TILES, S = 64, 8, 6
    lm.launch(grid=(lm.cdiv(lm.N, BR * TILES),), warps=8)
    c_s = lm.smem("f32", (16, 64))
    x_s = lm.smem("f32", (BR, 64), stages=S)
    cbar = lm.mbarrier(count=1, init="manual")
    full = lm.mbarrier(count=1, stages=S, init="manual")
    empty = lm.mbarrier(count=4, stages=S, init="manual")     # one arrive per math warp
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
            empty[t % S].arrive()
            lm.reduce(lab, dist, op="argmin", axis=1)
            lm.store(labels, at=(r0 + t * BR,), src=lab, mask=True)
