"""A persistent elementwise scale whose worker derives the ring position of each half tile
from the half's index `h` (`ring.wait(h)`, `ring.stage(h)`, `ring.release(h)`) while the
loader counts it with the running counter `it`: the worker restarts at stage 0, parity 0
on every tile, the loader does not. Every tile takes 2 positions of the 4-stage ring, so
a CTA's second tile is loaded into stages 2 and 3 (positions 2, 3) while the worker
reads stages 0 and 1 again: its full waits pass on the phases of the first tile, so
it stores the first tile's data as the second's, and nothing waits for the copies into
stages 2 and 3, which can still be landing when the CTA exits (with more tiles per CTA
the worker also reads stage 0 while a later copy lands there). CTAs with one tile hide
it; at M = 1001, N = 336 CTAs 0..59 have two. Same as
corpus/valid/scale/persistent_bands_s4.cake except the worker's inner loop has no
counter and uses `h`."""
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
        for t in lm.range(lm.block(0), TILES, lm.grid(0)):
            for h in lm.range(0, TM // HM):  # expect: P026
                ring.wait(h)
                lm.elementwise(y, x_s[ring.stage(h)], op="scale", alpha=2.5)
                ring.release(h)
                lm.store(Y, at=((t // NT) * TM + h * HM, (t % NT) * TN), src=y, mask=True)
