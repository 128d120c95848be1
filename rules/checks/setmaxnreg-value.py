"""A role's register budget must be a value `setmaxnreg` accepts on the target.

## What it does
A role's `regs=` lowers to `setmaxnreg.inc/.dec.sync.aligned.u32 regs`. The rule checks
that `regs` lies in [`setmaxnreg_min`, `setmaxnreg_max`] and is a multiple of
`setmaxnreg_multiple` (sm_90a: 24..256, multiple of 8). On a target without setmaxnreg
(`setmaxnreg_supported = 0`, such as sm_80) every `regs=` is rejected: the compiler's
per-thread budget applies to all warps alike. The hint names the nearest legal value
(ties go to the lower one, which keeps the register pool smaller).

## Why is this bad?
ptxas rejects an out-of-range or unaligned immediate, and on a target without the
instruction the kernel does not compile at all: the candidate fails after the checker
said yes, and no measurement comes back.

## Failing example
`corpus/invalid/kmeans_assign/setmaxnreg_below_min.cake`:
```python
loader = lm.role(warps=range(0, 4), regs=20)
```

## Passing example
`corpus/valid/kmeans_assign/rows_pipelined_s2.cake`:
```python
loader = lm.role(warps=range(0, 4), regs=40)
```
"""

CODE = "R003"
NAME = "setmaxnreg-value"
VERSION = "1.0.0"
SEVERITY = "blocking"
CATEGORY = "resources"
STATUS = "stable"
MOTIVATED_BY = ("corpus/invalid/kmeans_assign/setmaxnreg_below_min.cake",)


def nearest_legal(regs, low, high, step):
    """The legal `setmaxnreg` value closest to `regs`; ties go to the lower value."""
    first = -(-low // step) * step
    last = high - high % step
    below = max(first, min(last, regs - regs % step))
    above = min(last, below + step)
    return above if abs(above - regs) < abs(regs - below) else below


def check(ctx):
    if ctx.target is None:
        return
    target = ctx.target
    roles = [r for r in ctx.schedule.roles if r.regs is not None]
    if not target.get("setmaxnreg_supported", 0):
        for role in roles:
            yield ctx.finding(
                role,
                f"role `{role.name}` sets `regs={role.regs}` but {target.name} has no "
                "setmaxnreg: per-role register budgets are not available",
                condition=f"setmaxnreg_supported = 0 on {target.name}",
                hint=f"remove `regs={role.regs}` from role `{role.name}` (every thread keeps "
                     "the launch's budget), or target sm_90a",
                role=role.name,
                resource="registers",
                evidence={"regs": role.regs,
                          "source": target.source("setmaxnreg_supported")},
            )
        return
    low = target.get("setmaxnreg_min")
    high = target.get("setmaxnreg_max")
    step = target.get("setmaxnreg_multiple")
    if low is None or high is None or step is None:
        return
    for role in roles:
        problems = []
        if not low <= role.regs <= high:
            problems.append(f"outside [{low}, {high}]")
        if role.regs % step:
            problems.append(f"not a multiple of {step}")
        if not problems:
            continue
        legal = nearest_legal(role.regs, low, high, step)
        yield ctx.finding(
            role,
            f"role `{role.name}` sets `regs={role.regs}`, which setmaxnreg on {target.name} "
            f"rejects: {' and '.join(problems)}",
            condition=f"{low} <= regs <= {high} and regs % {step} == 0",
            hint=f"use `regs={legal}` for role `{role.name}` (nearest legal value)",
            role=role.name,
            resource="registers",
            evidence={"regs": role.regs, "min": low, "max": high, "multiple": step,
                      "suggested": legal, "source": target.source("setmaxnreg_min")},
        )
