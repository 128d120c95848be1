"""An mbarrier's arrival count must be one `mbarrier.init` accepts.

## What it does
Checks that every `lm.mbarrier(count=c)` has `1 <= c <= mbarrier_max_count` (2^20 - 1
on sm_80, sm_90a and sm_100a), and the same for a pipeline's `full_count=` and
`empty_count=` when the schedule gives them (when omitted the compiler derives them).
The hint suggests the number of arrivals the schedule actually makes per phase on that
barrier: one per `arrive_expect_tx` (or one per warp with `per="warp"`), and for `arrive`
one per warp of the role (`per="warp"`, the default), one per role (`per="role"`) or
one per thread (`per="thread"`).

## Why is this bad?
`mbarrier.init` with a count of 0 or beyond the hardware's arrival counter is undefined
behaviour: the phase may complete immediately (consumers read before the data lands) or
never (deadlock). Neither shows up as an error; the kernel computes garbage or hangs.

## Failing example
`corpus/invalid/kmeans_assign/mbarrier_count_zero.cake`:
```python
cbar = lm.mbarrier(count=0)
```

## Passing example
`corpus/valid/kmeans_assign/rows_pipelined_s2.cake`:
```python
cbar = lm.mbarrier(count=1)
```
"""

from cakegov.ir.nodes import MBarrierDecl, PipelineDecl

CODE = "R009"
NAME = "mbarrier-count"
VERSION = "1.0.0"
SEVERITY = "blocking"
CATEGORY = "resources"
STATUS = "stable"
MOTIVATED_BY = ("corpus/invalid/kmeans_assign/mbarrier_count_zero.cake",)


def _per(call):
    value = call.args.get("per")
    return getattr(value, "value", None)


def arrivals_per_phase(ctx, name):
    """Arrivals the schedule's call sites make on one element of raw mbarrier `name`,
    assuming each call site arrives once per phase; None when nothing arrives."""
    total = 0
    for site in ctx.calls():
        actions = ctx.effects(site.call).barriers
        if not any(b.op == "arrive" and b.barrier == name and b.pipeline_side is None
                   for b in actions):
            continue
        warps = len(site.role.warps)
        per = _per(site.call)
        if any(b.op == "expect_tx" for b in actions):
            total += warps if per == "warp" else 1
        elif per == "role":
            total += 1
        elif per == "thread":
            total += 32 * warps
        else:
            total += warps
    return total or None


def _finding(ctx, decl, field, value, limit, suggested):
    if suggested is not None and 1 <= suggested <= limit:
        hint = (f"use `{field}={suggested}`: the schedule makes {suggested} arrival(s) per "
                f"phase on `{decl.name}`")
    elif isinstance(decl, PipelineDecl):
        hint = f"remove `{field}=` and let the compiler derive it from the roles"
    else:
        hint = (f"set `{field}=` to the number of arrivals that complete one phase "
                f"(1..{limit:,}; an `arrive_expect_tx` counts as one)")
    return ctx.finding(
        decl,
        f"{'pipeline' if isinstance(decl, PipelineDecl) else 'mbarrier'} `{decl.name}` has "
        f"`{field}={value}`: mbarrier.init accepts 1..{limit:,} arrivals",
        condition=f"1 <= {field} <= mbarrier_max_count {limit:,}",
        hint=hint,
        resource=decl.name,
        evidence={field: value, "max": limit, "suggested": suggested,
                  "source": ctx.target.source("mbarrier_max_count")},
    )


def check(ctx):
    if ctx.target is None or ctx.target.get("mbarrier_max_count") is None:
        return
    limit = ctx.target["mbarrier_max_count"]
    for decl in ctx.schedule.resources:
        if isinstance(decl, MBarrierDecl) and not 1 <= decl.count <= limit:
            yield _finding(ctx, decl, "count", decl.count, limit,
                           arrivals_per_phase(ctx, decl.name))
        if isinstance(decl, PipelineDecl):
            for field in ("full_count", "empty_count"):
                value = getattr(decl, field)
                if value is not None and not 1 <= value <= limit:
                    yield _finding(ctx, decl, field, value, limit, None)
