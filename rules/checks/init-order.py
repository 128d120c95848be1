"""A manually initialised mbarrier is used only after init, fence and CTA sync, and is
initialised once.

## What it does
Barriers declared `lm.mbarrier(..., init="manual")` are initialised by the schedule:
`bar[i].init()` in one role, then `lm.fence_barrier_init()` in that role, then
`lm.sync_cta()` in every role; only after that may any role wait on, arrive on or load
through the barrier. The protocol analysis tracks every slot through the states
uninitialised, initialised, fenced and published (by the CTA sync) and reports each use
in another state, and every `init()` of a slot that is already initialised (a prologue-
initialised `init="auto"` barrier counts as initialised). This rule points at the first
use (or the second init), names the barrier, the state it was in and the missing step,
and carries the witness.

## Why is this bad?
`mbarrier.init` is a plain shared-memory store by one thread: without
`fence.mbarrier_init` it is not ordered before the async proxy's `complete_tx` of the
bulk copies, and without a CTA-wide barrier other threads may arrive or wait on a barrier
that still holds garbage. Re-initialising a barrier while other threads may be arriving
on it or waiting on a phase loses those arrivals. All of these are undefined behaviour:
hangs or phases that complete early, depending on timing.

## Failing example
`corpus/invalid/gemm/manual_init_without_fence.cake`:
```python
            empty[k % S].wait(parity=(k // S + 1) % 2)  # expect: P012
```

## Passing example
`corpus/valid/gemm/raw_manual_init_s2.cake`:
```python
        lm.fence_barrier_init()                              # make the inits visible
        lm.sync_cta()                                        # ... to every role
```
"""

from cakegov.analysis.asynchrony import anomalies_of, iteration, run_of
from cakegov.analysis.explore import FENCED, INITIALISED, UNINITIALISED
from cakegov.analysis.witness import witness_evidence

CODE = "P012"
NAME = "init-order"
VERSION = "1.0.0"
SEVERITY = "blocking"
CATEGORY = "protocol"
STATUS = "stable"
MOTIVATED_BY = (
    "corpus/invalid/gemm/manual_init_without_fence.cake",
    "corpus/invalid/scale/manual_init_use_before_sync.cake",
    "corpus/invalid/kmeans_assign/manual_init_reinit.cake",
)


def _program(result, ev):
    run = run_of(result, ev)
    return run.unrolled.roles if run is not None else {}


def _first(events, kind, after=-1, **match):
    for e in events:
        if e.seq > after and e.kind == kind and all(getattr(e, k) == v
                                                      for k, v in match.items()):
            return e
    return None


def _syncs(events):
    return [e for e in events if e.cta_sync]


def _reinit(ctx, anomaly):
    ev = anomaly.events[0]
    name = f"{ev.slot[0]}[{ev.slot[1]}]"
    inits = [e for evs in _program(ctx.protocol, ev).values() for e in evs
             if e.kind == "init" and e.slot == ev.slot and e is not ev]
    before = f" (first at line {inits[0].line})" if inits else " (by the kernel prologue)"
    hint = (f"delete this `init()`: {name} is already initialised{before}; an mbarrier "
            "is initialised once, before the fence and the CTA sync, and keeps counting "
            "phases by itself")
    if not inits:
        hint = (f"declare `{ev.slot[0]}` with `init=\"manual\"` if the schedule initialises "
                f"it itself, or delete this `init()`: the prologue already initialised it")
    return ctx.finding(
        ctx.node_at(ev.path),
        f"`{ev.role}` initialises {name} again{iteration(ev)} while it is "
        f"{anomaly.details['state']}{before}",
        condition="an mbarrier is initialised exactly once before its first use; "
                  "re-initialising one in use (without mbarrier.inval) is undefined",
        hint=hint, resource=ev.slot[0], role=ev.role,
        evidence=witness_evidence(anomaly, slot=list(ev.slot)),
    )


