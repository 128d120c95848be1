"""A persistent elementwise scale whose two roles count the tiles differently: the loader
walks `lm.cdiv(lm.M, TM) * NT` tiles, the worker `(lm.M // TM) * NT`, which agree only
when M is a multiple of the 32-row tile. For M = 1001 the last row band of tiles (rows
992..1000) is loaded by some CTAs and never waited for: the worker ends while the copies
into its ring are still landing, the CTA may exit with them in flight, and those rows of
Y are never written. Same as corpus/valid/scale/persistent_bands_s4.cake except the
worker's tile loop bound."""
@cake.schedule(target="sm_90a", workload="scale", divisible={"N": 4})
def scale_persistent_bands_s4(lm, X, Y):
    TM, TN, HM, S, SMS = 32, 64, 16, 4, 132
    NT = lm.cdiv(lm.N, TN)
    TILES = lm.cdiv(lm.M, TM) * NT
    lm.launch(grid=(lm.min(SMS, TILES),), warps=8)
    x_s = lm.smem("f32", (HM, TN), stages=S)
    loader = lm.role(warps=range(0, 4), regs=40)
    worker = lm.role(warps=range(4, 8), regs=232)
    y = lm.fragment("f32", (HM, TN), role=worker)
    ring = lm.pipeline(stages=S, buffers=[x_s], producer=loader, consumer=worker)
    it = lm.counter()
    with loader:
        for t in lm.range(lm.block(0), TILES, lm.grid(0)):
            for h in lm.range(0, TM // HM, counter=it):
                ring.acquire(it)
                x_s[ring.stage(it)].load(X, at=((t // NT) * TM + h * HM, (t % NT) * TN),
                                         barrier=ring.full(it), pad=True)
    with worker:
        for t in lm.range(lm.block(0), (lm.M // TM) * NT, lm.grid(0)):  # expect: P019
            for h in lm.range(0, TM // HM, counter=it):
                ring.wait(it)
                lm.elementwise(y, x_s[ring.stage(it)], op="scale", alpha=2.5)
                ring.release(it)
                lm.store(Y, at=((t // NT) * TM + h * HM, (t % NT) * TN), src=y, mask=True)
