"""Scale schedule for benchmarks/bench_check.py: one worker role of three warpgroups fed by
a loader warpgroup through an 8-stage `lm.pipeline` (empty counts the 12 worker warps),
persistent over 24 x 256 row bands: the symmetric warpgroups run one code with no part of
the role singled out."""
# expect: clean
@cake.schedule(target="sm_90a", workload="scale", divisible={"N": 4})
def scale_wgs3_ring_s8(lm, X, Y):
    TM, TN, S, SMS = 24, 256, 8, 132
    NT = lm.cdiv(lm.N, TN)
    TILES = lm.cdiv(lm.M, TM) * NT
    lm.launch(grid=(lm.min(SMS, TILES),), warps=16)
    x_s = lm.smem("f32", (TM, TN), stages=S)
    loader = lm.role(warps=range(0, 4), regs=40)
    worker = lm.role(warps=range(4, 16), regs=152)
    y = lm.fragment("f32", (TM, TN), role=worker)
    ring = lm.pipeline(stages=S, buffers=[x_s], producer=loader, consumer=worker)
    it = lm.counter()
    with loader:
        for t in lm.range(lm.block(0), TILES, lm.grid(0), counter=it):
            ring.acquire(it)
            x_s[ring.stage(it)].load(X, at=((t // NT) * TM, (t % NT) * TN),
                                     barrier=ring.full(it), pad=True)
    with worker:
        for t in lm.range(lm.block(0), TILES, lm.grid(0), counter=it):
            ring.wait(it)
            lm.elementwise(y, x_s[ring.stage(it)], op="scale", alpha=2.5)
            ring.release(it)
            lm.store(Y, at=((t // NT) * TM, (t % NT) * TN), src=y, mask=True)
