"""A protocol analysis that hit a bound, or could not run, makes the verdict incomplete.

## What it does
Reports, as a coverage finding, every reason the protocol analysis did not cover the
schedule: the state or time bound of the exploration, an iteration window larger than
the bound, sizes for which the kernel could not be unrolled, or a schedule that could not
be lowered. The verdict is then `incomplete` (exit 3), never `clean`.

## Why is this bad?
An exploration that stopped early proved nothing about the interleavings it did not
visit. Passing such a schedule would claim evidence the verifier did not gather.

## Failing example
`corpus/invalid/gemm/window_over_bound.cake`:
```python
def gemm_two_rings(lm, A, B, C):  # expect: P098
```

## Passing example
`corpus/valid/gemm/ws_pipeline_s4.cake`:
```python
    ring = lm.pipeline(stages=4, buffers=[a_s, b_s], producer=loader, consumer=math)
```
"""

CODE = "P098"
NAME = "protocol-bounds"
VERSION = "1.0.0"
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
            condition="exploration finished within its bounds",
            hint="reduce the number of stages or simplify the loop structure, or raise the "
                 "bound with care",
            evidence={"states": result.states, "window": result.window},
        )
