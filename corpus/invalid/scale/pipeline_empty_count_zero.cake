"""Elementwise scale with three worker warpgroups whose pipeline declares `empty_count=0`,
meant as "let the compiler derive it" (the derived default is taken only when the
argument is omitted): every empty barrier is initialised with an arrival count of 0,
which `mbarrier.init` does not accept (1 .. 2^20 - 1), so the loader's acquires behave
undefinedly. Same as corpus/valid/scale/three_worker_wgs_loader_warp_s6.cake except the
explicit `empty_count=0`."""
@cake.schedule(target="sm_90a", workload="scale", divisible={"N": 4})
def scale_three_worker_wgs_s6(lm, X, Y):
    TM, TN, TILES, S = 24, 256, 8, 6
    lm.launch(grid=(lm.cdiv(lm.M, TM * TILES), lm.cdiv(lm.N, TN)), warps=13)
    x_s = lm.smem("f32", (TM, TN), stages=S)
    worker = lm.role(warps=range(0, 12), regs=152)
    loader = lm.role(warps=range(12, 13))
    y = lm.fragment("f32", (TM, TN), role=worker)
    ring = lm.pipeline(stages=S, buffers=[x_s], producer=loader, consumer=worker,  # expect: R009
                       empty_count=0)
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
