"""Elementwise scale in place (the output tile `y_s` aliases the input ring `x_s`) whose
worker releases each stage right after scaling it, where a plain ring releases it: after
its last generic read of `x_s`. But the stage is still read through the other name: the
bulk store of `y_s[stage]` reads the same bytes through the async proxy until a
`lm.store_wait` retires it, and the release lets the loader refill the stage with tile
t + 2 while that store may still be copying tile t to Y (the tile written to Y can hold
the next tile's input). Derived from corpus/valid/scale/alias_inplace_store_s2.cake,
which releases stage t - 1 only after `lm.store_wait(pending=1)`; here the loop is the
plain one with `ring.release(t)` after the elementwise and one drain at the end."""
@cake.schedule(target="sm_90a", workload="scale", divisible={"M": 32, "N": 256})
def scale_alias_inplace_s2(lm, X, Y):
    TM, TN, TILES, S = 32, 256, 4, 2
    lm.launch(grid=(lm.cdiv(lm.M, TM * TILES), lm.cdiv(lm.N, TN)), warps=8)
    x_s = lm.smem("f32", (TM, TN), stages=S)
    y_s = lm.smem("f32", (TM, TN), stages=S, alias=x_s)  # the output over the input
    loader = lm.role(warps=range(0, 4), regs=40)
    worker = lm.role(warps=range(4, 8), regs=232)
    ring = lm.pipeline(stages=S, buffers=[x_s], producer=loader, consumer=worker)
    m0, n0 = lm.block(0) * TM * TILES, lm.block(1) * TN
    with loader:
        for t in lm.range(0, TILES):
            ring.acquire(t)
            x_s[ring.stage(t)].load(X, at=(m0 + t * TM, n0), barrier=ring.full(t), pad=True)  # expect: P020
    with worker:
        for t in lm.range(0, TILES):
            ring.wait(t)
            lm.elementwise(y_s[ring.stage(t)], x_s[ring.stage(t)], op="scale", alpha=2.5)
            ring.release(t)
            lm.fence_proxy()
            y_s[ring.stage(t)].store_async(Y, at=(m0 + t * TM, n0), mask=True)
        lm.store_wait(pending=0)
