"""A triangular re-scan whose protocol is not periodic: for each row band `i` of its
column band the CTA streams the first `i + 1` row tiles through a 2-stage ring again
(each is scaled again; the last one, band `i` itself, is stored), so
the ring iteration `i * (i + 1) // 2 + j` grows quadratically and no stretch of
iterations repeats. At M = 4096 (256 bands of 16 rows) the unrolled protocol has about
33,000 ring iterations, several hundred thousand events, over the analysis' bound per
program, and no sound window can shorten it: the verdict is incomplete, never clean. The
protocol itself is correct at every size the analysis can unroll (M = 1000: 63 bands)."""
@cake.schedule(target="sm_90a", workload="scale", divisible={"N": 4})
def scale_triangle_rescan(lm, X, Y):  # expect: P098
    TM, TN = 16, 256
    lm.launch(grid=(lm.cdiv(lm.N, TN),), warps=8)
    x_s = lm.smem("f32", (TM, TN), stages=2)
    loader = lm.role(warps=range(0, 4))
    worker = lm.role(warps=range(4, 8))
    y = lm.fragment("f32", (TM, TN), role=worker)
    ring = lm.pipeline(stages=2, buffers=[x_s], producer=loader, consumer=worker)
    n0 = lm.block(0) * TN
    with loader:
        for i in lm.range(0, lm.cdiv(lm.M, TM)):
            for j in lm.range(0, i + 1):
                ring.acquire(i * (i + 1) // 2 + j)
                x_s[ring.stage(i * (i + 1) // 2 + j)].load(
                    X, at=(j * TM, n0), barrier=ring.full(i * (i + 1) // 2 + j), pad=True)
    with worker:
        for i in lm.range(0, lm.cdiv(lm.M, TM)):
            for j in lm.range(0, i + 1):
                ring.wait(i * (i + 1) // 2 + j)
                lm.elementwise(y, x_s[ring.stage(i * (i + 1) // 2 + j)], op="scale",
                               alpha=2.5)
                ring.release(i * (i + 1) // 2 + j)
            lm.store(Y, at=(i * TM, n0), src=y, mask=True)    # the last tile: band i
