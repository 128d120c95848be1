"""Elementwise scale with a staged epilogue: one worker warp loads the tile, scales it
into a shared-memory buffer with generic writes by all 32 lanes, orders those writes with
`lm.syncwarp()` and then arrives on `done` from one elected lane (`per="role"`). A storer
warpgroup waits on `done`, reads the staged tile and stores it. The elected arrive is
legal because the warp synchronised after its writes."""
# expect: clean
@cake.schedule(target="sm_90a", workload="scale", divisible={"N": 4})
def scale_staged_epilogue(lm, X, Y):
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
        lm.syncwarp()                                 # every lane's writes before the arrive
        done[0].arrive(per="role")
    with storer:
        done[0].wait(parity=0)
        lm.elementwise(y, y_s[0], op="copy")
        lm.store(Y, at=(m0, n0), src=y, mask=True)
