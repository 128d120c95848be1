"""Derived from corpus/valid/softmax/rows_pipelined_s2.cake with `ring.release(t)` moved
before the second read of the stage (the shift by the row max): the loader may refill the
stage while math still reads it (race)."""
@cake.schedule(target="sm_90a", workload="softmax", sizes={"N": 128})
def softmax_release_early(lm, X, Y):
    BR, TILES = 64, 4
    lm.launch(grid=(lm.cdiv(lm.M, BR * TILES),), warps=8)
    x_s = lm.smem("f32", (BR, 128), stages=2)
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 8), regs=232)
    mx = lm.fragment("f32", (BR,), role=math)
    sm = lm.fragment("f32", (BR,), role=math)
    e = lm.fragment("f32", (BR, 128), role=math)
    ring = lm.pipeline(stages=2, buffers=[x_s], producer=loader, consumer=math)
    r0 = lm.block(0) * BR * TILES
    with loader:
        for t in lm.range(0, TILES):
            ring.acquire(t)
            x_s[ring.stage(t)].load(X, at=(r0 + t * BR, 0), barrier=ring.full(t), pad=True)
    with math:
        for t in lm.range(0, TILES):
            ring.wait(t)
            lm.reduce(mx, x_s[ring.stage(t)], op="max", axis=1)
            ring.release(t)  # expect: P010
            lm.rowwise(e, x_s[ring.stage(t)], mx, op="sub")
            lm.elementwise(e, e, op="exp")
            lm.reduce(sm, e, op="sum", axis=1)
            lm.rowwise(e, e, sm, op="div")
            lm.store(Y, at=(r0 + t * BR, 0), src=e, mask=True)
