"""Causal attention forward, head dim 128, with single-stage K and V buffers, a loader
that is one warp and barriers the schedule initialises itself. The CTA has 5 warps: the
math warpgroup (warps 0-3, an aligned warpgroup) and the loader warp 4. The loader warp
initialises every barrier (`init="manual"`: `qbar`, `kfull`/`kempty`, `vfull`/`vempty`),
makes the inits visible with `lm.fence_barrier_init()` and meets the math warpgroup at
`lm.sync_cta()` before any barrier is used. With one stage the loader refills K (or V)
only after the math warps' four arrivals on `kempty[0]` (`vempty[0]`) of the previous key
tile, waiting with parity `(j + 1) % 2` (the first wait passes on the fresh barrier);
the math warpgroup waits `kfull[0]` / `vfull[0]` with parity `j % 2`. The loads of V
overlap the softmax of the same tile, and K of tile j + 1 the P @ V of tile j. The
causal mask and online softmax are those of causal_kv_pipelines_d128.cake."""
# expect: clean
@cake.schedule(target="sm_90a", workload="attention_causal", sizes={"D": 128})
def attention_causal_manual_init_s1_d128(lm, Q, K, V, O):
    BM, BN = 64, 64
    lm.launch(grid=(lm.cdiv(lm.M, BM),), warps=5)
    q_s = lm.smem("bf16", (BM, 128))
    k_s = lm.smem("bf16", (BN, 128))
    v_s = lm.smem("bf16", (BN, 128))
    s_s = lm.smem("f32", (BM, BN))
    p_s = lm.smem("bf16", (BM, BN))
    c_s = lm.smem("f32", (BM,))
    l_s = lm.smem("f32", (BM,))
    qbar = lm.mbarrier(count=1, init="manual")
    kfull = lm.mbarrier(count=1, init="manual")
    kempty = lm.mbarrier(count=4, init="manual")      # one arrive per math warp
    vfull = lm.mbarrier(count=1, init="manual")
    vempty = lm.mbarrier(count=4, init="manual")
    team = lm.named_barrier(id=1, threads=128)        # the math warpgroup
    math = lm.role(warps=range(0, 4))
    loader = lm.role(warps=range(4, 5))               # one producer warp
    s = lm.fragment("f32", (BM, BN), role=math)
    acc = lm.fragment("f32", (BM, 128), role=math)
    srow = lm.fragment("f32", (BM, BN), role=math)
    m = lm.fragment("f32", (BM,), role=math)
    mn = lm.fragment("f32", (BM,), role=math)
    mt = lm.fragment("f32", (BM,), role=math)
    corr = lm.fragment("f32", (BM,), role=math)
    ts = lm.fragment("f32", (BM,), role=math)
    l = lm.fragment("f32", (BM,), role=math)
    m0 = lm.block(0) * BM
    with loader:
        qbar[0].init()
        kfull[0].init()
        kempty[0].init()
        vfull[0].init()
        vempty[0].init()
        lm.fence_barrier_init()                      # inits visible to the copy engine
        lm.sync_cta()                                # ... and to the math warpgroup
        qbar[0].arrive_expect_tx(bytes=lm.nbytes(q_s))
        q_s[0].load(Q, at=(m0, 0), barrier=qbar[0], pad=True)
        for j in lm.range(0, lm.cdiv(lm.N, BN)):
            kempty[0].wait(parity=(j + 1) % 2)       # math is done with tile j - 1's K
            kfull[0].arrive_expect_tx(bytes=lm.nbytes(k_s))
            k_s[0].load(K, at=(j * BN, 0), barrier=kfull[0], pad=True)
            vempty[0].wait(parity=(j + 1) % 2)
            vfull[0].arrive_expect_tx(bytes=lm.nbytes(v_s))
            v_s[0].load(V, at=(j * BN, 0), barrier=vfull[0], pad=True)
    with math:
        lm.sync_cta()                                # the barriers are initialised
        lm.fill(acc, 0.0)
        lm.fill(m, -1e30)
        lm.fill(l, 0.0)
        qbar[0].wait(parity=0)
        for j in lm.range(0, lm.cdiv(lm.N, BN)):
            kfull[0].wait(parity=j % 2)
            lm.mma(s, q_s[0], k_s[0], transpose_b=True, init=True)
            kempty[0].arrive()                                   # K buffer free again
            lm.elementwise(s_s[0], s, op="scale", alpha=0.08838834764831845)  # 1 / sqrt(128)
            team.sync()                                          # s_s complete
            lm.elementwise(srow, s_s[0], op="copy")
            lm.mask(srow, row0=m0, col0=j * BN, cols=lm.N, causal=True)
            lm.reduce(mt, srow, op="max", axis=1)
            lm.rowwise(mn, mt, m, op="max")                      # new running max
            lm.rowwise(corr, m, mn, op="sub")
            lm.elementwise(corr, corr, op="exp")                 # exp(m_old - m_new)
            lm.rowwise(srow, srow, mn, op="sub")
            lm.elementwise(srow, srow, op="exp")                 # P
            lm.reduce(ts, srow, op="sum", axis=1)
            lm.rowwise(l, l, corr, op="mul")
            lm.rowwise(l, l, ts, op="add")                       # l = l * corr + sum(P)
            lm.elementwise(m, mn, op="copy")
            lm.elementwise(p_s[0], srow, op="cast")
            lm.elementwise(c_s[0], corr, op="copy")
            team.sync()                                          # p_s, c_s complete
            lm.rowwise(acc, acc, c_s[0], op="mul")               # rescale O
            vfull[0].wait(parity=j % 2)
            lm.mma(acc, p_s[0], v_s[0])
            vempty[0].arrive()                                   # V buffer free again
        lm.elementwise(l_s[0], l, op="copy")
        team.sync()                                              # l_s complete
        lm.rowwise(acc, acc, l_s[0], op="div")
        lm.store(O, at=(m0, 0), src=acc, mask=True)
