"""Derived from corpus/valid/softmax/rows_pipelined_s2.cake with the GPU's marketing name
as its target, `target="h100"`: targets are architectures (`sm_90a`), so no hardware
table applies and nothing about the schedule's resources could be checked."""
@cake.schedule(target="h100", workload="softmax", sizes={"N": 128})  # expect: N002
def softmax_rows_s2(lm, X, Y):
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
            lm.reduce(mx, x_s[ring.stage(t)], op="max", axis=1)    # row max
            lm.rowwise(e, x_s[ring.stage(t)], mx, op="sub")       # x - max
            ring.release(t)                                       # last read of the stage
            lm.elementwise(e, e, op="exp")
            lm.reduce(sm, e, op="sum", axis=1)                    # row sum
            lm.rowwise(e, e, sm, op="div")
            lm.store(Y, at=(r0 + t * BR, 0), src=e, mask=True)
