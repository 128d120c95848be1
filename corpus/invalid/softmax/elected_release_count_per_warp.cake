"""The per-warpgroup elected release of rows_elected_release_2wg.cake with the empty count
of a release per consumer warp (8, what the pipeline derives when `empty_count` is left
out): only warps 0 and 4 of the role release each stage, so no phase of the empty barrier
completes and the loader waits forever for the first stage to come back."""
@cake.schedule(target="sm_90a", workload="softmax", sizes={"N": 64})
def softmax_rows_elected_release_2wg(lm, X, Y):
    BR, TILES = 256, 4
    lm.launch(grid=(lm.cdiv(lm.M, BR * TILES),), warps=12)
    x_s = lm.smem("f32", (BR, 64), stages=2)
    wg0 = lm.named_barrier(id=1, threads=128)                # math warps 0..3
    wg1 = lm.named_barrier(id=2, threads=128)                # math warps 4..7
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 12), regs=232)
    mx = lm.fragment("f32", (BR,), role=math)
    sm = lm.fragment("f32", (BR,), role=math)
    e = lm.fragment("f32", (BR, 64), role=math)
    ring = lm.pipeline(stages=2, buffers=[x_s], producer=loader, consumer=math,  # expect: P002
                       empty_count=8)                        # one per math warp
    r0 = lm.block(0) * BR * TILES
    with loader:
        with lm.warps(0, 1):
            for t in lm.range(0, TILES):
                ring.acquire(t)
                x_s[ring.stage(t)].load(X, at=(r0 + t * BR, 0), barrier=ring.full(t),
                                        pad=True)
    with math:
        for t in lm.range(0, TILES):
            ring.wait(t)
            lm.reduce(mx, x_s[ring.stage(t)], op="max", axis=1)    # row max
            lm.rowwise(e, x_s[ring.stage(t)], mx, op="sub")       # x - max: last read
            lm.fence_proxy()                             # generic reads before the TMA refill (A19)
            with lm.warps(0, 4):
                wg0.sync()
            with lm.warps(4, 8):
                wg1.sync()
            with lm.warps(0, 8, 4):
                ring.release(t)                                   # lane 0 of warps 0 and 4
            lm.elementwise(e, e, op="exp")
            lm.reduce(sm, e, op="sum", axis=1)
            lm.rowwise(e, e, sm, op="div")
            lm.store(Y, at=(r0 + t * BR, 0), src=e, mask=True)
