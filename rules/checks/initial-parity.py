"""A wait's first parity names the phase it needs: 1 passes on a fresh barrier, 0 waits for it.

## What it does
The protocol analysis reaches an anomaly (a wait for a phase no one completes, or a
wait that passes on a phase that does not cover what it guards, and the race that
follows) and the parity of one wait statement is inverted at every one of its
executions. Which parity is right depends on which phase the waiter needs, never on
whether it is a "producer" or a "consumer": on a fresh barrier `parity=1` passes at once
and `parity=0` waits for phase 0. The rule proposes the opposite parity for the waits
the anomaly involves, has the engine re-check the schedule, and reports only when that
removes the anomaly, pointing at the wait with the witness and the re-checked fix. A
wait executed once that would then pass on the fresh barrier orders nothing: such a
deadlock is a wait-for cycle (P016), not a parity.

## Why is this bad?
A producer that starts on parity 0 waits for a release of a stage it has not filled yet:
the kernel hangs before the first copy. A consumer that starts on parity 1 passes on the
barrier's initial state, before any data has landed, and every later wait passes one
phase early: it reads stages while their copies are still in flight.

## Failing example
`corpus/invalid/gemm/consumer_parity_inverted.cake`:
```python
            full[k % S].wait(parity=(k // S + 1) % 2)  # expect: P005
```

## Passing example
`corpus/valid/gemm/raw_barriers_s2.cake`:
```python
            full[k % S].wait(parity=(k // S) % 2)
```
"""

from cakegov.analysis.diagnose import (
    Candidate,
    barrier_of,
    classify,
    evidence,
    loops_around,
    parity_is_constant,
    parity_text,
    raw_waits,
)
from cakegov.plugin import Repair

CODE = "P005"
NAME = "initial-parity"
VERSION = "2.1.2"
SEVERITY = "blocking"
CATEGORY = "protocol"
STATUS = "stable"
MOTIVATED_BY = (
    "corpus/invalid/gemm/consumer_parity_inverted.cake",
    "corpus/invalid/gemm/producer_parity_zero.cake",
    "corpus/invalid/scale/wait_parity_one.cake",
    "corpus/invalid/kmeans_assign/centroid_wait_parity_one.cake",
)

_KINDS = ("deadlock", "race", "uninit", "early-pass", "lapped", "premature", "exit-inflight",
          "over-arrival")


def _candidates(ctx, anomaly):
    for wait in raw_waits(ctx, anomaly)[:6]:
        if not loops_around(ctx.schedule, wait.path) and parity_is_constant(wait, 0):
            continue  # flipping it makes it pass on the fresh barrier: P016
        yield Candidate((Repair("set_parity", wait.path, form="flip"),),
                        "use the opposite parity: the wait must observe the phase that "
                        "covers what it guards", subject=wait.path, value=wait)


def _report(ctx, anomaly, attempt, cand):
    wait = cand.value
    barrier = barrier_of(wait) or ""
    new = attempt.fix.edits[0].text
    return ctx.finding(
        wait,
        f"`{barrier}` is waited on with `parity={parity_text(ctx, wait)}`, inverted at every "
        f"execution of this wait: with `parity={new}` it observes the phases it needs",
        condition="the wait observes the phase whose completion covers what it guards",
        hint=f"use `parity={new}`", resource=barrier, role=_role(wait.path),
        evidence=evidence(anomaly), fix=attempt.fix, explains=attempt.removed)


def _role(path):
    return path.split(".")[1] if path.startswith("roles.") else None


def check(ctx):
    yield from classify(ctx, _KINDS, _candidates, _report)
