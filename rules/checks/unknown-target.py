"""The schedule's target must be one the rulebook has a hardware table for.

## What it does
Reports a `target=` that names no table under `rules/targets/`, with the closest known
target names. Hardware rules need the target's limits, so they skip such a schedule; this
rule makes sure it is rejected rather than waved through.

## Why is this bad?
Without the target's table no limit (shared memory, registers, instruction shapes, bulk
copies) can be checked, and the lowering cannot choose instructions: the schedule would
reach the GPU unverified, or not compile for the intended architecture.

## Failing example
`corpus/invalid/gemm/target_typo.cake`:
```python
@cake.schedule(target="sm90a", workload="gemm", divisible={"K": 64})
```

## Passing example
`corpus/valid/gemm/ws_pipeline_s4.cake`:
```python
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
```
"""

import difflib

CODE = "N002"
NAME = "unknown-target"
VERSION = "1.0.0"
SEVERITY = "blocking"
CATEGORY = "names"
STATUS = "stable"
MOTIVATED_BY = ("corpus/invalid/gemm/target_typo.cake",)


def check(ctx):
    known = tuple(ctx.known_targets)
    target = ctx.schedule.target
    if not known or target in known:
        return
    close = difflib.get_close_matches(target, known, n=3, cutoff=0.5)
    listed = ", ".join(f"`{t}`" for t in known)
    hint = (f"did you mean `{close[0]}`?" if close else f"use one of {listed}")
    yield ctx.finding(
        ctx.schedule.target_span,
        f"unknown target `{target}`" + (f" (did you mean `{close[0]}`?)" if close else "")
        + f"; the rulebook has tables for {listed}",
        condition="target names a table under rules/targets/",
        hint=hint,
        resource=target,
        path="schedule.target",
        evidence={"target": target, "known": list(known), "suggestions": close},
    )
