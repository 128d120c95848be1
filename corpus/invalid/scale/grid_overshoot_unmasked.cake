"""Derived from corpus/valid/scale/tile_1stage.cake for sizes declared divisible by the
tile (so no tail strategy is needed and the store is unmasked), but with one CTA row too
many in the grid (`lm.cdiv(lm.M, TM) + 1`): the last row of CTAs stores its 32x256 tile
entirely below the end of Y. The sizes are tile multiples, so the tile-divisibility rule
has nothing to say; the grid is what overshoots."""
@cake.schedule(target="sm_90a", workload="scale", divisible={"M": 32, "N": 256})
def scale_tile_overshoot(lm, X, Y):
    TM, TN = 32, 256
    lm.launch(grid=(lm.cdiv(lm.M, TM) + 1, lm.cdiv(lm.N, TN)), warps=4)
    x_s = lm.smem("f32", (TM, TN))
    full = lm.mbarrier(count=1)
    worker = lm.role(warps=range(0, 4))
    y = lm.fragment("f32", (TM, TN), role=worker)
    m0, n0 = lm.block(0) * TM, lm.block(1) * TN
    with worker:
        full[0].arrive_expect_tx(bytes=lm.nbytes(x_s))
        x_s[0].load(X, at=(m0, n0), barrier=full[0], pad=True)
        full[0].wait(parity=0)
        lm.elementwise(y, x_s[0], op="scale", alpha=2.5)
        lm.store(Y, at=(m0, n0), src=y)  # expect: P017
