"""A persistent elementwise scale: the grid is at most 132 CTAs (one per SM,
`lm.min(SMS, TILES)`), and each CTA walks the 32 x 64 tiles t = blockIdx.x,
blockIdx.x + gridDim.x, ... (row-major over the tile grid: rows `t // NT`, columns
`t % NT`). Each tile goes through a 4-stage ring as two 16-row halves, and the ring
position is the running counter `it` (CUTLASS's `PipelineState`), which both roles advance
in the inner loop: half h of the i-th tile of a CTA is ring position 2 i + h, stage
`it % 4`, so a CTA's tiles use stages 0, 1 | 2, 3 | 0, 1 ... with the phases carried over
from tile to tile. At M = 1001, N = 336 (32 x 6 = 192 tiles) CTAs 0..59 take 2 tiles and
the others 1; at M = N = 4096 (8,192 tiles) CTAs 0..7 take 63 and the others 62."""
# expect: clean
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
            for h in lm.range(0, TM // HM, counter=it):
                ring.wait(it)
                lm.elementwise(y, x_s[ring.stage(it)], op="scale", alpha=2.5)
                ring.release(it)
                lm.store(Y, at=((t // NT) * TM + h * HM, (t % NT) * TN), src=y, mask=True)
