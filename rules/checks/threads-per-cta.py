"""The launch may not ask for more threads per CTA than the target allows.

## What it does
Checks `lm.launch(..., warps=W)`: the CTA has `W x 32` threads, which must not exceed the
target's `threads_per_cta` (1024 on sm_80, sm_90a and sm_100a, i.e. 32 warps). The
finding points at the `lm.launch` line and the hint gives the largest warp count allowed.

## Why is this bad?
A launch with too many threads per block fails with `cudaErrorInvalidConfiguration`
before any thread runs: the candidate wastes a compile and a GPU slot and yields no
measurement.

## Failing example
`corpus/invalid/scale/threads_over_limit.cake`:
```python
lm.launch(grid=(lm.cdiv(lm.M, TM), lm.cdiv(lm.N, TN)), warps=64)
```

## Passing example
`corpus/valid/scale/tile_1stage.cake`:
```python
lm.launch(grid=(lm.cdiv(lm.M, TM), lm.cdiv(lm.N, TN)), warps=4)
```
"""

CODE = "R005"
NAME = "threads-per-cta"
VERSION = "1.0.0"
SEVERITY = "blocking"
CATEGORY = "resources"
STATUS = "stable"
MOTIVATED_BY = ("corpus/invalid/scale/threads_over_limit.cake",)


def check(ctx):
    launch = ctx.schedule.launch
    if ctx.target is None or launch is None or ctx.target.get("threads_per_cta") is None:
        return
    limit = ctx.target["threads_per_cta"]
    if launch.threads <= limit:
        return
    yield ctx.finding(
        launch,
        f"the launch asks for {launch.warps} warps = {launch.threads:,} threads per CTA but "
        f"{ctx.target.name} allows {limit:,}",
        condition=f"warps x 32 = {launch.threads:,} <= threads_per_cta {limit:,}",
        hint=f"launch at most `warps={limit // 32}` ({limit // 32 * 32:,} threads) and shrink "
             "the roles to fit, or give each CTA a smaller tile",
        resource="threads",
        evidence={"warps": launch.warps, "threads": launch.threads, "limit": limit,
                  "source": ctx.target.source("threads_per_cta")},
    )
