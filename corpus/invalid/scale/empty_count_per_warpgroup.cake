"""Elementwise scale with three worker warpgroups whose pipeline counts one release per
warpgroup (`empty_count=3`, CUTLASS's count for elected releases) while the workers
release every stage from each of their 12 warps (`ring.release(t)` outside any
`with lm.warps(...)` block): the first three warps to finish complete the empty phase,
the loader refills the stage while the other nine warps still read it (race), and their
late arrivals complete further phases that no tile filled, so the loader runs ahead of
the workers' parities and the kernel can also hang (the simulator shows both, depending
on the order). Same as
corpus/valid/scale/three_worker_wgs_loader_warp_s6.cake except `empty_count=3`."""
@cake.schedule(target="sm_90a", workload="scale", divisible={"N": 4})
def scale_three_worker_wgs_s6(lm, X, Y):
    TM, TN, TILES, S = 24, 256, 8, 6
    lm.launch(grid=(lm.cdiv(lm.M, TM * TILES), lm.cdiv(lm.N, TN)), warps=13)
    x_s = lm.smem("f32", (TM, TN), stages=S)
    worker = lm.role(warps=range(0, 12), regs=152)
    loader = lm.role(warps=range(12, 13))
    y = lm.fragment("f32", (TM, TN), role=worker)
    ring = lm.pipeline(stages=S, buffers=[x_s], producer=loader, consumer=worker,  # expect: P002
                       empty_count=3)
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
