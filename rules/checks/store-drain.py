"""A bulk store's shared-memory tile is not reused, released or abandoned before the
store has finished reading it.

## What it does
`<smem>[stage].store_async(...)` reads its stage through the async proxy after it is
issued; only `lm.store_wait(pending=N)` (`cp.async.bulk.wait_group.read`) tells the
issuing role that the group has finished reading. The protocol analysis gives every
role's in-flight bulk stores a clock lane of their own that joins the role's clock only
when a store wait retires them. This rule reports (1) a write into the stage - by the
issuing role, or by another role after a release - that the exploration finds unordered
with the store's read, pointing at that write (or at the release), and (2) a role that
ends with bulk stores still in flight, pointing at the store. It says which
`lm.store_wait` (and with which `pending`) fixes it.

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

from cakegov.analysis.asynchrony import (
    anomalies_of,
    iteration,
    last_wait_before,
    release_between,
    retiring_wait,
    role_events,
    wait_fix,
)
from cakegov.analysis.witness import witness_evidence

CODE = "P014"
NAME = "store-drain"
VERSION = "1.0.0"
SEVERITY = "blocking"
CATEGORY = "protocol"
STATUS = "stable"
MOTIVATED_BY = (
    "corpus/invalid/scale/store_async_not_drained.cake",
    "corpus/invalid/kmeans_assign/labels_stage_reused_before_drain.cake",
)


def _reuse(ctx, anomaly):
    """A write into a stage a bulk store may still be reading."""
    result = ctx.protocol
    writer, store = anomaly.events
    events = role_events(result, store)
    buf, stage = anomaly.resource, anomaly.details.get("stage")
    if writer.role == store.role:
        at, what = writer, f"`{store.role}` writes it again"
    else:
        if not anomaly.details.get("issue_ordered"):
            return None
        retire = retiring_wait(events, store)
        waited = last_wait_before(role_events(result, writer), writer.seq)
        at = release_between(events, store.seq, retire.seq if retire else len(events),
                             waited.slot if waited is not None else None)
        if at is None:
            return None
        what = f"`{store.role}` hands it to `{writer.role}` at line {at.line}{iteration(at)}"
    return at, ctx.finding(
        ctx.node_at(at.path),
        f"`{store.role}`'s bulk store of `{buf}` stage {stage} (line {store.line}"
        f"{iteration(store)}) may still be reading the stage when {what}: the write at "
        f"line {writer.line}{iteration(writer)} can change the data being stored",
        condition="a stage read by store_async is written again, or handed to another "
                  "role, only after an lm.store_wait retires that bulk group",
        hint=f"{wait_fix(events, store, at)}, so the bulk store has finished reading "
             f"`{buf}` stage {stage}",
        resource=buf, role=store.role, stage=str(stage),
        evidence=witness_evidence(anomaly, buffer=buf, stage=stage, store_line=store.line,
                                  write_line=writer.line),
    )


def _exit(ctx, anomaly):
    """A role that ends with bulk stores in flight."""
    store = anomaly.events[0]
    last = anomaly.events[-1]
    left = anomaly.details["issued"] - anomaly.details["retired"]
    return ctx.finding(
        ctx.node_at(store.path),
        f"`{store.role}` ends with {left} bulk store(s) still reading shared memory "
        f"(first: line {store.line}{iteration(store)}): the CTA may exit and its shared "
        "memory be reused while the copy engine reads it",
        condition="every store_async group is retired by lm.store_wait before the role "
                  "ends",
        hint=f"add `lm.store_wait(pending=0)` at the end of `{store.role}`'s body, after "
             f"line {last.line}",
        resource=anomaly.resource or None, role=store.role,
        evidence=witness_evidence(anomaly, store_line=store.line, pending=left),
    )


def check(ctx):
    result = ctx.protocol
    if result is None:
        return
    seen = set()
    for anomaly in anomalies_of(result, "race"):
        d = anomaly.details
        if d.get("first_group") != "bulk" or d.get("space") != "smem":
            continue
        made = _reuse(ctx, anomaly)
        if made is not None and made[0].path not in seen:
            seen.add(made[0].path)
            yield made[1]
    for anomaly in anomalies_of(result, "async-pending"):
        if anomaly.details.get("group") == "bulk" and anomaly.events[0].path not in seen:
            seen.add(anomaly.events[0].path)
            yield _exit(ctx, anomaly)
