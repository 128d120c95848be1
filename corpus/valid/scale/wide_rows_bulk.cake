"""Elementwise scale over 8 x 512 tiles. A row of 512 f32 is wider than a tensor-map box
(at most 256 elements per dimension), so the tile arrives by row-wise bulk copies, and the
tail tiles take the part outside the tensor from the kernel's zero row: the path the
lowering keeps for what tensor maps cannot express (docs/lowering.md, "Tail tiles")."""
# expect: clean
@cake.schedule(target="sm_90a", workload="scale", divisible={"N": 4})
def scale_wide_rows(lm, X, Y):
    TM, TN = 8, 512
    lm.launch(grid=(lm.cdiv(lm.M, TM), lm.cdiv(lm.N, TN)), warps=4)
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
        lm.store(Y, at=(m0, n0), src=y, mask=True)
