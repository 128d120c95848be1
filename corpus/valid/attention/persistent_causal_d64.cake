"""Persistent causal attention forward, head dim 64, with one math warpgroup: a fixed grid
of min(3, query tiles) CTAs, CTA b taking the 64-row query tiles b, b + 3, ... (a
grid-stride tile loop over `lm.grid(0)`), each tile with its own number of key blocks,
`nkv = min(cdiv((t + 1) * 64, 64), cdiv(N, 64))`: the blocks wholly after the tile's last
query are skipped, not masked. The K and V pipelines (2 stages each) are indexed by the
running counter `kv`, which every role advances once per key block and keeps from tile to
tile, so a tile of 1 key block followed by one of 4 starts the second where the first
ended; the query tile through `qbar` is indexed by the tile ordinal `w` (parity `w % 2`).
Before it reloads `q_s` for a tile, the loader meets the math warpgroup at named barrier 2
(`qfree`, 256 threads: both warpgroups): math arrives there at the start of each tile,
after every read of the previous tile's Q, and the loader syncs before arming `qbar`.
Per key block the math warpgroup runs the online softmax of
causal_kv_pipelines_d128.cake (the causal mask on the diagonal block, named barrier 1
over the warpgroup for each layout hand-over) and stores each tile's rows of O masked.

Phase trace at M = N = 256 (4 query tiles, 3 CTAs): CTA 0 takes tiles 0 and 3, with 1 and
4 key blocks at kv = 0 and kv = 1..4 (stages 0; 1, 0, 1, 0), `qbar` parity 0 then 1;
CTAs 1 and 2 take one tile each (2 and 3 key blocks)."""
# expect: clean
@cake.schedule(target="sm_90a", workload="attention_causal", sizes={"D": 64})
def attention_persistent_causal_d64(lm, Q, K, V, O):
    BM, BN, S, SMS = 64, 64, 2, 3
    QT = lm.cdiv(lm.M, BM)                            # query tiles
    lm.launch(grid=(lm.min(SMS, QT),), warps=8)
    q_s = lm.smem("bf16", (BM, 64))
    k_s = lm.smem("bf16", (BN, 64), stages=S)
    v_s = lm.smem("bf16", (BN, 64), stages=S)
    s_s = lm.smem("f32", (BM, BN))
    p_s = lm.smem("bf16", (BM, BN))
    c_s = lm.smem("f32", (BM,))
    l_s = lm.smem("f32", (BM,))
    qbar = lm.mbarrier(count=1)
    team = lm.named_barrier(id=1, threads=128)        # the math warpgroup
    qfree = lm.named_barrier(id=2, threads=256)       # math is done with q_s: loader + math
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
    kring = lm.pipeline(stages=S, buffers=[k_s], producer=loader, consumer=math)
    vring = lm.pipeline(stages=S, buffers=[v_s], producer=loader, consumer=math)
    kv = lm.counter()                                 # K/V ring position, kept across tiles
    w = lm.counter()                                  # tile ordinal in this CTA
    with loader:
        for t in lm.range(lm.block(0), QT, lm.grid(0), counter=w):
            nkv = lm.min(lm.cdiv((t + 1) * BM, BN), lm.cdiv(lm.N, BN))
            qfree.sync()                                         # q_s may be refilled
            qbar[0].arrive_expect_tx(bytes=lm.nbytes(q_s))
            q_s[0].load(Q, at=(t * BM, 0), barrier=qbar[0], pad=True)
            for j in lm.range(0, nkv, counter=kv):
                kring.acquire(kv)
                k_s[kring.stage(kv)].load(K, at=(j * BN, 0), barrier=kring.full(kv), pad=True)
                vring.acquire(kv)
                v_s[vring.stage(kv)].load(V, at=(j * BN, 0), barrier=vring.full(kv), pad=True)
    with math:
        for t in lm.range(lm.block(0), QT, lm.grid(0), counter=w):
            m0 = t * BM
            nkv = lm.min(lm.cdiv((t + 1) * BM, BN), lm.cdiv(lm.N, BN))
            qfree.arrive()                                       # the last tile's Q is read
            lm.fill(acc, 0.0)
            lm.fill(m, -1e30)
            lm.fill(l, 0.0)
            qbar[0].wait(parity=w % 2)
            for j in lm.range(0, nkv, counter=kv):
                kring.wait(kv)
                lm.mma(s, q_s[0], k_s[kring.stage(kv)], transpose_b=True, init=True)
                kring.release(kv)
                lm.elementwise(s_s[0], s, op="scale", alpha=0.125)   # 1 / sqrt(64)
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
                vring.wait(kv)
                lm.mma(acc, p_s[0], v_s[vring.stage(kv)])
                vring.release(kv)
            lm.elementwise(l_s[0], l, op="copy")
            team.sync()                                              # l_s complete
            lm.rowwise(acc, acc, l_s[0], op="div")
            lm.store(O, at=(m0, 0), src=acc, mask=True)
