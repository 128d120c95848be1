"""k-means assignment with one 128-row point tile per CTA whose labels are staged in the
shared memory of the points themselves: `l_s` (128 labels, 512 bytes) is an alias of
`x_s` (`alias=x_s`, no storage of its own), as CUTLASS unions mainloop and epilogue
storage. Once the distances are in registers the math warpgroup meets at a named barrier
over its 128 threads (`bar.sync 1, 128`), so every thread's reads of the point rows are
done before any thread writes labels over them; then the labels are written with
generic stores, fenced against the async proxy, bulk-stored (a masked store of
`N - r0` labels in the tail CTA, a multiple of 16 bytes by `divisible={"N": 4}`) and
drained before the kernel exits. The centroids and the point tile arrive on two
barriers of one loader warp."""
# expect: clean
@cake.schedule(target="sm_90a", workload="kmeans_assign", sizes={"K": 16, "D": 64}, divisible={"N": 4})
def kmeans_labels_over_points(lm, X, C, labels):
    BR = 128
    lm.launch(grid=(lm.cdiv(lm.N, BR),), warps=5)
    c_s = lm.smem("f32", (16, 64))
    x_s = lm.smem("f32", (BR, 64))
    l_s = lm.smem("i32", (BR,), alias=x_s)            # the labels over the points
    cbar = lm.mbarrier(count=1)
    xbar = lm.mbarrier(count=1)
    team = lm.named_barrier(id=1, threads=128)        # the math warpgroup
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
        team.sync()                                   # every thread is done with x_s
        lm.elementwise(l_s[0], lab, op="copy")
        lm.fence_proxy()                              # generic writes -> bulk store
        l_s[0].store_async(labels, at=(r0,), mask=True)
        lm.store_wait(pending=0)
