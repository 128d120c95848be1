"""The register budgets of all warp roles must fit the SM's register file.

## What it does
Adds up the registers every role holds, `warps x 32 x regs`, and rejects the schedule
when the sum exceeds the target's `registers_per_sm`. A role with `regs=` holds that many
registers per thread (its `setmaxnreg` value). A role without `regs=` keeps the budget the
compiler gives every thread of the launch: `registers_per_sm // (launch warps x 32)`,
rounded down to the allocation unit of 8 registers per thread (256 per warp) and capped at
the target's `registers_per_thread`; for 8 warps on sm_90a that is 255, for 12 warps 168.
The finding points at the role with the largest share, lists every role's share, and the
hint gives a `regs=` value for one role that makes the sum fit (a legal `setmaxnreg`
value: in range and a multiple of `setmaxnreg_multiple`).

## Why is this bad?
`setmaxnreg.inc` takes registers from the CTA's pool and waits until enough are free.
When the budgets add up to more than the register file, the warps that raise their
budget wait forever: the kernel hangs at its first instruction, with no error message.

## Failing example
`corpus/invalid/gemm/register_pool_over.cake`:
```python
math = lm.role(warps=range(4, 12), regs=240)
```

## Passing example
`corpus/valid/gemm/ws_pipeline_s4.cake`:
```python
loader = lm.role(warps=range(0, 4), regs=40)
math = lm.role(warps=range(4, 12), regs=232)
```
"""

from cakegov.lower.registers import ALLOCATION_GRANULARITY, launch_registers

CODE = "R002"
NAME = "register-pool"
VERSION = "1.0.0"
SEVERITY = "blocking"
CATEGORY = "resources"
STATUS = "stable"
MOTIVATED_BY = ("corpus/invalid/gemm/register_pool_over.cake",)

# The compiler allocates registers per thread in units of 8 (256 per warp): CUDA
# occupancy calculator, "register allocation unit size".
ALLOC_UNIT = ALLOCATION_GRANULARITY


def default_regs(target, threads):
    """Registers per thread at kernel entry: the lowering's own derivation."""
    return launch_registers(threads, target["registers_per_sm"], target["registers_per_thread"])


def _shares(ctx):
    """(role, threads, regs per thread, explicit?) for every role with warps."""
    launch = ctx.schedule.launch
    roles = [r for r in ctx.schedule.roles if r.warp_stop > r.warp_start]
    threads = launch.threads if launch is not None else sum(32 * len(r.warps) for r in roles)
    default = default_regs(ctx.target, threads)
    return [(r, 32 * len(r.warps), r.regs if r.regs is not None else default,
             r.regs is not None) for r in roles], default


def _fitting_regs(ctx, threads, others, limit):
    """The largest legal per-thread budget for a role of `threads` threads, or None."""
    step = ctx.target.get("setmaxnreg_multiple") or ALLOC_UNIT
    low = ctx.target.get("setmaxnreg_min") or step
    high = ctx.target.get("setmaxnreg_max") or ctx.target["registers_per_thread"]
    regs = min((limit - others) // threads, high)
    regs -= regs % step
    return regs if regs >= low else None


def _hint(ctx, shares, total, limit, default):
    if not any(explicit for *_, explicit in shares):
        return ("the default budgets only overflow when roles overlap or reach past the "
                "launch: give every launched warp exactly one role (R006)")
    if not ctx.target.get("setmaxnreg_supported", 0):
        return (f"remove `regs=` from every role: {ctx.target.name} has no setmaxnreg, so "
                f"every thread keeps the launch budget of {default} registers")
    for role, threads, regs, _ in sorted(shares, key=lambda s: -s[1] * s[2]):
        others = total - threads * regs
        fit = _fitting_regs(ctx, threads, others, limit)
        if fit is not None and fit < regs:
            was = regs if role.regs is not None else f"the default {regs}"
            return (f"set `regs={fit}` on role `{role.name}` (was {was}): the pool is then "
                    f"{others + threads * fit:,} <= {limit:,} registers")
    every = sum(s[1] for s in shares)
    fit = _fitting_regs(ctx, every, 0, limit)
    return (f"give every role at most `regs={fit}`" if fit is not None else
            "launch fewer warps") + f" ({every} threads share {limit:,} registers)"


def check(ctx):
    if ctx.target is None or ctx.target.get("registers_per_sm") is None:
        return
    limit = ctx.target["registers_per_sm"]
    shares, default = _shares(ctx)
    total = sum(threads * regs for _, threads, regs, _ in shares)
    if total <= limit or not shares:
        return
    largest = max(shares, key=lambda s: s[1] * s[2])
    parts = [f"`{r.name}` {t // 32}x32x{g}{'' if e else ' (default)'} = {t * g:,}"
             for r, t, g, e in shares]
    yield ctx.finding(
        largest[0],
        f"register budgets add up to {total:,} registers but {ctx.target.name} has "
        f"{limit:,} per SM: {', '.join(parts)}",
        condition=f"sum over roles of warps x 32 x regs = {total:,} <= registers_per_sm "
                  f"{limit:,}",
        hint=_hint(ctx, shares, total, limit, default),
        role=largest[0].name,
        resource="registers",
        evidence={
            "total": total,
            "limit": limit,
            "default_regs": default,
            "roles": {r.name: {"threads": t, "regs": g, "explicit": e}
                      for r, t, g, e in shares},
            "source": ctx.target.source("registers_per_sm"),
        },
    )
