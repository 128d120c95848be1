"""corpus/valid/scale/raw_ring_s3_two_worker_wgs.cake with `empty` counting one worker
warpgroup (4) while all 8 worker warps release every stage: the first four releases
complete the phase, the loader refills the stage while the other four warps may still
read it, and the remaining arrivals complete the next phase early. One defect: the empty
barrier's count."""
@cake.schedule(target="sm_90a", workload="scale", divisible={"N": 4})
def scale_raw_ring_s3(lm, X, Y):
    TM, TN, TILES, S = 32, 256, 6, 3
    lm.launch(grid=(lm.cdiv(lm.M, TM * TILES), lm.cdiv(lm.N, TN)), warps=12)
    x_s = lm.smem("f32", (TM, TN), stages=S)
    full = lm.mbarrier(count=1, stages=S)
    empty = lm.mbarrier(count=4, stages=S)  # expect: P002
    loader = lm.role(warps=range(0, 4), regs=40)
    worker = lm.role(warps=range(4, 12), regs=232)
    y = lm.fragment("f32", (TM, TN), role=worker)
    m0, n0 = lm.block(0) * TM * TILES, lm.block(1) * TN
    with loader:
        for t in lm.range(0, TILES):
            empty[t % S].wait(parity=(t // S + 1) % 2)
            full[t % S].arrive_expect_tx(bytes=lm.nbytes(x_s))
            x_s[t % S].load(X, at=(m0 + t * TM, n0), barrier=full[t % S], pad=True)
    with worker:
        for t in lm.range(0, TILES):
            full[t % S].wait(parity=(t // S) % 2)
            lm.elementwise(y, x_s[t % S], op="scale", alpha=2.5)
            lm.syncwarp()                               # every lane has read the stage
            empty[t % S].arrive()
            lm.store(Y, at=(m0 + t * TM, n0), src=y, mask=True)
