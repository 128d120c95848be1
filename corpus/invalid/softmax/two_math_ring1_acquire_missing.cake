"""Derived from corpus/valid/softmax/rows_two_math_roles_s3.cake with the loader's
`ring1.acquire(p)` deleted (the acquire of the odd tiles' ring, dropped when the loop
was rewritten to interleave the two rings). A pipeline's acquire is both the wait for an
empty stage and the arming of its full barrier (the lowering puts the
`arrive_expect_tx` of the stage's bytes there), so without it the loader refills stages
of `x1_s` that `math1` may still be reading (from p = 3 on), and the copies land on
`ring1.full` with no arrival and no armed bytes: the transaction count goes negative,
no phase ever completes and `math1` waits forever on tile 1 (deadlock, the simulator's
outcome)."""
@cake.schedule(target="sm_90a", workload="softmax", sizes={"N": 128})
def softmax_two_math_no_acquire1(lm, X, Y):
    BR, PAIRS, S = 64, 4, 3
    lm.launch(grid=(lm.cdiv(lm.M, BR * 2 * PAIRS),), warps=12)
    x0_s = lm.smem("f32", (BR, 128), stages=S)               # even tiles
    x1_s = lm.smem("f32", (BR, 128), stages=S)               # odd tiles
    loader = lm.role(warps=range(0, 4), regs=40)
    math0 = lm.role(warps=range(4, 8), regs=232)
    math1 = lm.role(warps=range(8, 12), regs=232)
    mx0 = lm.fragment("f32", (BR,), role=math0)
    sm0 = lm.fragment("f32", (BR,), role=math0)
    e0 = lm.fragment("f32", (BR, 128), role=math0)
    mx1 = lm.fragment("f32", (BR,), role=math1)
    sm1 = lm.fragment("f32", (BR,), role=math1)
    e1 = lm.fragment("f32", (BR, 128), role=math1)
    ring0 = lm.pipeline(stages=S, buffers=[x0_s], producer=loader, consumer=math0)
    ring1 = lm.pipeline(stages=S, buffers=[x1_s], producer=loader, consumer=math1)
    r0 = lm.block(0) * BR * 2 * PAIRS
    with loader:
        for p in lm.range(0, PAIRS):
            ring0.acquire(p)
            x0_s[ring0.stage(p)].load(X, at=(r0 + (2 * p) * BR, 0), barrier=ring0.full(p),
                                      pad=True)
            x1_s[ring1.stage(p)].load(X, at=(r0 + (2 * p + 1) * BR, 0),  # expect: P008
                                      barrier=ring1.full(p), pad=True)
    with math0:
        for p in lm.range(0, PAIRS):
            ring0.wait(p)
            lm.reduce(mx0, x0_s[ring0.stage(p)], op="max", axis=1)
            lm.rowwise(e0, x0_s[ring0.stage(p)], mx0, op="sub")
            ring0.release(p)
            lm.elementwise(e0, e0, op="exp")
            lm.reduce(sm0, e0, op="sum", axis=1)
            lm.rowwise(e0, e0, sm0, op="div")
            lm.store(Y, at=(r0 + (2 * p) * BR, 0), src=e0, mask=True)
    with math1:
        for p in lm.range(0, PAIRS):
            ring1.wait(p)
            lm.reduce(mx1, x1_s[ring1.stage(p)], op="max", axis=1)
            lm.rowwise(e1, x1_s[ring1.stage(p)], mx1, op="sub")
            ring1.release(p)
            lm.elementwise(e1, e1, op="exp")
            lm.reduce(sm1, e1, op="sum", axis=1)
            lm.rowwise(e1, e1, sm1, op="div")
            lm.store(Y, at=(r0 + (2 * p + 1) * BR, 0), src=e1, mask=True)
