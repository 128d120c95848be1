"""Warp roles must partition the launched warps: no overlap, no gap, nothing outside.

## What it does
Each `lm.role(warps=range(start, stop))` names a set of warps. The rule checks that
every range is non-empty, lies inside `[0, launch warps)`, that no two roles share a warp
(the finding names both roles and the shared warps, and points at the later role), and
that every launched warp belongs to some role (the finding names the idle warps and
points at `lm.launch`).

## Why is this bad?
A warp in two roles runs both bodies' barrier protocol as if it were two warps: arrival
counts, named-barrier thread counts and register budgets all go wrong, which ends in a
deadlock or a race. A role outside the launch never runs, so its arrivals never come and
its consumers wait forever. Idle warps hold registers and shared barrier slots for
nothing, and a launch sized for roles that are not there usually hides a mistake in the
role ranges.

## Failing example
`corpus/invalid/gemm/idle_warps.cake`:
```python
lm.launch(grid=(lm.cdiv(lm.M, BM), lm.cdiv(lm.N, BN)), warps=16)
```

## Passing example
`corpus/valid/gemm/ws_pipeline_s4.cake`:
```python
lm.launch(grid=(lm.cdiv(lm.M, BM), lm.cdiv(lm.N, BN)), warps=12)
loader = lm.role(warps=range(0, 4), regs=40)
math = lm.role(warps=range(4, 12), regs=232)
```
"""

CODE = "R006"
NAME = "role-warp-sets"
VERSION = "1.0.0"
SEVERITY = "blocking"
CATEGORY = "resources"
STATUS = "stable"
MOTIVATED_BY = (
    "corpus/invalid/gemm/idle_warps.cake",
    "corpus/invalid/kmeans_assign/overlapping_roles.cake",
)


def warp_list(runs):
    """`warps 3, 5..7` for sorted, disjoint half-open intervals `[(start, stop), ...]`."""
    text = ", ".join(f"{a}" if b == a + 1 else f"{a}..{b - 1}" for a, b in runs)
    single = len(runs) == 1 and runs[0][1] == runs[0][0] + 1
    return ("warp " if single else "warps ") + text


def _gaps(intervals, stop):
    """The parts of [0, stop) that no interval covers (intervals may overlap)."""
    gaps, at = [], 0
    for a, b in sorted(intervals):
        if a > at:
            gaps.append((at, min(a, stop)))
        at = max(at, b)
        if at >= stop:
            break
    if at < stop:
        gaps.append((at, stop))
    return [(a, b) for a, b in gaps if a < b]


def _empty(ctx, role):
    return ctx.finding(
        role,
        f"role `{role.name}` has no warps: `range({role.warp_start}, {role.warp_stop})` is "
        "empty",
        condition="warp_start < warp_stop",
        hint=f"give role `{role.name}` at least one warp, e.g. "
             f"`warps=range({role.warp_start}, {role.warp_start + 1})`, or remove it",
        role=role.name,
        evidence={"warp_start": role.warp_start, "warp_stop": role.warp_stop},
    )


def _outside(ctx, role, warps):
    outside = [(a, b) for a, b in ((role.warp_start, min(role.warp_stop, 0)),
                                   (max(role.warp_start, warps), role.warp_stop)) if a < b]
    inside = (max(role.warp_start, 0), min(role.warp_stop, warps))
    fix = (f"shrink it to `warps=range({inside[0]}, {inside[1]})` or " if inside[0] < inside[1]
           else "")
    return ctx.finding(
        role,
        f"role `{role.name}` uses {warp_list(outside)} but the launch has warps 0..{warps - 1}",
        condition=f"0 <= warp_start and warp_stop <= launch warps {warps}",
        hint=f"{fix}launch `warps={max(role.warp_stop, warps)}`",
        role=role.name,
        evidence={"warp_start": role.warp_start, "warp_stop": role.warp_stop,
                  "launch_warps": warps, "outside": [list(r) for r in outside]},
    )


def _overlap(ctx, earlier, later, shared):
    after = range(max(later.warp_start, earlier.warp_stop), later.warp_stop)
    fix = (f"e.g. `{later.name} = lm.role(warps=range({after.start}, {after.stop}), ...)`"
           if len(after) else "move one of them to other warps")
    return ctx.finding(
        later,
        f"roles `{earlier.name}` and `{later.name}` both contain {warp_list([shared])}",
        condition="role warp ranges are disjoint",
        hint=f"give each warp exactly one role: {fix}",
        role=later.name,
        evidence={"roles": [earlier.name, later.name], "shared": list(shared)},
    )


def check(ctx):
    launch = ctx.schedule.launch
    roles = ctx.schedule.roles
    for role in roles:
        if role.warp_stop <= role.warp_start:
            yield _empty(ctx, role)
        elif launch is not None and (role.warp_start < 0 or role.warp_stop > launch.warps):
            yield _outside(ctx, role, launch.warps)
    for i, later in enumerate(roles):
        for earlier in roles[:i]:
            shared = (max(earlier.warp_start, later.warp_start),
                      min(earlier.warp_stop, later.warp_stop))
            if shared[0] < shared[1]:
                yield _overlap(ctx, earlier, later, shared)
    if launch is None:
        return
    idle = _gaps([(r.warp_start, r.warp_stop) for r in roles if r.warp_stop > r.warp_start],
                 launch.warps)
    if not idle:
        return
    top = max((r.warp_stop for r in roles), default=0)
    if roles and all(a >= top for a, _ in idle):
        fix = f"launch `warps={top}`, or give {warp_list(idle)} to a role"
    else:
        fix = f"extend a role over {warp_list(idle)} or add a role for them"
    yield ctx.finding(
        launch,
        f"the launch has {launch.warps} warps but {warp_list(idle)} "
        f"{'belongs' if warp_list(idle).startswith('warp ') else 'belong'} to no role",
        condition="every launched warp belongs to exactly one role",
        hint=fix,
        resource="warps",
        evidence={"launch_warps": launch.warps, "idle": [list(r) for r in idle],
                  "roles": {r.name: [r.warp_start, r.warp_stop] for r in roles}},
    )
