"""Named barriers need a free hardware id and a thread count that matches their users.

## What it does
`lm.named_barrier(id=i, threads=t)` lowers to `bar.sync i, t` / `bar.arrive i, t`. The
rule checks, for every declaration:
- the id is usable: in [`named_barrier_reserved` + 1, `named_barriers` - 1] (id 0 is
  `__syncthreads`; sm_90a has ids 0..15);
- the thread count is a positive multiple of 32 and at most the launch's threads;
- two declarations with the same id declare the same thread count;
- the threads that use the barrier (through `nb.sync()` or `nb.arrive()`) add up to the
  declared count: 32 x the warps of each using role that reach a use, which is every
  warp of the role, or only the warps of the `with lm.warps(...)` block the uses sit in
  (FlashAttention-3's producer warp joins `QueryEmpty` with `NumMmaThreads + 32`). When
  one role reaches the barrier with different sets of warps at different uses, which
  warps meet in which instance is a question of the protocol: the rule leaves it to the
  exploration (P015 named-barrier-deadlock).

## Why is this bad?
The hardware barrier completes when `t` threads have arrived. With fewer participants
than `t` it never completes (deadlock); with more it completes early, releasing
consumers before all producers arrived (race), and the surplus arrivals leak into the
next use. A reserved id collides with `__syncthreads` or library barriers, and a thread
count that is not a multiple of 32 is undefined behaviour.

## Failing example
`corpus/invalid/scale/named_barrier_thread_count.cake`:
```python
ready = lm.named_barrier(id=1, threads=128)
```

## Passing example
`corpus/valid/scale/named_barrier_handoff.cake`:
```python
ready = lm.named_barrier(id=1, threads=256)
ready.arrive()
ready.sync()
```
"""

from cakegov.ir.nodes import NamedBarrierDecl

CODE = "R007"
NAME = "named-barrier-usage"
VERSION = "1.2.0"
SEVERITY = "blocking"
CATEGORY = "resources"
STATUS = "stable"
MOTIVATED_BY = ("corpus/invalid/scale/named_barrier_thread_count.cake",)

_USES = ("sync", "bar_arrive")


def _users(ctx, names):
    """The roles that sync or arrive on any of the named barriers `names`, in schedule
    order, each with the role-relative warps that reach its uses; None when a role
    reaches them with different warps at different uses."""
    users: dict[str, set[tuple[int, ...]]] = {}
    for site in ctx.calls():
        refs = {v.name for v in site.call.args.values()
                if getattr(v, "kind", None) == "named_barrier"}
        if any(b.op in _USES and b.barrier in refs & names
               for b in ctx.effects(site.call).barriers):
            users.setdefault(site.role.name, set()).add(site.warps)
    if any(len(sets) > 1 for sets in users.values()):
        return None
    return [(r, next(iter(users[r.name]))) for r in ctx.schedule.roles if r.name in users]


def _who(role, warps):
    every = len(warps) == role.warp_stop - role.warp_start
    if every:
        return f"`{role.name}` {32 * len(warps)}"
    which = "warp" if len(warps) == 1 else "warps"
    return f"`{role.name}` ({which} {', '.join(str(w) for w in warps)}) {32 * len(warps)}"


def _bad_id(ctx, decl, decls, low, high):
    taken = {d.id for d in decls if d.name != decl.name}
    free = next((i for i in range(low, high + 1) if i not in taken), None)
    reserved = "id 0 is" if low == 1 else f"ids 0..{low - 1} are"
    why = (f"{reserved} reserved (0 is __syncthreads)" if decl.id < low
           else f"{ctx.target.name} has barrier ids 0..{high}")
    return ctx.finding(
        decl,
        f"named barrier `{decl.name}` uses id {decl.id}: {why}",
        condition=f"{low} <= id <= {high}",
        hint=f"use `id={free}` (the lowest free id)" if free is not None
        else f"all ids {low}..{high} are taken: share a barrier or use an mbarrier",
        resource=decl.name,
        evidence={"id": decl.id, "min": low, "max": high,
                  "source": ctx.target.source("named_barriers")},
    )


def _bad_threads(ctx, decl, launch):
    if decl.threads <= 0 or decl.threads % 32:
        good = max(32, decl.threads - decl.threads % 32)
        return ctx.finding(
            decl,
            f"named barrier `{decl.name}` counts {decl.threads} threads, which is not a "
            "positive multiple of 32 (the warp size)",
            condition="threads > 0 and threads % 32 == 0",
            hint=f"count whole warps: e.g. `threads={good}` (32 x participating warps)",
            resource=decl.name,
            evidence={"threads": decl.threads},
        )
    if launch is not None and decl.threads > launch.threads:
        return ctx.finding(
            decl,
            f"named barrier `{decl.name}` waits for {decl.threads} threads but the CTA has "
            f"only {launch.threads} ({launch.warps} warps)",
            condition=f"threads {decl.threads} <= launch threads {launch.threads}",
            hint=f"count only participating threads: at most `threads={launch.threads}`",
            resource=decl.name,
            evidence={"threads": decl.threads, "launch_threads": launch.threads},
        )
    return None


def _mismatch(ctx, decl, users):
    total = sum(32 * len(w) for _, w in users)
    parts = " + ".join(_who(r, w) for r, w in users)
    return ctx.finding(
        decl,
        f"named barrier `{decl.name}` (id {decl.id}) is declared for {decl.threads} threads "
        f"but the warps that use it have {total}: {parts}",
        condition=f"threads {decl.threads} == 32 x the warps that sync or arrive on it "
                  f"{total}",
        hint=f"declare `threads={total}`, or let only warps with {decl.threads} threads in "
             f"total sync or arrive on `{decl.name}` (`with lm.warps(...)` for part of a "
             "role)",
        resource=decl.name,
        evidence={"threads": decl.threads, "users": {r.name: 32 * len(w) for r, w in users}},
    )


def check(ctx):
    decls = ctx.decls(NamedBarrierDecl)
    if ctx.target is None or not decls or ctx.target.get("named_barriers") is None:
        return
    low = ctx.target.get("named_barrier_reserved", 0) + 1
    high = ctx.target["named_barriers"] - 1
    launch = ctx.schedule.launch
    broken = set()
    for decl in decls:
        if not low <= decl.id <= high:
            yield _bad_id(ctx, decl, decls, low, high)
        finding = _bad_threads(ctx, decl, launch)
        if finding is not None:
            broken.add(decl.id)
            yield finding
    first_of = {}
    for decl in decls:
        first = first_of.setdefault(decl.id, decl)
        if first.threads != decl.threads:
            broken.add(decl.id)
            yield ctx.finding(
                decl,
                f"named barriers `{first.name}` and `{decl.name}` share id {decl.id} but "
                f"declare {first.threads} and {decl.threads} threads",
                condition="declarations of one id agree on the thread count",
                hint=f"give `{decl.name}` its own id, or declare `threads={first.threads}`",
                resource=decl.name,
                evidence={"id": decl.id, "threads": {first.name: first.threads,
                                                     decl.name: decl.threads}},
            )
    for bar_id, first in first_of.items():
        if bar_id in broken:
            continue
        users = _users(ctx, {d.name for d in decls if d.id == bar_id})
        if users is None:  # different warps at different uses: the exploration decides
            continue
        if users and sum(32 * len(w) for _, w in users) != first.threads:
            yield _mismatch(ctx, first, users)
