"""Elementwise scale with three worker warpgroups and a one-warp loader placed after them:
warps 0..11 are the worker role (three aligned warpgroups, `regs=152`), warp 12 is the
loader role on its own (no `regs=`: it is not a whole warpgroup, so it keeps the launch
budget of 65,536 / 416 threads, 152 registers; 384 x 152 + 32 x 152 = 63,232 registers).
The loader streams 24 x 256 row tiles (24 KiB) through a 6-stage pipeline; the 384
worker threads hold 16 elements each of the scaled tile, and the ring's empty barrier
counts the 12 worker warps (the default `empty_count`), each of which releases a stage
after its lanes' last read of it."""
# expect: clean
@cake.schedule(target="sm_90a", workload="scale", divisible={"N": 4})
def scale_three_worker_wgs_s6(lm, X, Y):
    TM, TN, TILES, S = 24, 256, 8, 6
    lm.launch(grid=(lm.cdiv(lm.M, TM * TILES), lm.cdiv(lm.N, TN)), warps=13)
    x_s = lm.smem("f32", (TM, TN), stages=S)
    worker = lm.role(warps=range(0, 12), regs=152)
    loader = lm.role(warps=range(12, 13))
    y = lm.fragment("f32", (TM, TN), role=worker)
    ring = lm.pipeline(stages=S, buffers=[x_s], producer=loader, consumer=worker)
    m0, n0 = lm.block(0) * TM * TILES, lm.block(1) * TN
    with loader:
        for t in lm.range(0, TILES):
            ring.acquire(t)
            x_s[ring.stage(t)].load(X, at=(m0 + t * TM, n0), barrier=ring.full(t), pad=True)
    with worker:
        for t in lm.range(0, TILES):
            ring.wait(t)
            lm.elementwise(y, x_s[ring.stage(t)], op="scale", alpha=2.5)
            ring.release(t)
            lm.store(Y, at=(m0 + t * TM, n0), src=y, mask=True)
