"""Persistent k-means assignment: each CTA assigns two groups of four point tiles through
one 2-stage ring whose phases carry over from group to group (ring iteration
`g * TILES + t`). After each group the math role releases the group's last stage once
more (`ring.release(g * TILES + TILES - 1)`), although the loop already released it: the
empty barrier of that stage completes a phase no consumer finished. Phase trace (stage
1 = iterations 1, 3, 5, 7): math releases iteration 3 in the loop (phase 1 of
`ring.empty[1]`) and again after it (phase 2); the loader's acquire of iteration 5
waits for phase 1, the acquire of iteration 7 for phase 2, which is already complete,
so the loader overwrites stage 1 with tile 7 while math may still read tile 5 (race)."""
@cake.schedule(target="sm_90a", workload="kmeans_assign", sizes={"K": 16, "D": 64})
def kmeans_rows_s2_double_drain(lm, X, C, labels):
    BR, TILES, GROUPS = 64, 4, 2
    lm.launch(grid=(lm.cdiv(lm.N, BR * TILES * GROUPS),), warps=8)
    c_s = lm.smem("f32", (16, 64))
    x_s = lm.smem("f32", (BR, 64), stages=2)
    cbar = lm.mbarrier(count=1)
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 8), regs=232)
    dist = lm.fragment("f32", (BR, 16), role=math)
    lab = lm.fragment("i32", (BR,), role=math)
    ring = lm.pipeline(stages=2, buffers=[x_s], producer=loader, consumer=math)
    r0 = lm.block(0) * BR * TILES * GROUPS
    with loader:
        cbar[0].arrive_expect_tx(bytes=lm.nbytes(c_s))
        c_s[0].load(C, at=(0, 0), barrier=cbar[0])
        for g in lm.range(0, GROUPS):
            for t in lm.range(0, TILES):
                ring.acquire(g * TILES + t)
                x_s[ring.stage(g * TILES + t)].load(X, at=(r0 + (g * TILES + t) * BR, 0),
                                                     barrier=ring.full(g * TILES + t), pad=True)
    with math:
        cbar[0].wait(parity=0)
        for g in lm.range(0, GROUPS):
            for t in lm.range(0, TILES):
                ring.wait(g * TILES + t)
                lm.sqdist(dist, x_s[ring.stage(g * TILES + t)], c_s)
                ring.release(g * TILES + t)
                lm.reduce(lab, dist, op="argmin", axis=1)
                lm.store(labels, at=(r0 + (g * TILES + t) * BR,), src=lab, mask=True)
            ring.release(g * TILES + TILES - 1)  # expect: P009
