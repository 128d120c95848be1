"""Elementwise scale of row bands: each CTA owns 32 rows and walks their column tiles
through a 2-stage ring. The loader loads `lm.cdiv(lm.N, TN)` column tiles (the last one
zero-padded) but the worker scales and stores only `lm.N // TN` of them, so for an N
that is not a multiple of 256 the last columns of Y are never written and the last
tile's bulk copy completes on `ring.full` with no wait: the CTA can exit while it still
writes shared memory. Phase trace for N = 333: the loader fills tiles 0 and 1 (stages 0
and 1, phase 0 of `ring.full`); the worker observes `ring.full[0]` phase 0 and stops, so
phase 0 of `ring.full[1]` completes unobserved."""
@cake.schedule(target="sm_90a", workload="scale", divisible={"N": 4})
def scale_bands_tail_floor(lm, X, Y):
    TM, TN = 32, 256
    lm.launch(grid=(lm.cdiv(lm.M, TM),), warps=8)
    x_s = lm.smem("f32", (TM, TN), stages=2)
    loader = lm.role(warps=range(0, 4))
    worker = lm.role(warps=range(4, 8))
    y = lm.fragment("f32", (TM, TN), role=worker)
    ring = lm.pipeline(stages=2, buffers=[x_s], producer=loader, consumer=worker)
    m0 = lm.block(0) * TM
    with loader:
        for t in lm.range(0, lm.cdiv(lm.N, TN)):
            ring.acquire(t)
            x_s[ring.stage(t)].load(X, at=(m0, t * TN), barrier=ring.full(t), pad=True)
    with worker:
        for t in lm.range(0, lm.N // TN):  # expect: P019
            ring.wait(t)
            lm.elementwise(y, x_s[ring.stage(t)], op="scale", alpha=2.5)
            ring.release(t)
            lm.store(Y, at=(m0, t * TN), src=y, mask=True)
