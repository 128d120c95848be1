"""A manually initialised mbarrier is used only after init, fence and CTA sync, and is
initialised once.

## What it does
The protocol analysis finds a barrier declared `init="manual"` used (waited on,
arrived on, or completed by a bulk copy) by a thread that the initialisation is not yet
ordered before: before its `init()`, before the initialising role's
`lm.fence_barrier_init()`, or, for another role, before a CTA sync that follows that
fence; or a barrier initialised twice. The rule proposes the missing fence, the missing
`lm.sync_cta()` (in every role, since all must reach it) or deleting the second
`init()`, has the engine re-check the schedule, and reports only when that removes the
anomaly: at the statement at fault, with the witness and the re-checked fix.

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
            a_s[k % S].load(A, at=(m0, k * BK), barrier=full[k % S], pad=True)  # expect: P012
```

## Passing example
`corpus/valid/gemm/raw_manual_init_s2.cake`:
```python
        lm.fence_barrier_init()                              # make the inits visible
        lm.sync_cta()                                        # ... to every role
```
"""

from cakegov.analysis.diagnose import (
    Candidate,
    calls,
    classify,
    evidence,
    first_statement,
    role_of,
)
from cakegov.plugin import Repair

CODE = "P012"
NAME = "init-order"
VERSION = "2.0.0"
SEVERITY = "blocking"
CATEGORY = "protocol"
STATUS = "stable"
MOTIVATED_BY = (
    "corpus/invalid/gemm/manual_init_without_fence.cake",
    "corpus/invalid/scale/manual_init_waiter_before_sync.cake",
    "corpus/invalid/kmeans_assign/manual_init_reinit.cake",
)

_KINDS = ("init-order",)


def _candidates(ctx, anomaly):
    ev = anomaly.events[0]
    if anomaly.details.get("reinit"):
        yield Candidate((Repair("delete", ev.path),), "delete this `init()`: the barrier is "
                        "already initialised and keeps counting phases by itself",
                        subject=ev.path)
        return
    inits = calls(ctx.schedule, ("mbarrier_init",))
    fences = calls(ctx.schedule, ("fence_barrier_init",))
    if inits:
        last = inits[-1]
        if not fences:
            yield Candidate((Repair("insert", last.path, text="lm.fence_barrier_init()",
                                    after=True),),
                            "add `lm.fence_barrier_init()` after the initialisations",
                            subject=last.path)
        anchor = fences[-1] if fences else last
        init_role = role_of(anchor.path)
        syncs = [Repair("insert", anchor.path, text="lm.sync_cta()", after=True)]
        for role in ctx.schedule.roles:
            first = first_statement(ctx.schedule, role.name)
            if role.name != init_role and first is not None:
                syncs.append(Repair("insert", first.path, text="lm.sync_cta()"))
        repairs = tuple(syncs) if fences else (
            Repair("insert", last.path, text="lm.fence_barrier_init()", after=True),
            *syncs[1:])
        yield Candidate(repairs, "publish the initialisation with `lm.sync_cta()` in every "
                        "role before the barrier is used", subject=ev.path)
        yield Candidate((Repair("move_after", ev.path, other=anchor.path),),
                        "use the barrier only after its initialisation is fenced",
                        subject=ev.path)


def _report(ctx, anomaly, attempt, cand):
    ev = anomaly.events[0]
    at = cand.subject if anomaly.details.get("reinit") else ev.path
    return ctx.finding(
        ctx.node_at(at), anomaly.message,
        condition="an mbarrier is used only after init, fence.mbarrier_init and a CTA sync "
                  "order the initialisation before the use, and is initialised once",
        hint=attempt.fix.description, resource=anomaly.resource or None, role=ev.role,
        evidence=evidence(anomaly, state=anomaly.details.get("state")), fix=attempt.fix,
        explains=attempt.removed)


def check(ctx):
    yield from classify(ctx, _KINDS, _candidates, _report)
