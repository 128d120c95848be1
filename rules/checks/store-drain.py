"""A bulk store's shared-memory tile is not reused, released or abandoned before the
store has finished reading it.

## What it does
The protocol analysis finds a bulk store (`store_async`) that may still be reading
its shared-memory stage when the stage is written again (by the storing role, or by the
role it handed the stage to), or a role that ends with bulk stores in flight, so the CTA
may exit while the copy engine still reads its shared memory. The rule proposes
`lm.store_wait(pending=0)` (before the write or the hand-off, or at the end of the role)
or a lower `pending` on a store wait already there, has the engine re-check the
schedule, and reports only when that removes the anomaly: at the write, the hand-off or
the store, with the witness and the re-checked fix.

## Why is this bad?
The copy engine reads the tile while the kernel goes on: overwriting the tile stores the
new data to the old tile's place in global memory, and a CTA that exits with a store in
flight hands its shared memory to the next CTA while it is still being read. Both give
wrong output that depends on timing.

## Failing example
`corpus/invalid/scale/store_async_not_drained.cake`:
```python
        y_s[0].store_async(Y, at=(m0, n0))  # expect: P014
```

## Passing example
`corpus/valid/scale/store_async_epilogue.cake`:
```python
        y_s[0].store_async(Y, at=(m0, n0))
        lm.store_wait(pending=0)                              # drained before exit
```
"""

from cakegov.analysis.diagnose import (
    Candidate,
    classify,
    evidence,
    hand_off_after,
    last_statement,
    program_of,
)
from cakegov.plugin import Repair

CODE = "P014"
NAME = "store-drain"
VERSION = "2.0.0"
SEVERITY = "blocking"
CATEGORY = "protocol"
STATUS = "stable"
MOTIVATED_BY = (
    "corpus/invalid/scale/store_async_not_drained.cake",
    "corpus/invalid/kmeans_assign/labels_stage_reused_before_drain.cake",
)

_KINDS = ("async-pending", "race")


def _candidates(ctx, anomaly):
    program = program_of(ctx, anomaly)
    if program is None:
        return
    if anomaly.kind == "async-pending":
        if anomaly.details.get("group") != "bulk":
            return
        store = anomaly.events[0]
        last = last_statement(ctx.schedule, store.role)
        if last is not None:
            yield Candidate((Repair("insert", last.path, text="lm.store_wait(pending=0)",
                                    after=True),),
                            f"add `lm.store_wait(pending=0)` at the end of `{store.role}`",
                            subject=store.path, value=store)
        return
    second, first = anomaly.events
    if first.group != "bulk":
        return
    events = program.threads[first.thread].events
    at = second if second.thread == first.thread else hand_off_after(program, first)
    if at is None:
        return
    between = [e for e in events[first.seq + 1:at.seq] if e.kind == "retire"
               and e.group == "bulk"] if at.thread == first.thread else []
    for wait in reversed(between):
        for pending in range(wait.pending - 1, -1, -1):
            yield Candidate((Repair("set_arg", wait.path, "pending", str(pending)),),
                            f"lower `lm.store_wait(pending={wait.pending})` to "
                            f"`pending={pending}`", subject=at.path, value=first)
    yield Candidate((Repair("insert", at.path, text="lm.store_wait(pending=0)"),),
                    "insert `lm.store_wait(pending=0)` before this statement, so the bulk "
                    "store has finished reading the stage", subject=at.path, value=first)


def _report(ctx, anomaly, attempt, cand):
    store = cand.value
    return ctx.finding(
        ctx.node_at(cand.subject),
        f"`{store.role}`'s bulk store of line {store.line} may still be reading shared "
        f"memory: {anomaly.message}",
        condition="a stage read by store_async is written again, handed on, or left at exit "
                  "only after an lm.store_wait retires that bulk group",
        hint=attempt.fix.description, resource=anomaly.resource or None, role=store.role,
        evidence=evidence(anomaly), fix=attempt.fix, explains=attempt.removed)


def check(ctx):
    yield from classify(ctx, _KINDS, _candidates, _report)
