"""k-means assignment that stages each CTA's labels in the shared memory of its point tile
(`l_s` aliases `x_s`) without the named barrier between the distance computation and the
label writes: a math thread that has finished its rows writes its labels over the first
512 bytes of `x_s` (points 0 and 1) while other threads of the warpgroup may still be
reading those point rows for their distances (each thread's distances read every column
of its own row, and the label of row r lands in the bytes of row r // 64), so some
distances, and labels, are computed from labels instead of points. Same as
corpus/valid/kmeans_assign/labels_over_points_alias.cake except `team.sync()` is gone
(and with it the named barrier)."""
@cake.schedule(target="sm_90a", workload="kmeans_assign", sizes={"K": 16, "D": 64}, divisible={"N": 4})
def kmeans_labels_over_points(lm, X, C, labels):
    BR = 128
    lm.launch(grid=(lm.cdiv(lm.N, BR),), warps=5)
    c_s = lm.smem("f32", (16, 64))
    x_s = lm.smem("f32", (BR, 64))
    l_s = lm.smem("i32", (BR,), alias=x_s)            # the labels over the points
    cbar = lm.mbarrier(count=1)
    xbar = lm.mbarrier(count=1)

    loader = lm.role(warps=range(0, 1))
    math = lm.role(warps=range(1, 5))
    dist = lm.fragment("f32", (BR, 16), role=math)
    lab = lm.fragment("i32", (BR,), role=math)
    r0 = lm.block(0) * BR
    with loader:
        cbar[0].arrive_expect_tx(bytes=lm.nbytes(c_s))
        c_s[0].load(C, at=(0, 0), barrier=cbar[0])
        xbar[0].arrive_expect_tx(bytes=lm.nbytes(x_s))
        x_s[0].load(X, at=(r0, 0), barrier=xbar[0], pad=True)
    with math:
        cbar[0].wait(parity=0)
        xbar[0].wait(parity=0)
        lm.sqdist(dist, x_s[0], c_s)
        lm.reduce(lab, dist, op="argmin", axis=1)
        lm.elementwise(l_s[0], lab, op="copy")  # expect: P020
        lm.fence_proxy()                              # generic writes -> bulk store
        l_s[0].store_async(labels, at=(r0,), mask=True)
        lm.store_wait(pending=0)
