"""Elementwise scale whose tile is loaded by two loader roles, each arming the shared
barrier with its half (16,384 B) and copying it: 2 arrivals per phase, but the barrier
counts 1. The phase completes when the first half has landed, so the worker scales the
second half before its copy finished, and the second loader's arrival is left over for
a phase nobody waits for.
Derived from corpus/valid/scale/tile_1stage.cake with the tile split into two halves and
two loader roles; the valid form declares `count=2`."""
@cake.schedule(target="sm_90a", workload="scale", divisible={"N": 4})
def scale_split_loaders(lm, X, Y):
    TH, TN = 16, 256
    lm.launch(grid=(lm.cdiv(lm.M, 2 * TH), lm.cdiv(lm.N, TN)), warps=12)
    top_s = lm.smem("f32", (TH, TN))
    bot_s = lm.smem("f32", (TH, TN))
    full = lm.mbarrier(count=1)  # expect: P001
    top = lm.role(warps=range(0, 4))
    bot = lm.role(warps=range(4, 8))
    worker = lm.role(warps=range(8, 12))
    y_top = lm.fragment("f32", (TH, TN), role=worker)
    y_bot = lm.fragment("f32", (TH, TN), role=worker)
    m0, n0 = lm.block(0) * 2 * TH, lm.block(1) * TN
    with top:
        full[0].arrive_expect_tx(bytes=lm.nbytes(top_s))
        top_s[0].load(X, at=(m0, n0), barrier=full[0], pad=True)
    with bot:
        full[0].arrive_expect_tx(bytes=lm.nbytes(bot_s))
        bot_s[0].load(X, at=(m0 + TH, n0), barrier=full[0], pad=True)
    with worker:
        full[0].wait(parity=0)
        lm.elementwise(y_top, top_s[0], op="scale", alpha=2.5)
        lm.elementwise(y_bot, bot_s[0], op="scale", alpha=2.5)
        lm.store(Y, at=(m0, n0), src=y_top, mask=True)
        lm.store(Y, at=(m0 + TH, n0), src=y_bot, mask=True)
