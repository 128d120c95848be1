"""Shared memory written by generic stores needs a proxy fence in the writer before an
async-proxy reader (bulk store, asynchronous MMA) reads it.

## What it does
Generic stores (`lm.elementwise`, `lm.fill`, ... into a shared-memory view) and the async
proxy (`store_async` bulk stores, `lm.mma_async` operand reads, which also run through
it) are separate views of shared memory. The protocol analysis marks every generic
write with the writer's first later `lm.fence_proxy()` and reports an async-proxy read
that happens after the write but not after such a fence - in the same role, or in another
role that the writer handed the buffer to with an arrive or a named barrier. This rule
points at the generic write, names the buffer, the stage, the writer, the reader and the
hand-off, and says where the fence goes.

## Why is this bad?
An mbarrier or named barrier orders the writes for generic readers only; without
`fence.proxy.async` the bulk store or the tensor cores may read shared memory as it was
before the generic writes. The result is stale output that depends on timing.

## Failing example
`corpus/invalid/scale/store_async_without_fence.cake`:
```python
        lm.elementwise(y_s[0], x_s[0], op="scale", alpha=2.5)  # expect: P013
```

## Passing example
`corpus/valid/scale/store_async_epilogue.cake`:
```python
        lm.fence_proxy()                                      # generic writes -> async proxy
        y_s[0].store_async(Y, at=(m0, n0))
```
"""

from cakegov.analysis.asynchrony import anomalies_of, hands_off, iteration, role_events
from cakegov.analysis.witness import witness_evidence

CODE = "P013"
NAME = "proxy-fence"
VERSION = "1.0.0"
SEVERITY = "blocking"
CATEGORY = "protocol"
STATUS = "stable"
MOTIVATED_BY = (
    "corpus/invalid/scale/store_async_without_fence.cake",
    "corpus/invalid/gemm/epilogue_handoff_without_fence.cake",
    "corpus/invalid/kmeans_assign/labels_store_async_without_fence.cake",
)


def check(ctx):
    result = ctx.protocol
    if result is None:
        return
    seen = set()
    for anomaly in anomalies_of(result, "proxy"):
        reader, writer = anomaly.events
        if writer.path in seen:
            continue
        seen.add(writer.path)
        buf, stage = anomaly.resource, anomaly.details.get("stage")
        events = role_events(result, writer)
        handoff = None
        if reader.role != writer.role:
            handoff = next((e for e in events[writer.seq + 1:] if hands_off(e)), None)
        fences = [e for e in events[writer.seq + 1:]
                  if e.kind == "fence" and e.scope == "proxy_async"]
        read = f"{reader.primitive}, line {reader.line}{iteration(reader)}"
        if handoff is not None:
            place = f"after line {writer.line} and before the hand-off at line {handoff.line}"
            how = (f"hands it to `{reader.role}` at line {handoff.line}, which reads it "
                   f"through the async proxy ({read})")
        else:
            place = f"after line {writer.line} and before line {reader.line}"
            how = f"then reads it through the async proxy ({read})"
        late = f" (the fence at line {fences[0].line} comes too late)" if fences else ""
        yield ctx.finding(
            ctx.node_at(writer.path),
            f"`{writer.role}` writes `{buf}` stage {stage}{iteration(writer)} with generic "
            f"stores and {how} with no `lm.fence_proxy()` in between{late}",
            condition="generic-proxy writes to shared memory are followed by "
                      "fence.proxy.async in the writer before the hand-off to an "
                      "async-proxy reader (bulk store, wgmma operand)",
            hint=f"insert `lm.fence_proxy()` in `{writer.role}` {place}",
            resource=buf, role=writer.role, stage=str(stage),
            evidence=witness_evidence(anomaly, buffer=buf, stage=stage,
                                      write_line=writer.line, read_line=reader.line,
                                      handoff_line=handoff.line if handoff else None),
        )
