"""Generic-proxy accesses of shared memory need a proxy fence in the accessing threads
before an async-proxy access of the same bytes: generic writes before an async reader
(bulk store, wgmma operand), and generic reads or writes before an async writer (a TMA or
bulk copy refilling the stage).

## What it does
The protocol analysis finds shared memory accessed with generic loads or stores and then
accessed through the async proxy, with a hand-off in between but no `fence.proxy.async`
by the generic threads between their access and the hand-off (PTX ISA, memory
consistency model: proxies; axioms A9 and A19 in docs/checker.md):

- written with generic stores, then read by a bulk store or wgmma (A9);
- read with generic loads (`ld.shared`, `ldmatrix` of `lm.mma` or of an `mma_async` the
  lowering emits as `mma.sync`), then overwritten by a copy the hand-off let the
  producer issue (A19).

The lowering already fences before every mbarrier `arrive`, pipeline `release` and own
bulk copy of a role that touches refilled buffers through the generic proxy, so what is
left is a hand-off through a named barrier (`bar.sync` / `bar.arrive`) or `lm.sync_cta()` that
another warp's release follows. The rule proposes `lm.fence_proxy()` right after the
access, has the engine re-check the schedule, and reports only when that removes the
anomaly: at the access, with the witness and the re-checked fix.

## Why is this bad?
An mbarrier or named barrier orders generic accesses for generic accesses only. Without
`fence.proxy.async` the bulk store or the tensor cores may read shared memory as it was
before the generic writes, and a TMA copy may land before the generic reads of the old
contents are performed (on an H200 three FlashAttention-3 transcriptions gave 2-22 %
wrong outputs this way). The result depends on timing.

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
VERSION = "2.2.1"
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
    what = "access" if anomaly.details.get("refill") else "write"
    yield Candidate((Repair("insert", writer.path, text="lm.fence_proxy()", after=True),),
                    f"insert `lm.fence_proxy()` in `{writer.role}` after the {what} (line "
                    f"{writer.line}), before the hand-off", subject=writer.path,
                    value=(reader, writer))


def _report(ctx, anomaly, attempt, cand):
    reader, writer = cand.value
    stage = anomaly.details.get("stage")
    if anomaly.details.get("refill"):  # axiom A19: generic accesses, then an async write
        kind = anomaly.details.get("generic_kind", "read")
        message = (f"`{writer.role}` {kind}s `{anomaly.resource}` stage {stage} through the "
                   f"generic proxy and `{reader.role}` overwrites it through the async proxy "
                   f"({reader.primitive or 'copy'}, line {reader.line}) with no "
                   f"`lm.fence_proxy()` in `{writer.role}` between its {kind} and the "
                   "hand-off: the copy can land before the generic accesses are performed")
        condition = ("generic-proxy reads and writes of shared memory are followed by "
                     "fence.proxy.async in the accessing threads before the hand-off to an "
                     "async-proxy write of the same bytes")
    else:
        message = (f"`{writer.role}` writes `{anomaly.resource}` stage {stage} with generic "
                   f"stores and `{reader.role}` reads it through the async proxy "
                   f"({reader.primitive or 'copy'}, line {reader.line}) with no "
                   "`lm.fence_proxy()` in between")
        condition = ("generic-proxy writes to shared memory are followed by fence.proxy.async "
                     "in the writer before the hand-off to an async-proxy reader")
    return ctx.finding(
        ctx.node_at(writer.path), message, condition=condition,
        hint=attempt.fix.description, resource=anomaly.resource, role=writer.role,
        stage=stage,
        evidence=evidence(anomaly), fix=attempt.fix, explains=attempt.removed)


def check(ctx):
    yield from classify(ctx, _KINDS, _candidates, _report)
