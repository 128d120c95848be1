"""Shared memory of one CTA must fit the target's per-CTA limit.

## What it does
Adds up the CTA's shared memory exactly as the lowering lays it out: every buffer times
its stages, the alignment padding between buffers (swizzled buffers align to their
swizzle repeat), the mbarriers (8 bytes each; a pipeline owns a full and an empty barrier
per stage), the zero row that zero-padded loads copy from (as wide as the widest padded
tile row) and the slack reserved to align the dynamic shared-memory base at run time.
It rejects the schedule when the total exceeds the target's `smem_per_cta`.

## Why is this bad?
A launch that asks for more dynamic shared memory than the hardware allows fails at run
time (`cudaErrorInvalidValue` from `cudaFuncSetAttribute`/launch), after GPU time was spent
compiling and scheduling it; the fix, fewer stages or smaller tiles, is known statically.

## Failing example
`corpus/invalid/gemm/smem_over_capacity.cake`:
```python
a_s = lm.smem("bf16", (BM, BK), stages=8, swizzle="128B")
```

## Passing example
`corpus/valid/gemm/ws_pipeline_s4.cake`:
```python
a_s = lm.smem("bf16", (BM, BK), stages=4, swizzle="128B")
```
"""

from cakegov.ir.nodes import PipelineDecl, SmemDecl
from cakegov.lower.layout import smem_layout

CODE = "R001"
NAME = "smem-capacity"
VERSION = "1.0.2"
SEVERITY = "blocking"
CATEGORY = "resources"
STATUS = "stable"
MOTIVATED_BY = ("corpus/invalid/gemm/smem_over_capacity.cake",)


def _fitting_stages(ctx, names, pipeline, limit):
    """The largest stage count for `names` (and `pipeline`) that fits, with its total.
    The total grows with the stage count, so a binary search finds it (a schedule asking
    for 100,000 stages costs 17 layouts, not 100,000)."""

    def total(stages):
        resources = tuple(
            d.model_copy(update={"stages": stages})
            if d.name in names or d.name == pipeline else d
            for d in ctx.schedule.resources
        )
        return smem_layout(ctx.schedule.model_copy(update={"resources": resources})
                           ).total_bytes

    lo, hi = 0, max(d.stages for d in ctx.decls(SmemDecl) if d.name in names) - 1
    best = None
    while lo < hi:  # the largest s in [1, hi] with total(s) <= limit
        mid = (lo + hi + 1) // 2
        size = total(mid)
        if size <= limit:
            lo, best = mid, (mid, size)
        else:
            hi = mid - 1
    return best


def check(ctx):
    if ctx.target is None:
        return
    limit = ctx.target["smem_per_cta"]
    layout = ctx.layout
    if layout.total_bytes <= limit:
        return
    buffers = ctx.decls(SmemDecl)
    largest = max(buffers, key=lambda d: d.stage_bytes * d.stages, default=None)
    anchor = largest if largest is not None else ctx.schedule
    hint = "use fewer stages or smaller tiles"
    if largest is not None and largest.stages > 1:
        ring = next((p for p in ctx.decls(PipelineDecl) if largest.name in p.buffers), None)
        names = set(ring.buffers) if ring is not None else {largest.name}
        fit = _fitting_stages(ctx, names, ring.name if ring else None, limit)
        if fit is not None:
            owner = f"pipeline `{ring.name}`" if ring is not None else f"`{largest.name}`"
            hint = (f"use {fit[0]} stages for {owner} ({fit[1]:,} bytes), or smaller tiles")
    yield ctx.finding(
        anchor,
        f"shared memory needs {layout.total_bytes:,} bytes per CTA but {ctx.target.name} "
        f"allows {limit:,}",
        condition=(f"buffers {layout.data_bytes:,} + padding {layout.padding_bytes:,} + "
                   f"mbarriers {layout.barrier_bytes:,} + zero row {layout.zero_bytes:,} + "
                   f"base alignment slack "
                   f"{layout.base_slack:,} <= smem_per_cta {limit:,}"),
        hint=hint,
        resource=largest.name if largest is not None else None,
        evidence={
            "total_bytes": layout.total_bytes,
            "limit": limit,
            "buffers": {b.name: {"offset": b.offset, "stages": b.stages,
                                 "stage_bytes": b.stage_bytes} for b in layout.buffers},
            "source": ctx.target.source("smem_per_cta"),
        },
    )
