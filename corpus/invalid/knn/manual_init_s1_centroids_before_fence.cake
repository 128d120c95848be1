"""Derived from corpus/valid/knn/rows_manual_init_s1.cake with the centroid copy started
right after the barrier inits, before `lm.fence_barrier_init()` ("to get the copy going
as early as possible"): the bulk copy completes on `cbar[0]` through the async proxy,
which the plain `mbarrier.init` store is not ordered before until the fence; the copy's
`complete_tx` may reach a barrier word that does not yet hold the initialised state
(undefined: a phase that never completes or completes early)."""
@cake.schedule(target="sm_90a", workload="knn", sizes={"K": 16, "D": 64, "T": 4})
def knn_manual_init_s1_copy_before_fence(lm, X, C, idx):
    BR, TILES, S = 32, 8, 1
    lm.launch(grid=(lm.cdiv(lm.N, BR * TILES),), warps=5)
    c_s = lm.smem("f32", (16, 64))
    x_s = lm.smem("f32", (BR, 64), stages=S)
    cbar = lm.mbarrier(count=1, init="manual")
    full = lm.mbarrier(count=1, stages=S, init="manual")
    empty = lm.mbarrier(count=4, stages=S, init="manual")    # one arrive per math warp
    loader = lm.role(warps=range(0, 1))
    math = lm.role(warps=range(1, 5))
    dist = lm.fragment("f32", (BR, 16), role=math)
    nn = lm.fragment("i32", (BR, 4), role=math)
    r0 = lm.block(0) * BR * TILES
    with loader:
        cbar[0].init()
        full[0].init()
        empty[0].init()
        cbar[0].arrive_expect_tx(bytes=lm.nbytes(c_s))
        c_s[0].load(C, at=(0, 0), barrier=cbar[0])  # expect: P012
        lm.fence_barrier_init()                              # make the inits visible
        lm.sync_cta()                                        # ... to every role
        for t in lm.range(0, TILES):
            empty[t % S].wait(parity=(t // S + 1) % 2)
            full[t % S].arrive_expect_tx(bytes=lm.nbytes(x_s))
            x_s[t % S].load(X, at=(r0 + t * BR, 0), barrier=full[t % S], pad=True)
    with math:
        lm.sync_cta()                                        # barriers initialised
        cbar[0].wait(parity=0)
        for t in lm.range(0, TILES):
            full[t % S].wait(parity=(t // S) % 2)
            lm.sqdist(dist, x_s[t % S], c_s)
            lm.syncwarp()                                    # every lane has read x_s
            empty[t % S].arrive()
            lm.topk(nn, dist, k=4)
            lm.store(idx, at=(r0 + t * BR, 0), src=nn, mask=True)
