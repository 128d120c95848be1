"""A thread-block cluster may not hold more CTAs than the target supports.

## What it does
Multiplies the dimensions of `lm.launch(..., cluster=(x, y, z))` and rejects the launch
when the product exceeds what the target allows: its portable `cluster_max` (8 CTAs on
sm_90a and sm_100a; 1 on sm_80, which has no clusters), or, when the launch opts in with
`cluster_nonportable=True`, its `cluster_max_nonportable` (16 on sm_90a and sm_100a). A
cluster between the two without the opt-in is rejected with the opt-in as the hint. The
finding points at the `lm.launch` line; otherwise the hint gives a cluster shape that fits,
obtained by halving the largest dimension until it does.

## Why is this bad?
A launch with an unsupported cluster size fails (`cudaErrorInvalidClusterSize`): a
cluster above the portable size runs only when the kernel carries the attribute
`cudaFuncAttributeNonPortableClusterSizeAllowed` (which the lowering sets exactly when the
schedule opts in), and no cluster above the hardware's non-portable size runs at all. The
candidate spends a compile and a GPU slot for no measurement.

## Failing example
`corpus/invalid/gemm/cluster_too_large.cake`:
```python
lm.launch(grid=(lm.cdiv(lm.M, BM), lm.cdiv(lm.N, BN)), warps=8, cluster=(4, 4, 1))
```

## Passing example
`corpus/valid/gemm/raw_barriers_s2.cake`:
```python
lm.launch(grid=(lm.cdiv(lm.M, BM), lm.cdiv(lm.N, BN)), warps=8)
```
"""

CODE = "R008"
NAME = "cluster-size"
VERSION = "1.1.0"
SEVERITY = "blocking"
CATEGORY = "resources"
STATUS = "stable"
MOTIVATED_BY = ("corpus/invalid/gemm/cluster_too_large.cake",)


def _product(dims):
    n = 1
    for d in dims:
        n *= d
    return n


def fitting_cluster(dims, limit):
    """`dims` with the largest dimension halved (rounding up) until the product fits."""
    dims = list(dims)
    while _product(dims) > max(limit, 1):
        i = dims.index(max(dims))
        dims[i] = max(1, (dims[i] + 1) // 2) if dims[i] > 2 else dims[i] - 1
    return tuple(dims)


def check(ctx):
    launch = ctx.schedule.launch
    if ctx.target is None or launch is None or ctx.target.get("cluster_max") is None:
        return
    portable = ctx.target["cluster_max"]
    nonportable = max(ctx.target.get("cluster_max_nonportable") or portable, portable)
    opted = launch.cluster_nonportable
    limit, key = (nonportable, "cluster_max_nonportable") if opted else (portable,
                                                                         "cluster_max")
    size = _product(launch.cluster)
    if size <= limit:
        return
    dims = " x ".join(str(d) for d in launch.cluster)
    if limit <= 1:
        hint = f"remove `cluster=`: {ctx.target.name} launches single CTAs"
    elif not opted and size <= nonportable:
        hint = (f"add `cluster_nonportable=True` to `lm.launch` ({ctx.target.name} runs up to "
                f"{nonportable} CTAs per cluster with the non-portable opt-in), or use "
                f"`cluster={fitting_cluster(launch.cluster, portable)}`")
    else:
        fit = fitting_cluster(launch.cluster, limit)
        hint = f"use `cluster={fit}` ({_product(fit)} CTAs)"
    which = "with the non-portable opt-in" if opted else "portably"
    yield ctx.finding(
        launch,
        f"the cluster {dims} has {size} CTAs but {ctx.target.name} allows at most {limit} "
        f"{which}",
        condition=f"product of cluster dims {size} <= {key} {limit}",
        hint=hint,
        resource="cluster",
        evidence={"cluster": list(launch.cluster), "size": size, "limit": limit,
                  "nonportable": opted, "source": ctx.target.source(key)},
    )
