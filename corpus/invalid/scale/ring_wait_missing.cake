"""Derived from corpus/valid/scale/ring_1stage.cake with `ring.wait(t)` deleted: the
worker scales the stage before the loader's bulk copy of row tile t has landed."""
@cake.schedule(target="sm_90a", workload="scale", divisible={"N": 4})
def scale_ring_1stage_no_wait(lm, X, Y):
    TM, TN, TILES = 16, 256, 4
    lm.launch(grid=(lm.cdiv(lm.M, TM * TILES), lm.cdiv(lm.N, TN)), warps=8)
    x_s = lm.smem("f32", (TM, TN), stages=1)
    loader = lm.role(warps=range(0, 4))
    worker = lm.role(warps=range(4, 8))
    y = lm.fragment("f32", (TM, TN), role=worker)
    ring = lm.pipeline(stages=1, buffers=[x_s], producer=loader, consumer=worker)
    m0, n0 = lm.block(0) * TM * TILES, lm.block(1) * TN
    with loader:
        for t in lm.range(0, TILES):
            ring.acquire(t)
            x_s[ring.stage(t)].load(X, at=(m0 + t * TM, n0), barrier=ring.full(t), pad=True)
    with worker:
        for t in lm.range(0, TILES):
            lm.elementwise(y, x_s[ring.stage(t)], op="scale", alpha=2.5)  # expect: P008
            ring.release(t)
            lm.store(Y, at=(m0 + t * TM, n0), src=y, mask=True)
