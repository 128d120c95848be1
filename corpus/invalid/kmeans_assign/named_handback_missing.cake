"""Derived from corpus/valid/kmeans_assign/named_epilogue.cake with the epilogue's second
`handoff.sync()` (the hand-back of `l_s`) deleted: math reaches named barrier 1 twice per
tile, the epilogue once, so the barrier's generations pair math's hand-back wait with the
epilogue's next publish wait and, after half the tiles, math's sync waits for an epilogue
that has finished (deadlock)."""
@cake.schedule(target="sm_90a", workload="kmeans_assign", sizes={"K": 16, "D": 64})
def kmeans_named_epilogue_no_handback(lm, X, C, labels):
    BR, TILES = 64, 4
    lm.launch(grid=(lm.cdiv(lm.N, BR * TILES),), warps=12)
    c_s = lm.smem("f32", (16, 64))
    x_s = lm.smem("f32", (BR, 64), stages=2)
    l_s = lm.smem("i32", (BR,))
    cbar = lm.mbarrier(count=1)
    handoff = lm.named_barrier(id=1, threads=256)
    loader = lm.role(warps=range(0, 4))
    math = lm.role(warps=range(4, 8))
    epilogue = lm.role(warps=range(8, 12))
    dist = lm.fragment("f32", (BR, 16), role=math)
    lab = lm.fragment("i32", (BR,), role=math)
    out = lm.fragment("i32", (BR,), role=epilogue)
    ring = lm.pipeline(stages=2, buffers=[x_s], producer=loader, consumer=math)
    r0 = lm.block(0) * BR * TILES
    with loader:
        cbar[0].arrive_expect_tx(bytes=lm.nbytes(c_s))
        c_s[0].load(C, at=(0, 0), barrier=cbar[0])
        for t in lm.range(0, TILES):
            ring.acquire(t)
            x_s[ring.stage(t)].load(X, at=(r0 + t * BR, 0), barrier=ring.full(t), pad=True)
    with math:
        cbar[0].wait(parity=0)
        for t in lm.range(0, TILES):
            ring.wait(t)
            lm.sqdist(dist, x_s[ring.stage(t)], c_s)
            ring.release(t)
            lm.reduce(lab, dist, op="argmin", axis=1)
            lm.elementwise(l_s[0], lab, op="copy")
            handoff.sync()  # expect: P015
            handoff.sync()
    with epilogue:
        for t in lm.range(0, TILES):
            handoff.sync()
            lm.elementwise(out, l_s[0], op="copy")
            lm.store(labels, at=(r0 + t * BR,), src=out, mask=True)
