"""Derived from corpus/valid/attention/fa3_mainloop_d128.cake with math0's `mma_init`
arrive on its own warp-scheduler barrier deleted: math0's first `sched0.sync()` waits for
256 threads, math1 only arrives on barrier 9 after its own GEMM, which waits on barrier 10
for math0's GEMM (deadlock). The repair is the deleted statement: math1 signals `sched0`
once before its key-block loop (FA3's `mma_init`), labelled at that loop. Before P015
proposed priming a scheduler barrier this was the corpus's one P099."""
@cake.schedule(target="sm_90a", workload="attention", sizes={"D": 128})
def attention_fa3_no_sched_init(lm, Q, K, V, O):
    BH, BN, S = 64, 64, 2
    lm.launch(grid=(lm.cdiv(lm.M, 2 * BH),), warps=12)
    q0_s = lm.smem("bf16", (BH, 128))
    s0_s = lm.smem("f32", (BH, BN))
    p0_s = lm.smem("bf16", (BH, BN))
    c0_s = lm.smem("f32", (BH,))
    l0_s = lm.smem("f32", (BH,))
    q1_s = lm.smem("bf16", (BH, 128))
    s1_s = lm.smem("f32", (BH, BN))
    p1_s = lm.smem("bf16", (BH, BN))
    c1_s = lm.smem("f32", (BH,))
    l1_s = lm.smem("f32", (BH,))
    k_s = lm.smem("bf16", (BN, 128), stages=S)
    v_s = lm.smem("bf16", (BN, 128), stages=S)
    qbar = lm.mbarrier(count=1)                     # barrier_Q
    o_done = lm.mbarrier(count=2)                   # barrier_O: one arrive per MMA warpgroup
    kfull = lm.mbarrier(count=1, stages=S)          # pipeline_k
    kempty = lm.mbarrier(count=8, stages=S)
    vfull = lm.mbarrier(count=1, stages=S)          # pipeline_v
    vempty = lm.mbarrier(count=8, stages=S)
    team0 = lm.named_barrier(id=1, threads=128)     # math0's layout hand-overs
    team1 = lm.named_barrier(id=2, threads=128)     # math1's layout hand-overs
    qempty = lm.named_barrier(id=3, threads=384)    # QueryEmpty
    sched0 = lm.named_barrier(id=9, threads=256)    # WarpSchedulerWG1
    sched1 = lm.named_barrier(id=10, threads=256)   # WarpSchedulerWG2
    loader = lm.role(warps=range(0, 4), regs=40)
    math0 = lm.role(warps=range(4, 8), regs=232)
    math1 = lm.role(warps=range(8, 12), regs=232)
    s0 = lm.fragment("f32", (BH, BN), role=math0)
    acc0 = lm.fragment("f32", (BH, 128), role=math0)
    srow0 = lm.fragment("f32", (BH, BN), role=math0)
    m0 = lm.fragment("f32", (BH,), role=math0)
    mn0 = lm.fragment("f32", (BH,), role=math0)
    mt0 = lm.fragment("f32", (BH,), role=math0)
    corr0 = lm.fragment("f32", (BH,), role=math0)
    ts0 = lm.fragment("f32", (BH,), role=math0)
    l0 = lm.fragment("f32", (BH,), role=math0)
    s1 = lm.fragment("f32", (BH, BN), role=math1)
    acc1 = lm.fragment("f32", (BH, 128), role=math1)
    srow1 = lm.fragment("f32", (BH, BN), role=math1)
    m1 = lm.fragment("f32", (BH,), role=math1)
    mn1 = lm.fragment("f32", (BH,), role=math1)
    mt1 = lm.fragment("f32", (BH,), role=math1)
    corr1 = lm.fragment("f32", (BH,), role=math1)
    ts1 = lm.fragment("f32", (BH,), role=math1)
    l1 = lm.fragment("f32", (BH,), role=math1)
    r0 = lm.block(0) * 2 * BH
    with loader:
        qempty.sync()                                        # the MMA warpgroups freed smem_q
        qbar[0].arrive_expect_tx(bytes=lm.nbytes(q0_s, q1_s))
        q0_s[0].load(Q, at=(r0, 0), barrier=qbar[0], pad=True)
        q1_s[0].load(Q, at=(r0 + BH, 0), barrier=qbar[0], pad=True)
        o_done[0].wait(parity=1)                             # (work_idx + 1) % 2: fresh barrier
        for j in lm.range(0, lm.cdiv(lm.N, BN)):
            kempty[j % S].wait(parity=(j // S + 1) % 2)
            kfull[j % S].arrive_expect_tx(bytes=lm.nbytes(k_s))
            k_s[j % S].load(K, at=(j * BN, 0), barrier=kfull[j % S], pad=True)
            vempty[j % S].wait(parity=(j // S + 1) % 2)
            vfull[j % S].arrive_expect_tx(bytes=lm.nbytes(v_s))
            v_s[j % S].load(V, at=(j * BN, 0), barrier=vfull[j % S], pad=True)
    with math0:
        qempty.arrive()                                      # mma_init: smem_q is free
        lm.fill(acc0, 0.0)
        lm.fill(m0, -1e30)
        lm.fill(l0, 0.0)
        qbar[0].wait(parity=0)                               # work_idx % 2
        for j in lm.range(0, lm.cdiv(lm.N, BN)):
            kfull[j % S].wait(parity=(j // S) % 2)
            sched0.sync()
            lm.mma(s0, q0_s[0], k_s[j % S], transpose_b=True, init=True)
            sched1.arrive()
            kempty[j % S].arrive()
            lm.elementwise(s0_s[0], s0, op="scale", alpha=0.08838834764831845)
            team0.sync()
            lm.elementwise(srow0, s0_s[0], op="copy")
            lm.mask(srow0, row0=r0 + 0, col0=j * BN, cols=lm.N)
            lm.reduce(mt0, srow0, op="max", axis=1)
            lm.rowwise(mn0, mt0, m0, op="max")
            lm.rowwise(corr0, m0, mn0, op="sub")
            lm.elementwise(corr0, corr0, op="exp")
            lm.rowwise(srow0, srow0, mn0, op="sub")
            lm.elementwise(srow0, srow0, op="exp")
            lm.reduce(ts0, srow0, op="sum", axis=1)
            lm.rowwise(l0, l0, corr0, op="mul")
            lm.rowwise(l0, l0, ts0, op="add")
            lm.elementwise(m0, mn0, op="copy")
            lm.elementwise(p0_s[0], srow0, op="cast")
            lm.elementwise(c0_s[0], corr0, op="copy")
            team0.sync()
            lm.rowwise(acc0, acc0, c0_s[0], op="mul")
            vfull[j % S].wait(parity=(j // S) % 2)
            lm.mma(acc0, p0_s[0], v_s[j % S])
            vempty[j % S].arrive()
        lm.elementwise(l0_s[0], l0, op="copy")
        team0.sync()
        lm.rowwise(acc0, acc0, l0_s[0], op="div")
        lm.store(O, at=(r0 + 0, 0), src=acc0, mask=True)
        o_done[0].arrive(per="role")                        # O hand-back
    with math1:
        qempty.arrive()                                      # mma_init: smem_q is free
        lm.fill(acc1, 0.0)
        lm.fill(m1, -1e30)
        lm.fill(l1, 0.0)
        qbar[0].wait(parity=0)                               # work_idx % 2
        for j in lm.range(0, lm.cdiv(lm.N, BN)):  # expect: P015
            kfull[j % S].wait(parity=(j // S) % 2)
            sched1.sync()
            lm.mma(s1, q1_s[0], k_s[j % S], transpose_b=True, init=True)
            sched0.arrive()
            kempty[j % S].arrive()
            lm.elementwise(s1_s[0], s1, op="scale", alpha=0.08838834764831845)
            team1.sync()
            lm.elementwise(srow1, s1_s[0], op="copy")
            lm.mask(srow1, row0=r0 + 64, col0=j * BN, cols=lm.N)
            lm.reduce(mt1, srow1, op="max", axis=1)
            lm.rowwise(mn1, mt1, m1, op="max")
            lm.rowwise(corr1, m1, mn1, op="sub")
            lm.elementwise(corr1, corr1, op="exp")
            lm.rowwise(srow1, srow1, mn1, op="sub")
            lm.elementwise(srow1, srow1, op="exp")
            lm.reduce(ts1, srow1, op="sum", axis=1)
            lm.rowwise(l1, l1, corr1, op="mul")
            lm.rowwise(l1, l1, ts1, op="add")
            lm.elementwise(m1, mn1, op="copy")
            lm.elementwise(p1_s[0], srow1, op="cast")
            lm.elementwise(c1_s[0], corr1, op="copy")
            team1.sync()
            lm.rowwise(acc1, acc1, c1_s[0], op="mul")
            vfull[j % S].wait(parity=(j // S) % 2)
            lm.mma(acc1, p1_s[0], v_s[j % S])
            vempty[j % S].arrive()
        lm.elementwise(l1_s[0], l1, op="copy")
        team1.sync()
        lm.rowwise(acc1, acc1, l1_s[0], op="div")
        lm.store(O, at=(r0 + 64, 0), src=acc1, mask=True)
        o_done[0].arrive(per="role")                        # O hand-back
