"""Every launch of the schedule, at every check shape, must fit the target's grid and block limits.

## What it does
Evaluates each extent of `lm.launch(grid=(x, y, z), ...)` at every check shape of the
workload and compares it with the target's `grid_x_max` (2^31 - 1), `grid_y_max` and
`grid_z_max` (65535); an extent below 1 (a floor division that reaches 0 at a small shape)
is rejected too. The CTA is one-dimensional (`warps x 32` threads along x), so its x-extent
is compared with `block_x_max` where that is stricter than the threads-per-CTA limit that
R005 checks. The finding points at the `lm.launch` line and names the axis, the shape,
the extent and the limit with its source.

## Why is this bad?
A launch whose grid exceeds a dimension limit, or has a zero dimension, fails before any
thread runs (`cudaErrorInvalidConfiguration`), but only at the sizes that push it over:
the schedule passes every test at small shapes and fails in production at a large one.
The y and z limits are 32768 times smaller than x's, so a flattened tile index placed on
the wrong axis is the usual cause.

## Failing example
`corpus/invalid/scale/grid_y_over_limit.cake`:
```python
lm.launch(grid=(1, lm.cdiv(lm.M, TM) * NT), warps=4)
```

## Passing example
`corpus/valid/scale/flat_grid_x.cake`:
```python
lm.launch(grid=(lm.cdiv(lm.M, TM) * NT,), warps=4)
```
"""

from cakegov.ir.expr import EvalError

CODE = "R011"
NAME = "launch-limits"
VERSION = "1.0.0"
SEVERITY = "blocking"
CATEGORY = "resources"
STATUS = "stable"
MOTIVATED_BY = ("corpus/invalid/scale/grid_y_over_limit.cake",
                "corpus/invalid/scale/grid_x_2pow31.cake")

AXES = "xyz"


def _shape(sizes):
    return ", ".join(f"{k}={v}" for k, v in sorted(sizes.items()))


def _hint(axis, limit):
    if axis == "x":
        return (f"make each CTA cover more of the output so that at most {limit:,} CTAs "
                "run along x: a larger tile, or a persistent grid (one CTA per SM) with a "
                "grid-stride loop over the tiles")
    return (f"put the largest extent on x (up to 2^31 - 1 CTAs there, {limit:,} on {axis}), "
            "or fold this axis into x and recover the index with `//` and `%`")


def _grid_violation(ctx, launch):
    """(axis, extent, limit key, limit, sizes) of the first extent out of range, scanning
    axes in order and, per axis, the check shapes in order; None when all fit."""
    for i, extent in enumerate(launch.grid):
        axis = AXES[i]
        key = f"grid_{axis}_max"
        limit = ctx.target.get(key)
        if limit is None:
            continue
        for sizes in ctx.shapes:
            try:
                value = ctx.evaluate(extent, sizes)
            except (EvalError, KeyError, ValueError, ZeroDivisionError):
                continue
            if value < 1 or value > limit:
                return axis, value, key, limit, sizes
    return None


def check(ctx):
    launch = ctx.schedule.launch
    if ctx.target is None or launch is None:
        return
    found = _grid_violation(ctx, launch)
    if found is not None:
        axis, value, key, limit, sizes = found
        if value < 1:
            message = (f"at {_shape(sizes)} the grid's {axis}-extent is {value}: a launch "
                       "needs at least one CTA along every axis")
            hint = ("round up (`lm.cdiv(n, tile)`, not `n // tile`) so that a size smaller "
                    "than the tile still gets one CTA")
            condition = f"1 <= grid {axis}-extent {value}"
        else:
            message = (f"at {_shape(sizes)} the grid's {axis}-extent is {value:,} CTAs but "
                       f"{ctx.target.name} allows at most {limit:,} along {axis}")
            hint = _hint(axis, limit)
            condition = f"grid {axis}-extent {value:,} <= {key} {limit:,}"
        yield ctx.finding(
            launch, message, condition=condition, hint=hint, resource="grid",
            evidence={"axis": axis, "extent": value, "limit": limit, "shape": sizes,
                      "source": ctx.target.source(key)})
        return
    block_x, per_cta = ctx.target.get("block_x_max"), ctx.target.get("threads_per_cta")
    if block_x is not None and launch.threads > block_x and (
            per_cta is None or launch.threads <= per_cta):
        yield ctx.finding(
            launch,
            f"the CTA has {launch.threads:,} threads along x but {ctx.target.name} allows at "
            f"most {block_x:,} along a block's x-dimension",
            condition=f"warps x 32 = {launch.threads:,} <= block_x_max {block_x:,}",
            hint=f"launch at most `warps={block_x // 32}`",
            resource="threads",
            evidence={"threads": launch.threads, "limit": block_x,
                      "source": ctx.target.source("block_x_max")})
