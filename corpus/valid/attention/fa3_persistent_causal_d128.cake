"""The FlashAttention-3 forward kernel, persistent and causal (Dao-AILab/flash-attention:
`hopper/flash_fwd_kernel_sm90.h`, its mainloop `hopper/mainloop_fwd_sm90_tma_gmma_ws.hpp`
and `StaticPersistentTileScheduler` in `hopper/tile_scheduler.hpp`), head dim 128: the
protocol of fa3_mainloop_d128.cake (a producer warpgroup, two MMA warpgroups of 64 query
rows each, Q through `barrier_Q` after `QueryEmpty`, K and V through two 2-stage rings,
the warp-scheduler barriers between the warpgroups' QK^T GEMMs, `barrier_O` before the V
loads) run over work tiles.

The scheduler launches `num_sm` CTAs (SMS = 2 here, small enough that the check shapes
give CTAs several tiles and a CTA one tile fewer than another) and CTA b takes the query
tiles b, b + SMS, ... (`get_next_work`: `tile_idx + gridDim.x`); the workload has one
head, so a work tile is a query tile. Causal masking gives each tile its own number of
key blocks, `n_block_max = min(cdiv((m_block + 1) * kBlockM, kBlockN), cdiv(seqlen_k,
kBlockN))`, visited from the last down as FA3 does (the diagonal block first). The K/V
ring positions are the counter `kv`, FA3's `smem_pipe_write` / `smem_pipe_read`: every
role advances it once per key block and keeps it from tile to tile, so a tile of 2 key
blocks followed by one of 6 starts the second on the stage and phase where the first
ended. `work_idx` is the counter `w` the tile loops advance: the consumers wait on
`barrier_Q` with parity `w % 2`, the producer on `barrier_O` with `(w + 1) % 2`; the
QueryEmpty named barrier pairs each Q load with the consumers' arrivals after the
previous tile's last GEMM that reads Q (the first with `mma_init`'s). After its last tile
the producer runs `load_tail`: `barrier_O` with `(w + 1) % 2`, then every stage of both
rings acquired once more. The warp-scheduler barriers keep alternating across tiles
(math1's `mma_init` arrive on math0's barrier starts the sequence once per CTA, as in
FA3 where the second MMA warpgroup makes it; math1's last arrive stays pending at exit,
which is legal).

Phase trace (M = N = 257, so 3 query tiles: CTA 0 takes tiles 0 and 2, CTA 1 tile 1;
kBlockN = 64): CTA 0's tile 0 has min(2, 5) = 2 key blocks at kv = 0, 1 (stages 0, 1,
full parity 0), tile 2 min(6, 5) = 5 at kv = 2..6 (stages 0, 1, 0, 1, 0; parities 1, 1,
0, 0, 1); `barrier_Q` parity 0 then 1, `barrier_O` parity 1 (fresh) then 0 (tile 0's O);
the tail waits `barrier_O` parity 1 (tile 2's O) and acquires kv = 7, 8.

FA3 keeps P in registers, overlaps softmax and GEMMs across key blocks
(IntraWGOverlap) and stores O through shared memory with TMA; this transcription keeps
the synchronisation protocol and moves P and the correction through shared memory."""
# expect: clean
@cake.schedule(target="sm_90a", workload="attention_causal", sizes={"D": 128})
def attention_fa3_persistent_causal(lm, Q, K, V, O):
    BH, BN, S, SMS = 64, 64, 2, 2
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
            for j in lm.range(0, nkv, counter=kv):
                n = nkv - 1 - j
                kfull[kv % S].wait(parity=(kv // S) % 2)
                sched0.sync()
                lm.mma(s0, q0_s[0], k_s[kv % S], transpose_b=True, init=True)
                sched1.arrive()
                kempty[kv % S].arrive()
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
                vfull[kv % S].wait(parity=(kv // S) % 2)
                lm.mma(acc0, p0_s[0], v_s[kv % S])
                vempty[kv % S].arrive()
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
