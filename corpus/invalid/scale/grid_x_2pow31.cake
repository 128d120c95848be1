"""Elementwise scale of a 65536 x 1048576 tensor (sizes pinned) in 1 x 32 tiles, one tile
per CTA with the tile index flattened onto x: 2^36 elements / 32 = 2^31 CTAs, one more
than the 2^31 - 1 an x-extent may hold. Correct at every smaller size; the launch fails
at this one."""
@cake.schedule(target="sm_90a", workload="scale", sizes={"M": 65536, "N": 1048576})
def scale_rows_2pow31(lm, X, Y):
    TM, TN = 1, 32
    NT = lm.cdiv(lm.N, TN)
    lm.launch(grid=(lm.cdiv(lm.M, TM) * NT,), warps=1)  # expect: R011
    x_s = lm.smem("f32", (TM, TN))
    full = lm.mbarrier(count=1)
    worker = lm.role(warps=range(0, 1))
    y = lm.fragment("f32", (TM, TN), role=worker)
    m0, n0 = (lm.block(0) // NT) * TM, (lm.block(0) % NT) * TN
    with worker:
        full[0].arrive_expect_tx(bytes=lm.nbytes(x_s))
        x_s[0].load(X, at=(m0, n0), barrier=full[0], pad=True)
        full[0].wait(parity=0)
        lm.elementwise(y, x_s[0], op="scale", alpha=2.5)
        lm.store(Y, at=(m0, n0), src=y, mask=True)
