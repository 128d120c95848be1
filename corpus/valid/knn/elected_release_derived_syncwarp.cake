"""corpus/valid/knn/named_epilogue_raw.cake with the `lm.syncwarp()` before the
empty-barrier arrive left out. Legal under the convergence contract (docs/language.md):
the math lanes read `x_s` per thread, so the lowering emits the `__syncwarp()` before the
elected per-warp arrive itself; the user writes no fence."""
# expect: clean
@cake.schedule(target="sm_90a", workload="knn", sizes={"K": 64, "D": 64, "T": 8})
def knn_named_raw_no_syncwarp(lm, X, C, idx):
    BR, TILES, S = 32, 4, 2
    lm.launch(grid=(lm.cdiv(lm.N, BR * TILES),), warps=12)
    c_s = lm.smem("f32", (64, 64))
    x_s = lm.smem("f32", (BR, 64), stages=S)
    n_s = lm.smem("i32", (BR, 8))
    cbar = lm.mbarrier(count=1)
    full = lm.mbarrier(count=1, stages=S)
    empty = lm.mbarrier(count=4, stages=S)            # one arrive per math warp
    handoff = lm.named_barrier(id=1, threads=256)     # math 128 + epilogue 128 threads
    loader = lm.role(warps=range(0, 4))
    math = lm.role(warps=range(4, 8))
    epilogue = lm.role(warps=range(8, 12))
    dist = lm.fragment("f32", (BR, 64), role=math)
    nn = lm.fragment("i32", (BR, 8), role=math)
    out = lm.fragment("i32", (BR, 8), role=epilogue)
    r0 = lm.block(0) * BR * TILES
    with loader:
        cbar[0].arrive_expect_tx(bytes=lm.nbytes(c_s))
        c_s[0].load(C, at=(0, 0), barrier=cbar[0])
        for t in lm.range(0, TILES):
            empty[t % S].wait(parity=(t // S + 1) % 2)
            full[t % S].arrive_expect_tx(bytes=lm.nbytes(x_s))
            x_s[t % S].load(X, at=(r0 + t * BR, 0), barrier=full[t % S], pad=True)
    with math:
        cbar[0].wait(parity=0)
        for t in lm.range(0, TILES):
            full[t % S].wait(parity=(t // S) % 2)
            lm.sqdist(dist, x_s[t % S], c_s)
            empty[t % S].arrive()
            lm.topk(nn, dist, k=8)
            lm.elementwise(n_s[0], nn, op="copy")
            handoff.sync()                            # publish n_s
            handoff.sync()                            # epilogue has read it
    with epilogue:
        for t in lm.range(0, TILES):
            handoff.sync()
            lm.elementwise(out, n_s[0], op="copy")
            handoff.sync()                            # hand n_s back
            lm.store(idx, at=(r0 + t * BR, 0), src=out, mask=True)
