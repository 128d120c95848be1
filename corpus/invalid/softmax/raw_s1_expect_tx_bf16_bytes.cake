"""Derived from corpus/valid/softmax/rows_raw_s1_loader_warp.cake with the transaction
bytes written out by hand for a 2-byte element (`BR * 128 * 2` = 16,384 B, the tile of a
bf16 softmax) while `x_s` holds f32 logits (32,768 B per tile). The phase of `full[0]`
expects half of what the copy delivers: if the copy reports its bytes in pieces, the
phase completes when 16,384 B have landed and the math role reads rows of `x_s` the copy
is still writing (race); if the bytes arrive together, the transaction count overshoots
to -16,384, never returns to zero, and the math role waits forever on its first tile
(deadlock, the simulator's outcome). The armed bytes must be `lm.nbytes(x_s)`."""
@cake.schedule(target="sm_90a", workload="softmax", sizes={"N": 128})
def softmax_raw_s1_tx_bf16(lm, X, Y):
    BR, TILES, S = 64, 4, 1
    lm.launch(grid=(lm.cdiv(lm.M, BR * TILES),), warps=8)
    x_s = lm.smem("f32", (BR, 128), stages=S)
    full = lm.mbarrier(count=1, stages=S)
    empty = lm.mbarrier(count=4, stages=S)                   # one arrive per math warp
    loader = lm.role(warps=range(0, 4), regs=24)
    math = lm.role(warps=range(4, 8), regs=240)
    mx = lm.fragment("f32", (BR,), role=math)
    sm = lm.fragment("f32", (BR,), role=math)
    e = lm.fragment("f32", (BR, 128), role=math)
    r0 = lm.block(0) * BR * TILES
    with loader:
        with lm.warps(0, 1):                                 # the producer warp
            for t in lm.range(0, TILES):
                empty[t % S].wait(parity=(t // S + 1) % 2)
                full[t % S].arrive_expect_tx(bytes=BR * 128 * 2)  # expect: P003
                x_s[t % S].load(X, at=(r0 + t * BR, 0), barrier=full[t % S], pad=True)
    with math:
        for t in lm.range(0, TILES):
            full[t % S].wait(parity=(t // S) % 2)
            lm.reduce(mx, x_s[t % S], op="max", axis=1)
            lm.rowwise(e, x_s[t % S], mx, op="sub")           # last read of the stage
            lm.syncwarp()                                     # every lane has read it
            empty[t % S].arrive()
            lm.elementwise(e, e, op="exp")
            lm.reduce(sm, e, op="sum", axis=1)
            lm.rowwise(e, e, sm, op="div")
            lm.store(Y, at=(r0 + t * BR, 0), src=e, mask=True)
