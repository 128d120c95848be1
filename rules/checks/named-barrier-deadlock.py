"""Every role that uses a named barrier must reach it the same number of times.

## What it does
A named barrier (`bar.sync id, threads` / `bar.arrive id, threads`) completes one
generation each time its declared number of threads has arrived; its participants are
the roles whose program uses it (`lm.sync_cta()`, barrier 0, has every role). On the
unrolled programs of the protocol analysis (every loop iteration, each check shape's
trip counts), the rule counts each participant's uses and requires them to be equal.
When they differ, the generations pair up wrongly and the busiest role's use number
`min + 1` has no partner: if it is a `sync` it waits forever; if it is an `arrive` its
threads spill into a generation they do not belong to. The finding points at that use,
gives every role's count and carries the exploration's deadlock (or overflow) witness.
Declared thread counts and ids are R007's business; the rule stays silent for a barrier
R007 already rejected.

## Why is this bad?
A role that reaches a named barrier fewer times than its partners (a missing `sync`, a
`sync` in a loop whose partner sits outside it, a role whose loop never runs for some
sizes) leaves the others blocked in `bar.sync` forever: the CTA hangs and with it the
whole grid. A surplus `bar.arrive` completes a later generation early instead, releasing
waiters before the data they wait for is ready.

## Failing example
`corpus/invalid/scale/named_barrier_extra_sync.cake`:
```python
ready.sync()  # expect: P015
```

## Passing example
`corpus/valid/scale/named_barrier_handoff.cake`:
```python
ready.arrive()
ready.sync()
```
"""

from cakegov.analysis.flow import (
    at_iter,
    flow_of,
    named_participants,
    pipelines_of,
    runs_longest_first,
    structurally_rejected,
)
from cakegov.analysis.witness import witness_evidence
from cakegov.ir.nodes import NamedBarrierDecl

CODE = "P015"
NAME = "named-barrier-deadlock"
VERSION = "1.0.0"
SEVERITY = "blocking"
CATEGORY = "protocol"
STATUS = "stable"
MOTIVATED_BY = (
    "corpus/invalid/scale/named_barrier_extra_sync.cake",
    "corpus/invalid/kmeans_assign/named_handback_missing.cake",
)


def _witness(anomalies, bar_id):
    for kind in ("deadlock", "named"):
        for a in anomalies:
            if a.kind == kind and any(e.kind == "named" and e.named and e.named[0] == bar_id
                                      for e in a.events):
                return a
    return None


def check(ctx):
    result = ctx.protocol
    if result is None or structurally_rejected(ctx.findings):
        return
    decls = {d.id: d for d in ctx.decls(NamedBarrierDecl)}
    rejected = {f.resource for f in ctx.findings if f.code == "R007"}
    participants = named_participants(result.kernel)
    reported = set()
    for run in runs_longest_first(result):
        flow = flow_of(result.kernel, run.unrolled, pipelines_of(ctx.schedule))
        for item in flow.named_mismatches(participants):
            decl = decls.get(item.id)
            name = decl.name if decl is not None else f"barrier {item.id}"
            if item.id in reported or name in rejected or item.surplus is None:
                continue
            reported.add(item.id)
            ev = item.surplus
            low = min(item.counts.values())
            counts = ", ".join(f"`{r}` {n}x" for r, n in item.counts.items())
            short = [r for r, n in item.counts.items() if n == low]
            sizes = ", ".join(f"{k}={v}" for k, v in run.sizes.items())
            blocks = ev.named is not None and ev.named[2]
            effect = ("waits forever: the barrier never gets its threads again (deadlock)"
                      if blocks else "arrives into a generation of the barrier that its "
                      "partners never join, which completes it early")
            anomaly = _witness(result.anomalies, item.id)
            evidence = {"id": item.id, "uses": item.counts, "sizes": run.sizes}
            if anomaly is not None:
                evidence = witness_evidence(anomaly, **evidence)
            yield ctx.finding(
                ctx.node_at(ev.path),
                f"named barrier `{name}` (id {item.id}) is reached {counts} (sizes "
                f"{sizes}): use {low + 1} of `{item.surplus_role}`{at_iter(ev)} has no "
                f"partner and {effect}",
                condition=("every role that uses a named barrier reaches it the same number "
                           f"of times: {counts}"),
                hint=(f"make the uses match: remove this surplus use, or let "
                      f"{', '.join(f'`{r}`' for r in short)} reach `{name}` as often as "
                      f"`{item.surplus_role}` (same loop, same trip count)"),
                resource=name, role=item.surplus_role, evidence=evidence,
            )
        if reported:
            return
