"""Elementwise scale whose worker waits on its tile barrier with parity 1: on a fresh
barrier (no phase completed yet) that wait passes at once, so the worker scales the tile
before the bulk copy has landed.
Same as corpus/valid/scale/tile_1stage.cake except the wait uses `parity=1` (was 0)."""
@cake.schedule(target="sm_90a", workload="scale", divisible={"N": 4})
def scale_tile_parity1(lm, X, Y):
    TM, TN = 32, 256
    lm.launch(grid=(lm.cdiv(lm.M, TM), lm.cdiv(lm.N, TN)), warps=4)
    x_s = lm.smem("f32", (TM, TN))
    full = lm.mbarrier(count=1)
    worker = lm.role(warps=range(0, 4))
    y = lm.fragment("f32", (TM, TN), role=worker)
    m0, n0 = lm.block(0) * TM, lm.block(1) * TN
    with worker:
        full[0].arrive_expect_tx(bytes=lm.nbytes(x_s))
        x_s[0].load(X, at=(m0, n0), barrier=full[0], pad=True)
        full[0].wait(parity=1)  # expect: P005
        lm.elementwise(y, x_s[0], op="scale", alpha=2.5)
        lm.store(Y, at=(m0, n0), src=y, mask=True)
