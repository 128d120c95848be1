"""A role with a register budget must consist of whole, aligned warpgroups.

## What it does
`setmaxnreg` is a warpgroup instruction: all warps of an aligned warpgroup (the
target's `warpgroup_warps` consecutive warps, the first a multiple of that count) execute
it together with the same value. A role with `regs=` must therefore start on a warpgroup
boundary (`warp_start % 4 == 0`) and span whole warpgroups
(`(warp_stop - warp_start) % 4 == 0`). Roles without `regs=` may have any warp range.
On targets without setmaxnreg the rule stays silent (R003 already rejects `regs=`).

## Why is this bad?
When only some warps of a warpgroup execute `setmaxnreg`, or two roles that share a
warpgroup ask for different values, the behaviour is undefined: in practice the
`.sync.aligned` instruction waits for warps that never arrive and the CTA hangs.

## Failing example
`corpus/invalid/gemm/setmaxnreg_misaligned_role.cake`:
```python
math = lm.role(warps=range(1, 5), regs=232)
```

## Passing example
`corpus/valid/gemm/raw_barriers_s2.cake`:
```python
math = lm.role(warps=range(4, 8), regs=232)
```
"""

CODE = "R004"
NAME = "setmaxnreg-warpgroup"
VERSION = "1.0.0"
SEVERITY = "blocking"
CATEGORY = "resources"
STATUS = "stable"
MOTIVATED_BY = ("corpus/invalid/gemm/setmaxnreg_misaligned_role.cake",)


def check(ctx):
    if ctx.target is None or not ctx.target.get("setmaxnreg_supported", 0):
        return
    group = ctx.target.get("warpgroup_warps")
    if not group:
        return
    for role in ctx.schedule.roles:
        start, stop = role.warp_start, role.warp_stop
        if role.regs is None or stop <= start:
            continue
        problems = []
        if start % group:
            problems.append(f"starts at warp {start}, not a multiple of {group}")
        if (stop - start) % group:
            problems.append(f"has {stop - start} warps, not a multiple of {group}")
        if not problems:
            continue
        first = start - start % group
        count = -(-(stop - start) // group) * group
        yield ctx.finding(
            role,
            f"role `{role.name}` (warps {start}..{stop - 1}) sets `regs={role.regs}` but "
            f"{' and '.join(problems)}: setmaxnreg runs on whole warpgroups of {group} warps",
            condition=f"warp_start % {group} == 0 and (warp_stop - warp_start) % {group} == 0",
            hint=f"give role `{role.name}` whole warpgroups, e.g. "
                 f"`warps=range({first}, {first + count})`, and move the other roles off "
                 f"those warps; or remove `regs={role.regs}` so the role keeps the "
                 "launch's budget",
            role=role.name,
            resource="registers",
            evidence={"warp_start": start, "warp_stop": stop, "warpgroup_warps": group,
                      "source": ctx.target.source("warpgroup_warps")},
        )
