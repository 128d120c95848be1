"""Elementwise scale of eight row tiles through a raw 2-stage ring whose worker waits with
parity `lm.min(t // 2, 1) % 2`: right for t = 0..3 (phases 0 and 1 of each stage) and
stuck at 1 from t = 4 on, where phase 2 (parity 0) is the one to observe. Phase trace:
at t = 4 the worker waits on full[0] with parity 1: phase 1 (tile 2) is already observed,
so the wait passes at once while tile 4 may still be landing (race), or blocks for phase
3 if phase 2 is already done (deadlock). Only a window longer than four iterations
shows it."""
@cake.schedule(target="sm_90a", workload="scale", divisible={"N": 4})
def scale_rows_parity_min(lm, X, Y):
    TM, TN, TILES = 16, 256, 8
    lm.launch(grid=(lm.cdiv(lm.M, TM * TILES), lm.cdiv(lm.N, TN)), warps=8)
    x_s = lm.smem("f32", (TM, TN), stages=2)
    full = lm.mbarrier(count=1, stages=2)
    empty = lm.mbarrier(count=4, stages=2)
    loader = lm.role(warps=range(0, 4))
    worker = lm.role(warps=range(4, 8))
    y = lm.fragment("f32", (TM, TN), role=worker)
    m0, n0 = lm.block(0) * TM * TILES, lm.block(1) * TN
    with loader:
        for t in lm.range(0, TILES):
            empty[t % 2].wait(parity=(t // 2 + 1) % 2)
            full[t % 2].arrive_expect_tx(bytes=lm.nbytes(x_s))
            x_s[t % 2].load(X, at=(m0 + t * TM, n0), barrier=full[t % 2], pad=True)
    with worker:
        for t in lm.range(0, TILES):
            full[t % 2].wait(parity=lm.min(t // 2, 1) % 2)  # expect: P006
            lm.elementwise(y, x_s[t % 2], op="scale", alpha=2.5)
            lm.syncwarp()
            empty[t % 2].arrive()
            lm.store(Y, at=(m0 + t * TM, n0), src=y, mask=True)
