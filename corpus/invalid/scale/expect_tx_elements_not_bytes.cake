"""Elementwise scale that arms its barrier with the tile's element count (TM * TN = 8,192)
instead of its bytes (f32: 32,768 B): the phase completes after a quarter of the copy
has landed and the worker scales data that is still arriving.
Same as corpus/valid/scale/tile_1stage.cake except `bytes=TM * TN` (was `lm.nbytes(x_s)`)."""
@cake.schedule(target="sm_90a", workload="scale", divisible={"N": 4})
def scale_tile_tx_elements(lm, X, Y):
    TM, TN = 32, 256
    lm.launch(grid=(lm.cdiv(lm.M, TM), lm.cdiv(lm.N, TN)), warps=4)
    x_s = lm.smem("f32", (TM, TN))
    full = lm.mbarrier(count=1)
    worker = lm.role(warps=range(0, 4))
    y = lm.fragment("f32", (TM, TN), role=worker)
    m0, n0 = lm.block(0) * TM, lm.block(1) * TN
    with worker:
        full[0].arrive_expect_tx(bytes=TM * TN)  # expect: P003
        x_s[0].load(X, at=(m0, n0), barrier=full[0], pad=True)
        full[0].wait(parity=0)
        lm.elementwise(y, x_s[0], op="scale", alpha=2.5)
        lm.store(Y, at=(m0, n0), src=y, mask=True)
