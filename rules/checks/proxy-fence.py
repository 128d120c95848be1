"""Shared memory written by generic stores needs a proxy fence in the writer before an
async-proxy reader (bulk store, asynchronous MMA) reads it.

## What it does
The protocol analysis finds shared memory written with generic stores and later
read through the async proxy (a bulk store, a wgmma operand) with the hand-off in
between but no `fence.proxy.async` by the writing threads between the write and the
hand-off (PTX ISA, memory consistency model: proxies). The rule proposes
`lm.fence_proxy()` right after the write, has the engine re-check the schedule, and
reports only when that removes the anomaly: at the write, with the witness and the
re-checked fix.

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

from cakegov.analysis.diagnose import Candidate, classify, evidence
from cakegov.plugin import Repair

CODE = "P013"
NAME = "proxy-fence"
VERSION = "2.1.0"
SEVERITY = "blocking"
CATEGORY = "protocol"
STATUS = "stable"
MOTIVATED_BY = (
    "corpus/invalid/scale/store_async_without_fence.cake",
    "corpus/invalid/gemm/epilogue_handoff_without_fence.cake",
    "corpus/invalid/kmeans_assign/labels_store_async_without_fence.cake",
)

_KINDS = ("proxy",)


def _candidates(ctx, anomaly):
    reader, writer = anomaly.events
    yield Candidate((Repair("insert", writer.path, text="lm.fence_proxy()", after=True),),
                    f"insert `lm.fence_proxy()` in `{writer.role}` after the write (line "
                    f"{writer.line}), before the hand-off", subject=writer.path,
                    value=(reader, writer))


def _report(ctx, anomaly, attempt, cand):
    reader, writer = cand.value
    stage = anomaly.details.get("stage")
    return ctx.finding(
        ctx.node_at(writer.path),
        f"`{writer.role}` writes `{anomaly.resource}` stage {stage} with generic stores and "
        f"`{reader.role}` reads it through the async proxy ({reader.primitive or 'copy'}, line "
        f"{reader.line}) with no `lm.fence_proxy()` in between",
        condition="generic-proxy writes to shared memory are followed by fence.proxy.async in "
                  "the writer before the hand-off to an async-proxy reader",
        hint=attempt.fix.description, resource=anomaly.resource, role=writer.role,
        stage=stage,
        evidence=evidence(anomaly), fix=attempt.fix, explains=attempt.removed)


def check(ctx):
    yield from classify(ctx, _KINDS, _candidates, _report)
