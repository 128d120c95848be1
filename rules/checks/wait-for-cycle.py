"""Roles must not wait on each other's phases in a cycle.

## What it does
The protocol analysis reaches a deadlock in which roles wait on each other in a
cycle: a role waits for a phase that only its own later statements, or another role's
statements that are themselves behind a wait of this one, can complete (a wait placed
before the arrive or the copy it needs). Counts, bytes and parities may all be right.
The rule proposes moving the blocked wait after the statement it needs, has the engine
re-check the schedule, and reports only when that removes the deadlock: at the wait,
with the witness and the re-checked fix.

## Why is this bad?
Each role in the cycle holds back the arrival the next one needs: the CTA hangs
forever. Unlike a wrong count it is a matter of order, not of numbers, so every counting
check passes; typical causes are a wait placed before the arrive it depends on, or a
look-ahead consumer on a ring with too few stages.

## Failing example
`corpus/invalid/gemm/lookahead_single_stage.cake`:
```python
ring.wait(k + 1)  # expect: P016
```

## Passing example
`corpus/valid/gemm/pipeline_lookahead_s2.cake`:
```python
ring.wait(k + 1)                          # look ahead, then hand k back
ring.release(k)
```
"""

from cakegov.analysis.diagnose import Candidate, classify, evidence, siblings_after
from cakegov.plugin import Repair

CODE = "P016"
NAME = "wait-for-cycle"
VERSION = "2.0.0"
SEVERITY = "blocking"
CATEGORY = "protocol"
STATUS = "stable"
MOTIVATED_BY = (
    "corpus/invalid/gemm/lookahead_single_stage.cake",
    "corpus/invalid/kmeans_assign/lookahead_single_stage.cake",
    "corpus/invalid/scale/wait_before_arm.cake",
)

_KINDS = ("deadlock",)


def _candidates(ctx, anomaly):
    for ev in anomaly.events:
        if ev.kind != "wait":
            continue
        for later in siblings_after(ctx.schedule, ev.path)[:6]:
            yield Candidate((Repair("move_after", ev.path, other=later.path),),
                            f"move this wait after line {later.span.line}: what it waits "
                            "for comes later", subject=ev.path, value=(ev, later))


def _report(ctx, anomaly, attempt, cand):
    ev, later = cand.value
    return ctx.finding(
        ctx.node_at(ev.path),
        f"`{ev.role}` waits on {anomaly.resource} ({ev.where()}) for a phase that needs "
        f"what comes after the wait (line {later.span.line}): {anomaly.message}",
        condition="no role waits, directly or through another role, for its own later "
                  "statements",
        hint=attempt.fix.description, resource=anomaly.resource or None, role=ev.role,
        evidence=evidence(anomaly), fix=attempt.fix, explains=attempt.removed)


def check(ctx):
    yield from classify(ctx, _KINDS, _candidates, _report)
