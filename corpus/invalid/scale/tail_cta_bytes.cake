"""Elementwise scale that arms the full barrier with the bytes of the tile rows inside X,
`lm.min(TM, lm.M - m0) * TN * 4`, while the padded load always delivers the whole 32 x
256 tile (32,768 bytes). In every CTA but the last along M the two agree; in the last
one (M = 1000: rows 992..1023, 8 inside) the phase is armed with 8,192 bytes while
32,768 land, so the transaction count never returns to zero and the worker waits
forever. Only the last CTA of the grid shows it."""
@cake.schedule(target="sm_90a", workload="scale", divisible={"N": 4})
def scale_tile_tail_bytes(lm, X, Y):
    TM, TN = 32, 256
    lm.launch(grid=(lm.cdiv(lm.M, TM), lm.cdiv(lm.N, TN)), warps=4)
    x_s = lm.smem("f32", (TM, TN))
    full = lm.mbarrier(count=1)
    worker = lm.role(warps=range(0, 4))
    y = lm.fragment("f32", (TM, TN), role=worker)
    m0, n0 = lm.block(0) * TM, lm.block(1) * TN
    with worker:
        full[0].arrive_expect_tx(bytes=lm.min(TM, lm.M - m0) * TN * 4)  # expect: P003
        x_s[0].load(X, at=(m0, n0), barrier=full[0], pad=True)
        full[0].wait(parity=0)
        lm.elementwise(y, x_s[0], op="scale", alpha=2.5)
        lm.store(Y, at=(m0, n0), src=y, mask=True)
