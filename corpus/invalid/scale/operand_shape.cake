"""Scale tile whose staging buffer was halved to 16 rows to save shared memory while the
fragment, the load box and the store still cover 32: the copy reads rows 16..31 of `y`
from past the end of `x_s`'s stage (the mbarrier and whatever follows it).
Same as corpus/valid/scale/tile_1stage.cake except the shape of `x_s`."""
@cake.schedule(target="sm_90a", workload="scale", divisible={"N": 4})
def scale_tile_half_stage(lm, X, Y):
    TM, TN = 32, 256
    lm.launch(grid=(lm.cdiv(lm.M, TM), lm.cdiv(lm.N, TN)), warps=4)
    x_s = lm.smem("f32", (TM // 2, TN))
    full = lm.mbarrier(count=1)
    worker = lm.role(warps=range(0, 4))
    y = lm.fragment("f32", (TM, TN), role=worker)
    m0, n0 = lm.block(0) * TM, lm.block(1) * TN
    with worker:
        full[0].arrive_expect_tx(bytes=lm.nbytes(x_s))
        x_s[0].load(X, at=(m0, n0), barrier=full[0], pad=True)
        full[0].wait(parity=0)
        lm.elementwise(y, x_s[0], op="scale", alpha=2.5)  # expect: H008
        lm.store(Y, at=(m0, n0), src=y, mask=True)
