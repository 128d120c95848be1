"""Row softmax with a 6-stage input ring and a double-buffered bulk-store epilogue: the
loader's warp 0 (`with lm.warps(0, 1)`) streams 32-row tiles of X through the ring; the
math warpgroup computes each tile in registers, waits until at most one of its bulk
stores is still reading (`lm.store_wait(pending=1)`: the store of tile t - 2, which used
`y_s[t % 2]`, has finished), copies the tile into `y_s[t % 2]`, fences its generic writes
for the async proxy and issues the bulk store (masked: the last tile of M = 1000 has 8
rows past M). Every store is drained before the role ends. Shared memory: 6 x 16 KiB
input stages and 2 x 16 KiB output stages."""
# expect: clean
@cake.schedule(target="sm_90a", workload="softmax", sizes={"N": 128})
def softmax_rows_store_async_s6(lm, X, Y):
    BR, TILES, S = 32, 8, 6
    lm.launch(grid=(lm.cdiv(lm.M, BR * TILES),), warps=8)
    x_s = lm.smem("f32", (BR, 128), stages=S)
    y_s = lm.smem("f32", (BR, 128), stages=2)                # output staging
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 8), regs=232)
    mx = lm.fragment("f32", (BR,), role=math)
    sm = lm.fragment("f32", (BR,), role=math)
    e = lm.fragment("f32", (BR, 128), role=math)
    ring = lm.pipeline(stages=S, buffers=[x_s], producer=loader, consumer=math)
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
            lm.reduce(mx, x_s[ring.stage(t)], op="max", axis=1)
            lm.rowwise(e, x_s[ring.stage(t)], mx, op="sub")
            ring.release(t)
            lm.elementwise(e, e, op="exp")
            lm.reduce(sm, e, op="sum", axis=1)
            lm.rowwise(e, e, sm, op="div")
            lm.store_wait(pending=1)                         # store of tile t - 2 is done
            lm.elementwise(y_s[t % 2], e, op="copy")
            lm.fence_proxy()                                 # generic writes -> bulk store
            y_s[t % 2].store_async(Y, at=(r0 + t * BR, 0), mask=True)
        lm.store_wait(pending=0)                             # drained before exit
