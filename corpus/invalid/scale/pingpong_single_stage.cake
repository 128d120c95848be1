"""Elementwise scale with ping-pong workers on a raw 1-stage ring: `work0` takes the even
row tiles, `work1` the odd ones. Each worker meets the stage only every other phase:
`work0` consumes phase 0 (t = 0) and phase 2 (t = 2) while `work1` consumes phase 1.
Its wait at t = 2 (parity 0) cannot tell phase 2 from phase 0: once phase 0 has completed
and tile 1 is still landing, the wait passes at once and `work0` scales stage 0 while
the copy of tile 1 writes it.
Derived from the valid form with 2 stages (`TILES, S = 32, 256, 4, 2` ... an even stage
count gives each worker every phase of its stage)."""
@cake.schedule(target="sm_90a", workload="scale", divisible={"N": 4})
def scale_pingpong_s1(lm, X, Y):
    TM, TN, TILES, S = 32, 256, 4, 1                # an odd stage count
    lm.launch(grid=(lm.cdiv(lm.M, TM * TILES), lm.cdiv(lm.N, TN)), warps=12)
    x_s = lm.smem("f32", (TM, TN), stages=S)
    full = lm.mbarrier(count=1, stages=S)  # expect: P007
    empty = lm.mbarrier(count=4, stages=S)
    loader = lm.role(warps=range(0, 4), regs=40)
    work0 = lm.role(warps=range(4, 8), regs=232)
    work1 = lm.role(warps=range(8, 12), regs=232)
    y0 = lm.fragment("f32", (TM, TN), role=work0)
    y1 = lm.fragment("f32", (TM, TN), role=work1)
    m0, n0 = lm.block(0) * TM * TILES, lm.block(1) * TN
    with loader:
        for t in lm.range(0, TILES):
            empty[t % S].wait(parity=(t // S + 1) % 2)
            full[t % S].arrive_expect_tx(bytes=lm.nbytes(x_s))
            x_s[t % S].load(X, at=(m0 + t * TM, n0), barrier=full[t % S], pad=True)
    with work0:
        for t in lm.range(0, TILES, 2):
            full[t % S].wait(parity=(t // S) % 2)
            lm.elementwise(y0, x_s[t % S], op="scale", alpha=2.5)
            lm.syncwarp()                         # every lane has read the stage
            empty[t % S].arrive()
            lm.store(Y, at=(m0 + t * TM, n0), src=y0, mask=True)
    with work1:
        for t in lm.range(1, TILES, 2):
            full[t % S].wait(parity=(t // S) % 2)
            lm.elementwise(y1, x_s[t % S], op="scale", alpha=2.5)
            lm.syncwarp()                         # every lane has read the stage
            empty[t % S].arrive()
            lm.store(Y, at=(m0 + t * TM, n0), src=y1, mask=True)
