"""Scale schedule for benchmarks/bench_check.py: a loader warpgroup feeds three consumer
roles, one warpgroup each, through a ring of its own (8 stages, 8 x 256 f32 a stage);
persistent over bands of 3 x 8 rows, 256 columns: consumer i takes rows 8 i .. 8 i + 7 of
each band. The three consumers run the same code on their own ring and rows."""
# expect: clean
@cake.schedule(target="sm_90a", workload="scale", divisible={"N": 4})
def scale_roles3_rings_s8(lm, X, Y):
    TM, TN, S, SMS = 8, 256, 8, 132
    NT = lm.cdiv(lm.N, TN)
    TILES = lm.cdiv(lm.M, TM * 3) * NT
    lm.launch(grid=(lm.min(SMS, TILES),), warps=16)
    x0 = lm.smem("f32", (TM, TN), stages=S)
    x1 = lm.smem("f32", (TM, TN), stages=S)
    x2 = lm.smem("f32", (TM, TN), stages=S)
    loader = lm.role(warps=range(0, 4), regs=40)
    c0 = lm.role(warps=range(4, 8), regs=152)
    c1 = lm.role(warps=range(8, 12), regs=152)
    c2 = lm.role(warps=range(12, 16), regs=152)
    y0 = lm.fragment("f32", (TM, TN), role=c0)
    y1 = lm.fragment("f32", (TM, TN), role=c1)
    y2 = lm.fragment("f32", (TM, TN), role=c2)
    r0 = lm.pipeline(stages=S, buffers=[x0], producer=loader, consumer=c0)
    r1 = lm.pipeline(stages=S, buffers=[x1], producer=loader, consumer=c1)
    r2 = lm.pipeline(stages=S, buffers=[x2], producer=loader, consumer=c2)
    it = lm.counter()
    with loader:
        for t in lm.range(lm.block(0), TILES, lm.grid(0), counter=it):
            m0, n0 = (t // NT) * TM * 3, (t % NT) * TN
            r0.acquire(it)
            x0[r0.stage(it)].load(X, at=(m0, n0), barrier=r0.full(it), pad=True)
            r1.acquire(it)
            x1[r1.stage(it)].load(X, at=(m0 + TM, n0), barrier=r1.full(it), pad=True)
            r2.acquire(it)
            x2[r2.stage(it)].load(X, at=(m0 + 2 * TM, n0), barrier=r2.full(it), pad=True)
    with c0:
        for t in lm.range(lm.block(0), TILES, lm.grid(0), counter=it):
            m0, n0 = (t // NT) * TM * 3, (t % NT) * TN
            r0.wait(it)
            lm.elementwise(y0, x0[r0.stage(it)], op="scale", alpha=2.5)
            r0.release(it)
            lm.store(Y, at=(m0, n0), src=y0, mask=True)
    with c1:
        for t in lm.range(lm.block(0), TILES, lm.grid(0), counter=it):
            m0, n0 = (t // NT) * TM * 3, (t % NT) * TN
            r1.wait(it)
            lm.elementwise(y1, x1[r1.stage(it)], op="scale", alpha=2.5)
            r1.release(it)
            lm.store(Y, at=(m0 + TM, n0), src=y1, mask=True)
    with c2:
        for t in lm.range(lm.block(0), TILES, lm.grid(0), counter=it):
            m0, n0 = (t // NT) * TM * 3, (t % NT) * TN
            r2.wait(it)
            lm.elementwise(y2, x2[r2.stage(it)], op="scale", alpha=2.5)
            r2.release(it)
            lm.store(Y, at=(m0 + 2 * TM, n0), src=y2, mask=True)
