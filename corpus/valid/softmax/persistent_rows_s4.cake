"""Persistent row softmax: the grid is the number of SMs the kernel is given (here 8, as
a persistent kernel launched with a reduced `sm_count`, CUTLASS's `KernelHardwareInfo`),
or fewer when M has fewer 64-row tiles, and each CTA walks the row tiles blockIdx.x,
blockIdx.x + gridDim.x, ... through a 4-stage pipeline whose position is the running
counter `it` (CUTLASS's `PipelineState`): the i-th tile of a CTA uses stage i % 4 and
phase i // 4 of its barriers, whatever its tile index. At M = 4096 (64 tiles) every CTA
takes 8 tiles and wraps the ring twice; at M = 1000 (16 tiles) each takes 2; at M = 256
(4 tiles) the grid is 4. The last tile's rows past M are padded on load and masked on
store."""
# expect: clean
@cake.schedule(target="sm_90a", workload="softmax", sizes={"N": 128})
def softmax_persistent_rows_s4(lm, X, Y):
    BR, SMS, S = 64, 8, 4
    TILES = lm.cdiv(lm.M, BR)
    lm.launch(grid=(lm.min(SMS, TILES),), warps=8)
    x_s = lm.smem("f32", (BR, 128), stages=S)
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 8), regs=232)
    mx = lm.fragment("f32", (BR,), role=math)
    sm = lm.fragment("f32", (BR,), role=math)
    e = lm.fragment("f32", (BR, 128), role=math)
    ring = lm.pipeline(stages=S, buffers=[x_s], producer=loader, consumer=math)
    it = lm.counter()
    with loader:
        for t in lm.range(lm.block(0), TILES, lm.grid(0), counter=it):
            ring.acquire(it)
            x_s[ring.stage(it)].load(X, at=(t * BR, 0), barrier=ring.full(it), pad=True)
    with math:
        for t in lm.range(lm.block(0), TILES, lm.grid(0), counter=it):
            ring.wait(it)
            lm.reduce(mx, x_s[ring.stage(it)], op="max", axis=1)
            lm.rowwise(e, x_s[ring.stage(it)], mx, op="sub")
            ring.release(it)
            lm.elementwise(e, e, op="exp")
            lm.reduce(sm, e, op="sum", axis=1)
            lm.rowwise(e, e, sm, op="div")
            lm.store(Y, at=(t * BR, 0), src=e, mask=True)