def _use(ctx, anomaly):
    ev = anomaly.events[0]
    name = f"{ev.slot[0]}[{ev.slot[1]}]"
    status = anomaly.details["status"]
    program = _program(ctx.protocol, ev)
    inits = [e for evs in program.values() for e in evs
             if e.kind == "init" and e.slot == ev.slot]
    init = inits[0] if inits else None
    syncs = [e for evs in program.values() for e in _syncs(evs)]
    if status == UNINITIALISED and init is None:
        missing = f"{name} is never initialised"
        hint = (f"add `{ev.slot[0]}[{ev.slot[1]}].init()` in one role, followed by "
                "`lm.fence_barrier_init()` and `lm.sync_cta()` in every role, before the "
                f"first use; or declare `{ev.slot[0]}` with the default `init=\"auto\"`")
    elif status == UNINITIALISED:
        missing = f"its init (line {init.line}, `{init.role}`) has not run yet"
        hint = (f"initialise {name} before any use: move the init at line {init.line} "
                "ahead of the first use, then `lm.fence_barrier_init()` and "
                "`lm.sync_cta()`")
    elif status == INITIALISED:
        own = program.get(init.role, ()) if init else ()
        sync = _first(own, "named", init.seq if init else -1, cta_sync=True)
        where = f" and before its `lm.sync_cta()` at line {sync.line}" if sync else ""
        last = [e for e in own if e.kind == "init" and (sync is None or e.seq < sync.seq)]
        line = last[-1].line if last else init.line
        missing = (f"`{init.role}` initialised it (line {init.line}) but issued no "
                   "`lm.fence_barrier_init()` between its inits and the use")
        hint = (f"insert `lm.fence_barrier_init()` in `{init.role}` after its last "
                f"`init()` (line {line}, outside any loop){where}")
    else:
        assert status == FENCED
        own = program.get(ev.role, ())
        later = _first(own, "named", ev.seq, cta_sync=True)
        if later is not None:
            missing = (f"`{ev.role}` reaches its `lm.sync_cta()` only at line {later.line}, "
                       "after this use")
            hint = (f"move `lm.sync_cta()` (line {later.line}) before line {ev.line}: every "
                    "role passes the CTA sync after the barrier initialisation and before "
                    "its first use")
        else:
            missing = "no `lm.sync_cta()` publishes the initialisation before this use"
            hint = ("add `lm.sync_cta()` to every role, after `lm.fence_barrier_init()` "
                    f"and before line {ev.line}")
            if syncs:
                hint = f"move this use after the `lm.sync_cta()` of `{ev.role}`"
    return ctx.finding(
        ctx.node_at(ev.path),
        f"`{ev.role}` uses {name}{iteration(ev)} while it is {anomaly.details['state']}: "
        f"{missing}",
        condition="a manually initialised mbarrier is used only after init, then "
                  "lm.fence_barrier_init() in the initialising role, then lm.sync_cta() "
                  "in every role",
        hint=hint, resource=ev.slot[0], role=ev.role,
        evidence=witness_evidence(anomaly, slot=list(ev.slot),
                                  state=anomaly.details["state"]),
    )


def check(ctx):
    result = ctx.protocol
    if result is None:
        return
    found = list(anomalies_of(result, "init-order"))
    reinit = {a.events[0].slot for a in found if a.details.get("reinit")}
    seen = set()
    for anomaly in found:
        ev = anomaly.events[0]
        if anomaly.details.get("reinit"):
            key = ("reinit", ev.path)
        elif ev.slot in reinit:
            continue  # a consequence of the re-initialisation reported above
        else:
            status = anomaly.details["status"]
            # one finding per cause: the barrier never initialised, the role that did not
            # fence, the role that used it before the CTA sync
            key = (status, ev.slot[0] if status == UNINITIALISED else
                   ev.role if status == FENCED else "fence")
        if key in seen:
            continue
        seen.add(key)
        yield _reinit(ctx, anomaly) if anomaly.details.get("reinit") else _use(ctx, anomaly)
