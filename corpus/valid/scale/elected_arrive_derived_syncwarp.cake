"""corpus/valid/scale/staged_epilogue_syncwarp.cake with `lm.syncwarp()` left out: all 32
lanes of the one-warp worker role write `y_s`, then one elected lane arrives on `done`.
Legal under the convergence contract (docs/language.md): a per-role arrive of a one-warp
role after per-thread shared-memory accesses gets a derived `__syncwarp()` from the
lowering, so the storer sees the other 31 lanes' writes."""
# expect: clean
@cake.schedule(target="sm_90a", workload="scale", divisible={"N": 4})
def scale_staged_epilogue_no_syncwarp(lm, X, Y):
    TM, TN = 16, 256
    lm.launch(grid=(lm.cdiv(lm.M, TM), lm.cdiv(lm.N, TN)), warps=5)
    x_s = lm.smem("f32", (TM, TN))
    y_s = lm.smem("f32", (TM, TN))
    full = lm.mbarrier(count=1)
    done = lm.mbarrier(count=1)
    worker = lm.role(warps=range(0, 1))
    storer = lm.role(warps=range(1, 5))
    y = lm.fragment("f32", (TM, TN), role=storer)
    m0, n0 = lm.block(0) * TM, lm.block(1) * TN
    with worker:
        full[0].arrive_expect_tx(bytes=lm.nbytes(x_s))
        x_s[0].load(X, at=(m0, n0), barrier=full[0], pad=True)
        full[0].wait(parity=0)
        lm.elementwise(y_s[0], x_s[0], op="scale", alpha=2.5)
        done[0].arrive(per="role")
    with storer:
        done[0].wait(parity=0)
        lm.elementwise(y, y_s[0], op="copy")
        lm.store(Y, at=(m0, n0), src=y, mask=True)
