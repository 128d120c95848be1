"""Row softmax with a math role of two warpgroups (256 threads, one row each) that hands
every stage of the ring back with one arrival per warpgroup, CUTLASS's count for a
consumer of several warpgroups (`include/cutlass/pipeline/sm90_pipeline.hpp`,
`PipelineTmaAsync`: one signalling thread per consumer warpgroup and destination CTA).
The loader issues from its warp 0 only (`with lm.warps(0, 1)`).

Each thread reads its own row of the stage (row max, shifted logits), so a warpgroup's
four warps meet at their own named barrier before lane 0 of its first warp releases the
stage for them (`with lm.warps(0, 8, 4)`: warps 0 and 4); the pipeline's empty barrier
counts those 2 arrivals (`empty_count=2`), not the 8 warps of the role."""
# expect: clean
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
    ring = lm.pipeline(stages=2, buffers=[x_s], producer=loader, consumer=math,
                       empty_count=2)                        # one release per warpgroup
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
