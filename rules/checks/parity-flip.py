"""A wait's parity must follow the phases it observes on its barrier slot, flipping when they do.

## What it does
The protocol analysis reaches an anomaly (a deadlock, a wait that passes on the
wrong phase, the race that follows) and the parity of one wait statement does not follow
the phases it observes: it flips too often, too rarely or not at all. The rule proposes
the parity that follows the ring, `(E // m) % 2` (or `+ 1` for a waiter one phase behind)
for a barrier indexed `E % m`, or the parity of the loop iteration for a barrier with one
slot, written with the schedule's own names; has the engine re-check the schedule, and
reports only when that removes the anomaly, pointing at the wait with the witness and the
re-checked fix. A parity that is merely inverted is initial-parity (P005).

## Why is this bad?
Where the parity is wrong, the wait either blocks on a phase that cannot complete before
its own role proceeds (the kernel hangs), or passes on a phase it already observed and
reads or overwrites a stage the other side has not finished with (silently wrong data).

## Failing example
`corpus/invalid/gemm/parity_flip_period_s4.cake`:
```python
            empty[k % S].wait(parity=(k // 2 + 1) % 2)  # expect: P006
```

## Passing example
`corpus/valid/gemm/raw_barriers_s2.cake`:
```python
            empty[k % S].wait(parity=(k // S + 1) % 2)   # producer starts on parity 1
```
"""

from cakegov.analysis.diagnose import (
    Candidate,
    barrier_of,
    classify,
    evidence,
    parity_text,
    raw_waits,
    role_of,
)
from cakegov.plugin import Repair

CODE = "P006"
NAME = "parity-flip"
VERSION = "2.1.1"
SEVERITY = "blocking"
CATEGORY = "protocol"
STATUS = "stable"
MOTIVATED_BY = (
    "corpus/invalid/gemm/parity_flip_period_s4.cake",
    "corpus/invalid/kmeans_assign/raw_ring_parity_stage_bit.cake",
)

_KINDS = ("deadlock", "race", "uninit", "early-pass", "lapped", "premature", "exit-inflight",
          "over-arrival")
_FORMS = ("ring", "ring+1", "ordinal", "ordinal+1")


def _candidates(ctx, anomaly):
    for wait in raw_waits(ctx, anomaly)[:6]:
        for form in _FORMS:
            yield Candidate((Repair("set_parity", wait.path, form=form),),
                            "make the parity follow the phases the wait observes",
                            subject=wait.path, value=wait)


def _report(ctx, anomaly, attempt, cand):
    wait = cand.value
    barrier = barrier_of(wait) or ""
    new = attempt.fix.edits[0].text
    return ctx.finding(
        wait,
        f"`{barrier}` is waited on with `parity={parity_text(ctx, wait)}`, which does not follow "
        f"the phases this wait observes; `parity={new}` flips with them",
        condition="the parity of each wait follows the phase sequence it observes on its "
                  "slot",
        hint=f"use `parity={new}`", resource=barrier, role=role_of(wait.path) or None,
        evidence=evidence(anomaly), fix=attempt.fix, explains=attempt.removed)


def check(ctx):
    yield from classify(ctx, _KINDS, _candidates, _report)
