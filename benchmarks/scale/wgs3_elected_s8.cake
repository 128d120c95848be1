"""Scale schedule for benchmarks/bench_check.py: one worker role of three warpgroups fed by
the loader's first warp through an 8-stage raw-mbarrier ring; each warpgroup syncs on its
own named barrier and releases the stage from its first warp's elected thread (`empty`
counts 3); persistent over 24 x 256 row bands. The warpgroups run the same code, each on
its own named barrier and its own third of the role's threads."""
# expect: clean
@cake.schedule(target="sm_90a", workload="scale", divisible={"N": 4})
def scale_wgs3_elected_s8(lm, X, Y):
    TM, TN, S, SMS = 24, 256, 8, 132
    NT = lm.cdiv(lm.N, TN)
    TILES = lm.cdiv(lm.M, TM) * NT
    lm.launch(grid=(lm.min(SMS, TILES),), warps=16)
    x_s = lm.smem("f32", (TM, TN), stages=S)
    full = lm.mbarrier(count=1, stages=S)
    empty = lm.mbarrier(count=3, stages=S)
    wg0 = lm.named_barrier(id=1, threads=128)
    wg1 = lm.named_barrier(id=2, threads=128)
    wg2 = lm.named_barrier(id=3, threads=128)
    loader = lm.role(warps=range(0, 4), regs=40)
    worker = lm.role(warps=range(4, 16), regs=152)
    y = lm.fragment("f32", (TM, TN), role=worker)
    it = lm.counter()
    with loader:
        with lm.warps(0, 1):
            for t in lm.range(lm.block(0), TILES, lm.grid(0), counter=it):
                empty[it % S].wait(parity=(it // S + 1) % 2)
                full[it % S].arrive_expect_tx(bytes=lm.nbytes(x_s))
                x_s[it % S].load(X, at=((t // NT) * TM, (t % NT) * TN), barrier=full[it % S], pad=True)
    with worker:
        for t in lm.range(lm.block(0), TILES, lm.grid(0), counter=it):
            full[it % S].wait(parity=(it // S) % 2)
            lm.elementwise(y, x_s[it % S], op="scale", alpha=2.5)
            lm.fence_proxy()
            with lm.warps(0, 4):
                wg0.sync()
            with lm.warps(4, 8):
                wg1.sync()
            with lm.warps(8, 12):
                wg2.sync()
            with lm.warps(0, 12, 4):
                empty[it % S].arrive()
            lm.store(Y, at=((t // NT) * TM, (t % NT) * TN), src=y, mask=True)
