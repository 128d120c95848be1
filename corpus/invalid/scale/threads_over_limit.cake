"""Elementwise scale launched with 64 warps: 2,048 threads per CTA (the per-SM figure),
over the per-CTA limit of 1,024, so the launch fails before any thread runs. Same as
corpus/valid/scale/tile_1stage.cake except 64 warps (was 4), all in the worker role."""
@cake.schedule(target="sm_90a", workload="scale", divisible={"N": 4})
def scale_tile(lm, X, Y):
    TM, TN = 32, 256
    lm.launch(grid=(lm.cdiv(lm.M, TM), lm.cdiv(lm.N, TN)), warps=64)  # expect: R005
    x_s = lm.smem("f32", (TM, TN))
    full = lm.mbarrier(count=1)
    worker = lm.role(warps=range(0, 64))
    y = lm.fragment("f32", (TM, TN), role=worker)
    m0, n0 = lm.block(0) * TM, lm.block(1) * TN
    with worker:
        full[0].arrive_expect_tx(bytes=lm.nbytes(x_s))
        x_s[0].load(X, at=(m0, n0), barrier=full[0], pad=True)
        full[0].wait(parity=0)
        lm.elementwise(y, x_s[0], op="scale", alpha=2.5)
        lm.store(Y, at=(m0, n0), src=y, mask=True)
