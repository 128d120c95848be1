"""Persistent elementwise scale through a 1-stage ring: each CTA scales two groups of four
row tiles, the ring's phases carrying over from group to group (iteration
`g * TILES + t`). After each group the worker releases the stage once more
(`ring.release(0)`), though the loop already released every tile it took: the empty
barrier completes a phase no consumer finished. Phase trace: in group 0 the worker's
releases complete phases 0..3 of `ring.empty[0]` and the extra release phase 4; the
loader's acquire of iteration 5 (group 1) waits for phase 4 with parity 0, which is
complete, so it refills the stage while the worker may still scale tile 4 (race)."""
@cake.schedule(target="sm_90a", workload="scale", divisible={"N": 4})
def scale_ring_1stage_extra_release(lm, X, Y):
    TM, TN, TILES, GROUPS = 16, 256, 4, 2
    lm.launch(grid=(lm.cdiv(lm.M, TM * TILES * GROUPS), lm.cdiv(lm.N, TN)), warps=8)
    x_s = lm.smem("f32", (TM, TN), stages=1)
    loader = lm.role(warps=range(0, 4))
    worker = lm.role(warps=range(4, 8))
    y = lm.fragment("f32", (TM, TN), role=worker)
    ring = lm.pipeline(stages=1, buffers=[x_s], producer=loader, consumer=worker)
    m0, n0 = lm.block(0) * TM * TILES * GROUPS, lm.block(1) * TN
    with loader:
        for g in lm.range(0, GROUPS):
            for t in lm.range(0, TILES):
                ring.acquire(g * TILES + t)
                x_s[ring.stage(g * TILES + t)].load(X, at=(m0 + (g * TILES + t) * TM, n0),
                                                     barrier=ring.full(g * TILES + t), pad=True)
    with worker:
        for g in lm.range(0, GROUPS):
            for t in lm.range(0, TILES):
                ring.wait(g * TILES + t)
                lm.elementwise(y, x_s[ring.stage(g * TILES + t)], op="scale", alpha=2.5)
                ring.release(g * TILES + t)
                lm.store(Y, at=(m0 + (g * TILES + t) * TM, n0), src=y, mask=True)
            ring.release(0)  # expect: P009
