"""valid/attention/fa3_persistent_causal_d128.cake launched as FA3 launches it, one CTA
per SM of an H100 SXM (SMS = 132), with MMA warpgroup 0 restarting the K/V ring position
at every work tile: its key-block loop derives stage and parity from `j` (`kfull[j % S]`,
`(j // S) % 2`, `kempty[j % S]`, the same for V) while the producer and warpgroup 1 keep
FA3's `smem_pipe_read` / `smem_pipe_write` (the counter `kv`) and the barriers' phases
carry over. At the workload's check shapes (at most 16 query tiles of 128 rows) every
CTA takes one tile, so the analysis adds a shape in which CTA 0 walks several tiles
(M grown to 65536; N and the head dimension kept): its first tile (t = 0) has two key
blocks, so on its second (t = 132) the producer fills position 2 (stage 0, phase 1)
while warpgroup 0 waits `kfull[0]` with parity 0, passes on the phase of tile 0 and
reads `k_s` stage 0 while the copy is still in flight (race). The repair is the
counter: `lm.range(0, nkv, counter=kv)`, and `kv` wherever the loop derives a position."""
@cake.schedule(target="sm_90a", workload="attention_causal", sizes={"D": 128})
def attention_fa3_persistent_sms132_math0_restart(lm, Q, K, V, O):
    BH, BN, S, SMS = 64, 64, 2, 132
    QT = lm.cdiv(lm.M, 2 * BH)                       # work tiles: query tiles of 128 rows
    lm.launch(grid=(SMS,), warps=12)
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
    # FA3's budgets for two MMA warpgroups (flash_fwd_kernel_sm90.h: LoadRegisterRequirement
    # 24, MmaRegisterRequirement 240); at 232 the MMA code of this transcription spills 8 B
    loader = lm.role(warps=range(0, 4), regs=24)
    math0 = lm.role(warps=range(4, 8), regs=240)
    math1 = lm.role(warps=range(8, 12), regs=240)
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
    kv = lm.counter()                               # smem_pipe_write / smem_pipe_read
    w = lm.counter()                                # work_idx
    with loader:
        for t in lm.range(lm.block(0), QT, lm.grid(0), counter=w):
            r0 = t * 2 * BH
            nkv = lm.min(lm.cdiv((t + 1) * 2 * BH, BN), lm.cdiv(lm.N, BN))  # n_block_max
            qempty.sync()                                    # the MMA warpgroups freed smem_q
            qbar[0].arrive_expect_tx(bytes=lm.nbytes(q0_s, q1_s))
            q0_s[0].load(Q, at=(r0, 0), barrier=qbar[0], pad=True)
            q1_s[0].load(Q, at=(r0 + BH, 0), barrier=qbar[0], pad=True)
            o_done[0].wait(parity=(w + 1) % 2)               # the previous tile's O is out
            for j in lm.range(0, nkv, counter=kv):
                n = nkv - 1 - j                              # from the last key block down
                kempty[kv % S].wait(parity=(kv // S + 1) % 2)
                kfull[kv % S].arrive_expect_tx(bytes=lm.nbytes(k_s))
                k_s[kv % S].load(K, at=(n * BN, 0), barrier=kfull[kv % S], pad=True)
                vempty[kv % S].wait(parity=(kv // S + 1) % 2)
                vfull[kv % S].arrive_expect_tx(bytes=lm.nbytes(v_s))
                v_s[kv % S].load(V, at=(n * BN, 0), barrier=vfull[kv % S], pad=True)
        o_done[0].wait(parity=(w + 1) % 2)                   # load_tail
        for tail in lm.range(0, S, counter=kv):
            kempty[kv % S].wait(parity=(kv // S + 1) % 2)
            vempty[kv % S].wait(parity=(kv // S + 1) % 2)
    with math0:
        qempty.arrive()                                      # mma_init: smem_q is free
        for t in lm.range(lm.block(0), QT, lm.grid(0), counter=w):
            r0 = t * 2 * BH
            nkv = lm.min(lm.cdiv((t + 1) * 2 * BH, BN), lm.cdiv(lm.N, BN))
            lm.fill(acc0, 0.0)
            lm.fill(m0, -1e30)
            lm.fill(l0, 0.0)
            qbar[0].wait(parity=w % 2)                       # work_idx % 2
            for j in lm.range(0, nkv):  # expect: P026
                n = nkv - 1 - j
                kfull[j % S].wait(parity=(j // S) % 2)
                sched0.sync()
                lm.mma(s0, q0_s[0], k_s[j % S], transpose_b=True, init=True)
                sched1.arrive()
                kempty[j % S].arrive()
                lm.elementwise(s0_s[0], s0, op="scale", alpha=0.08838834764831845)
                team0.sync()
                lm.elementwise(srow0, s0_s[0], op="copy")
                lm.mask(srow0, row0=r0 + 0, col0=n * BN, cols=lm.N, causal=True)
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
            qempty.arrive()                                  # the tile's last read of smem_q
            lm.elementwise(l0_s[0], l0, op="copy")
            team0.sync()
            lm.rowwise(acc0, acc0, l0_s[0], op="div")
            lm.store(O, at=(r0 + 0, 0), src=acc0, mask=True)
            o_done[0].arrive(per="role")                    # O hand-back
    with math1:
        qempty.arrive()                                      # mma_init: smem_q is free
        sched0.arrive()                                     # mma_init: WG2 lets WG1 go first
        for t in lm.range(lm.block(0), QT, lm.grid(0), counter=w):
            r0 = t * 2 * BH
            nkv = lm.min(lm.cdiv((t + 1) * 2 * BH, BN), lm.cdiv(lm.N, BN))
            lm.fill(acc1, 0.0)
            lm.fill(m1, -1e30)
            lm.fill(l1, 0.0)
            qbar[0].wait(parity=w % 2)                       # work_idx % 2
            for j in lm.range(0, nkv, counter=kv):
                n = nkv - 1 - j
                kfull[kv % S].wait(parity=(kv // S) % 2)
                sched1.sync()
                lm.mma(s1, q1_s[0], k_s[kv % S], transpose_b=True, init=True)
                sched0.arrive()
                kempty[kv % S].arrive()
                lm.elementwise(s1_s[0], s1, op="scale", alpha=0.08838834764831845)
                team1.sync()
                lm.elementwise(srow1, s1_s[0], op="copy")
                lm.mask(srow1, row0=r0 + 64, col0=n * BN, cols=lm.N, causal=True)
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
                vfull[kv % S].wait(parity=(kv // S) % 2)
                lm.mma(acc1, p1_s[0], v_s[kv % S])
                vempty[kv % S].arrive()
            qempty.arrive()                                  # the tile's last read of smem_q
            lm.elementwise(l1_s[0], l1, op="copy")
            team1.sync()
            lm.rowwise(acc1, acc1, l1_s[0], op="div")
            lm.store(O, at=(r0 + 64, 0), src=acc1, mask=True)
            o_done[0].arrive(per="role")                    # O hand-back
