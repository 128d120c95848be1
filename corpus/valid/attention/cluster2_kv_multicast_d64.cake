"""Attention forward, head dim 64, on clusters of 2 CTAs along the query axis that share
every K and V tile: both CTAs of a cluster attend to the same keys, so rank 0 alone
issues each K and V copy with `multicast=0b11` and the tile lands in both CTAs (same
shared offset), completing its bytes on the `kfull` / `vfull` barrier of each. Each CTA
still arms its own full barriers with the bytes it receives (one 64-key tile) and loads
its own 64 query rows. A multicast stage may be refilled only when both CTAs have
released it, so every math warp arrives on the empty barrier of its own CTA and on the
peer's (`cta=peer`), and the empty barriers count 2 x 4 arrivals per phase; each loader
waits on its own empty barrier before arming its full barrier for the next phase. The
loader's body runs on its warp 0 only (`with lm.warps(0, 1)`), a producer warp as in
FA3 and CUTLASS, with `lm.syncwarp()` after each empty wait: rank 1's loader issues no K
or V copy (whose issue would synchronise the warp first), so without it a lagging lane
could reach a wait after the phase it names has completed and the next has begun (the
checker reports that as P007 on `kempty` and `vempty`). The
last releases land on the peer after it has stopped waiting, so every role of both CTAs
ends with `lm.sync_cluster()`. The grid is a multiple of the cluster (2 x cdiv(M, 128));
a CTA past the last query row loads zero rows (pad) and stores nothing (mask). K and V
rings of 2 stages, raw barriers; the softmax is that of raw_kv_rings_s3_d64.cake."""
# expect: clean
@cake.schedule(target="sm_90a", workload="attention", sizes={"D": 64})
def attention_cluster2_kv_multicast_d64(lm, Q, K, V, O):
    BM, BN, S, CX = 64, 64, 2, 2
    lm.launch(grid=(CX * lm.cdiv(lm.M, CX * BM),), warps=8, cluster=(CX, 1, 1))
    q_s = lm.smem("bf16", (BM, 64))
    k_s = lm.smem("bf16", (BN, 64), stages=S)
    v_s = lm.smem("bf16", (BN, 64), stages=S)
    s_s = lm.smem("f32", (BM, BN))
    p_s = lm.smem("bf16", (BM, BN))
    c_s = lm.smem("f32", (BM,))
    l_s = lm.smem("f32", (BM,))
    qbar = lm.mbarrier(count=1)
    kfull = lm.mbarrier(count=1, stages=S)           # each CTA arms what lands in it
    kempty = lm.mbarrier(count=CX * 4, stages=S)     # 4 math warps of each CTA
    vfull = lm.mbarrier(count=1, stages=S)
    vempty = lm.mbarrier(count=CX * 4, stages=S)
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
    rank = lm.cluster_rank(0)
    peer = 1 - rank
    m0 = lm.block(0) * BM
    with loader:
        with lm.warps(0, 1):                                     # the producer warp
            qbar[0].arrive_expect_tx(bytes=lm.nbytes(q_s))
            q_s[0].load(Q, at=(m0, 0), barrier=qbar[0], pad=True)
            for j in lm.range(0, lm.cdiv(lm.N, BN)):
                kempty[j % S].wait(parity=(j // S + 1) % 2)
                lm.syncwarp()                                        # every lane has passed
                kfull[j % S].arrive_expect_tx(bytes=lm.nbytes(k_s))
                for lead in lm.range(rank, 1):                       # rank 0 issues for both
                    k_s[j % S].load(K, at=(j * BN, 0), barrier=kfull[j % S], pad=True,
                                    multicast=0b11)
                vempty[j % S].wait(parity=(j // S + 1) % 2)
                lm.syncwarp()
                vfull[j % S].arrive_expect_tx(bytes=lm.nbytes(v_s))
                for lead in lm.range(rank, 1):
                    v_s[j % S].load(V, at=(j * BN, 0), barrier=vfull[j % S], pad=True,
                                    multicast=0b11)
        lm.sync_cluster()                                        # peers' releases landed
    with math:
        lm.fill(acc, 0.0)
        lm.fill(m, -1e30)
        lm.fill(l, 0.0)
        qbar[0].wait(parity=0)
        for j in lm.range(0, lm.cdiv(lm.N, BN)):
            kfull[j % S].wait(parity=(j // S) % 2)
            lm.mma(s, q_s[0], k_s[j % S], transpose_b=True, init=True)
            kempty[j % S].arrive()                               # this CTA's loader
            kempty[j % S].arrive(cta=peer)                       # the peer's (multicast)
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
            vempty[j % S].arrive()
            vempty[j % S].arrive(cta=peer)
        lm.elementwise(l_s[0], l, op="copy")
        team.sync()                                              # l_s complete
        lm.rowwise(acc, acc, l_s[0], op="div")
        lm.store(O, at=(m0, 0), src=acc, mask=True)
        lm.sync_cluster()
