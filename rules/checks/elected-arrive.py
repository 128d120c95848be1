"""An elected arrive publishes only the writes its warp or role has synchronised first.

## What it does
Walks each role's unrolled program. Generic shared-memory writes (`lm.elementwise`,
`lm.fill`, ... into a buffer another role reads) are made by every thread of the role.
An mbarrier arrive with `per="warp"` is made by one elected lane of each warp and one
with `per="role"` (and `ring.commit`) by one thread of the whole role; the barrier's
release semantics cover only the arriving thread's own writes. So between such writes
and the arrive the rule requires:
- `per="warp"`, or a single-warp role: `lm.syncwarp()` or a named-barrier `sync` of the
  role;
- `per="role"` in a role of several warps: a named-barrier `sync` of the role (a
  `syncwarp` orders the lanes of one warp, not the warps of the role).
An arrive with `per="thread"` needs nothing. Only arrives that another role waits on
count. The finding points at the arrive, names the writes, the role, the barrier and the
roles that read the data, and shows the interleaving as a witness.

## Why is this bad?
The waiter observes the phase and reads the buffer, but only the elected thread's writes
are guaranteed visible: the other lanes' values may still sit in flight, so the reader
gets a mix of new and stale data. Nothing deadlocks and nothing crashes; the result is
silently wrong, and only sometimes.

## Failing example
`corpus/invalid/scale/elected_arrive_without_syncwarp.cake`:
```python
done[0].arrive(per="role")  # expect: P011
```

## Passing example
`corpus/valid/scale/staged_epilogue_syncwarp.cake`:
```python
lm.syncwarp()                                 # every lane's writes before the arrive
done[0].arrive(per="role")
```
"""

from cakegov.analysis.flow import (
    at_iter,
    flow_of,
    key_text,
    pipelines_of,
    runs_longest_first,
    smem_locs,
    structurally_rejected,
)

CODE = "P011"
NAME = "elected-arrive"
VERSION = "1.0.0"
SEVERITY = "blocking"
CATEGORY = "protocol"
STATUS = "stable"
MOTIVATED_BY = (
    "corpus/invalid/scale/elected_arrive_without_syncwarp.cake",
    "corpus/invalid/gemm/elected_arrive_without_role_sync.cake",
)


def _witness(flow, item):
    """write -> elected arrive -> the reader's wait -> the reader's read."""
    role, arrive = item.role, item.arrive
    threads = 32 * flow.warps.get(role, 1)
    locs = sorted({loc for w in item.writes for loc in smem_locs(w.writes)})
    steps = []
    for w in item.writes:
        steps.append((w.line, f"{w.where()}: all {threads} threads of `{role}` write "
                              f"{', '.join(f'{b} stage {s}' for b, s in smem_locs(w.writes))} "
                              f"({w.primitive})"))
    who = "one elected lane per warp" if arrive.per == "warp" else "one elected thread"
    steps.append((arrive.line, f"{arrive.where()}: {who} arrives on {key_text(arrive.slot)}; "
                               "the other threads' writes are not ordered before it"))
    for reader in item.readers:
        events = flow.roles[reader]
        wait = next((i for i, ev in enumerate(events)
                     if ev.kind == "wait" and ev.slot == arrive.slot), None)
        if wait is None:
            continue
        steps.append((events[wait].line, f"{events[wait].where()}: wait "
                                         f"{key_text(arrive.slot)} passes"))
        read = next((ev for ev in events[wait + 1:]
                     if set(smem_locs(ev.reads)) & set(locs)), None)
        if read is not None:
            got = ", ".join(f"{b} stage {s}" for b, s in sorted(set(smem_locs(read.reads))
                                                                  & set(locs)))
            steps.append((read.line, f"{read.where()}: reads {got} ({read.primitive}) while "
                                     f"threads of `{role}` may not have written it yet"))
        break
    return {"anomaly": "elected-arrive", "witness": [t for _, t in steps],
            "witness_steps": [{"line": ln, "text": t} for ln, t in steps]}


def _finding(ctx, flow, item):
    ev = item.arrive
    bufs = sorted({loc[0] for w in item.writes for loc in smem_locs(w.writes)})
    first = item.writes[0]
    warps = flow.warps.get(item.role, 1)
    names = ", ".join(f"`{b}`" for b in bufs)
    readers = ", ".join(f"`{r}`" for r in item.readers)
    if item.needs == "syncwarp":
        fix = "`lm.syncwarp()`"
        why = (f"one elected lane {'per warp ' if ev.per == 'warp' else ''}arrives")
    else:
        fix = (f"a named-barrier `sync` of the whole role ({32 * warps} threads, e.g. "
               f"`lm.named_barrier(id=..., threads={32 * warps})` used only by "
               f"`{item.role}`)")
        why = f"one elected thread of the {warps} warps arrives"
    return ctx.finding(
        ctx.node_at(ev.path),
        f"`{item.role}` writes {names} with all its threads (line {first.line}), then "
        f"{why} on `{key_text(ev.slot)}`{at_iter(ev)} without synchronising first: "
        f"{readers} may read the buffer before the other threads' writes are visible",
        condition=(f"between generic shared-memory writes by a role of {warps} warp(s) and "
                   f"an arrive with per=\"{ev.per}\" that another role waits on, "
                   f"{'lm.syncwarp() or ' if item.needs == 'syncwarp' else ''}a named-"
                   "barrier sync of the role orders every thread's writes"),
        hint=f"insert {fix} between the last write of {names} and this arrive, or arrive "
             "with `per=\"thread\"` (and a count of every thread)",
        resource=ev.slot[0], role=item.role,
        evidence={**_witness(flow, item), "buffers": bufs, "per": ev.per,
                  "readers": list(item.readers)},
    )


def check(ctx):
    result = ctx.protocol
    if result is None or structurally_rejected(ctx.findings):
        return
    seen = set()
    for run in runs_longest_first(result):
        flow = flow_of(result.kernel, run.unrolled, pipelines_of(ctx.schedule))
        for item in flow.elected_arrives():
            if item.arrive.path in seen:
                continue
            seen.add(item.arrive.path)
            yield _finding(ctx, flow, item)
