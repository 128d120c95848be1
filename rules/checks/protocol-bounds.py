"""A protocol analysis that hit a bound, or could not run, makes the verdict incomplete.

## What it does
Reports, as a coverage finding, every reason the protocol analysis did not cover the
schedule: an unrolled program over its event bound, more distinct (shape, CTA) programs
than the run bound, sizes for which the kernel cannot be unrolled, or a schedule that
could not be lowered. The verdict is then `incomplete` (exit 3), never `clean`. Bounds
are counts, never time, so the verdict is the same on every machine.

## Why is this bad?
An exploration that stopped early proved nothing about the interleavings it did not
visit. Passing such a schedule would claim evidence the verifier did not gather.

## Failing example
`corpus/invalid/gemm/window_over_bound.cake`:
```python
def gemm_triangle(lm, A, B, C):  # expect: P098
```

## Passing example
`corpus/valid/gemm/ws_pipeline_s4.cake`:
```python
    ring = lm.pipeline(stages=4, buffers=[a_s, b_s], producer=loader, consumer=math)
```
"""

CODE = "P098"
NAME = "protocol-bounds"
VERSION = "2.0.0"
SEVERITY = "report"
AUTHORITY = "coverage"
CATEGORY = "protocol"
STATUS = "stable"
PHASE = "final"
MOTIVATED_BY = ("corpus/invalid/gemm/window_over_bound.cake",)


def check(ctx):
    if any(f.severity == "blocking" for f in ctx.findings):
        return
    result = ctx.protocol
    if result is None:
        if ctx.lowered is None and ctx.lowering_error:
            yield ctx.finding(
                ctx.schedule, f"protocol not analysed: {ctx.lowering_error}",
                condition="the schedule lowers, so the protocol can be explored",
            )
        return
    for reason in result.incomplete:
        yield ctx.finding(
            ctx.schedule, f"protocol analysis incomplete: {reason}",
            condition="the analysis finished within its bounds",
            hint="shorten the loops that are not periodic, or raise the bound with care",
            evidence={"events": result.events},
        )
