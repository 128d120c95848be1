"""Derived from corpus/valid/attention/raw_kv_rings_s3_d64.cake with `kempty` initialised
for 8 arrivals, as if the loader warps also released the K stages: only the 4 math warps
arrive on it, so no phase of `kempty` ever completes and the loader waits forever for the
first refill of stage 0 (at the fourth key tile; with three tiles or fewer the kernel
ends before it needs one)."""
@cake.schedule(target="sm_90a", workload="attention", sizes={"D": 64})
def attention_raw_kv_s3_d64(lm, Q, K, V, O):
    BM, BN, S = 64, 64, 3
    lm.launch(grid=(lm.cdiv(lm.M, BM),), warps=8)
    q_s = lm.smem("bf16", (BM, 64))
    k_s = lm.smem("bf16", (BN, 64), stages=S)
    v_s = lm.smem("bf16", (BN, 64), stages=S)
    s_s = lm.smem("f32", (BM, BN))
    p_s = lm.smem("bf16", (BM, BN))
    c_s = lm.smem("f32", (BM,))
    l_s = lm.smem("f32", (BM,))
    qbar = lm.mbarrier(count=1)
    kfull = lm.mbarrier(count=1, stages=S)           # armed once per phase
    kempty = lm.mbarrier(count=8, stages=S)          # expect: P002
    vfull = lm.mbarrier(count=1, stages=S)
    vempty = lm.mbarrier(count=4, stages=S)
    team = lm.named_barrier(id=1, threads=128)       # the math warpgroup
    loader = lm.role(warps=range(0, 4))
    math = lm.role(warps=range(4, 8))
    s = lm.fragment("f32", (BM, BN), role=math)
    acc = lm.fragment("f32", (BM, 64), role=math)
    srow = lm.fragment("f32", (BM, BN), role=math)
    m = lm.fragment("f32", (BM,), role=math)
    mn = lm.fragment("f32", (BM,), role=math)
    mt = lm.fragment("f32", (BM,), role=math)
    corr = lm.fragment("f32", (BM,), role=math)
    ts = lm.fragment("f32", (BM,), role=math)
    l = lm.fragment("f32", (BM,), role=math)
    m0 = lm.block(0) * BM
    with loader:
        qbar[0].arrive_expect_tx(bytes=lm.nbytes(q_s))
        q_s[0].load(Q, at=(m0, 0), barrier=qbar[0], pad=True)
        for j in lm.range(0, lm.cdiv(lm.N, BN)):
            kempty[j % S].wait(parity=(j // S + 1) % 2)
            kfull[j % S].arrive_expect_tx(bytes=lm.nbytes(k_s))
            k_s[j % S].load(K, at=(j * BN, 0), barrier=kfull[j % S], pad=True)
            vempty[j % S].wait(parity=(j // S + 1) % 2)
            vfull[j % S].arrive_expect_tx(bytes=lm.nbytes(v_s))
            v_s[j % S].load(V, at=(j * BN, 0), barrier=vfull[j % S], pad=True)
    with math:
        lm.fill(acc, 0.0)
        lm.fill(m, -1e30)
        lm.fill(l, 0.0)
        qbar[0].wait(parity=0)
        for j in lm.range(0, lm.cdiv(lm.N, BN)):
            kfull[j % S].wait(parity=(j // S) % 2)
            lm.mma(s, q_s[0], k_s[j % S], transpose_b=True, init=True)
            kempty[j % S].arrive()                               # K stage free again
            lm.elementwise(s_s[0], s, op="scale", alpha=0.125)   # 1 / sqrt(64)
            team.sync()                                          # s_s complete
            lm.elementwise(srow, s_s[0], op="copy")
            lm.mask(srow, row0=m0, col0=j * BN, cols=lm.N)       # key tail
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
            vfull[j % S].wait(parity=(j // S) % 2)
            lm.mma(acc, p_s[0], v_s[j % S])
            vempty[j % S].arrive()                               # V stage free again
        lm.elementwise(l_s[0], l, op="copy")
        team.sync()                                              # l_s complete
        lm.rowwise(acc, acc, l_s[0], op="div")
        lm.store(O, at=(m0, 0), src=acc, mask=True)
