"""Elementwise scale over small 8x32 tiles with the flattened tile index put on the grid's
y-axis instead of x: at 4096 x 4096 that is 65536 CTAs along y, one more than the 65535 a
y-extent may hold, so the launch fails at the largest shape only. Same as
corpus/valid/scale/flat_grid_x.cake except the axis."""
@cake.schedule(target="sm_90a", workload="scale", divisible={"N": 4})
def scale_flat_y(lm, X, Y):
    TM, TN = 8, 32
    NT = lm.cdiv(lm.N, TN)
    lm.launch(grid=(1, lm.cdiv(lm.M, TM) * NT), warps=4)  # expect: R011
    x_s = lm.smem("f32", (TM, TN))
    full = lm.mbarrier(count=1)
    worker = lm.role(warps=range(0, 4))
    y = lm.fragment("f32", (TM, TN), role=worker)
    m0, n0 = (lm.block(1) // NT) * TM, (lm.block(1) % NT) * TN
    with worker:
        full[0].arrive_expect_tx(bytes=lm.nbytes(x_s))
        x_s[0].load(X, at=(m0, n0), barrier=full[0], pad=True)
        full[0].wait(parity=0)
        lm.elementwise(y, x_s[0], op="scale", alpha=2.5)
        lm.store(Y, at=(m0, n0), src=y, mask=True)
