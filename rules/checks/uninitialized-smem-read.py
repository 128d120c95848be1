"""Shared memory is read only after something has written it.

## What it does
The protocol analysis finds a read of shared memory that no write happens before in
any execution, and no write is merely unordered with it (that would be a race): the
bytes are never written at all (a load into the wrong buffer, a stage that is never
loaded, a result computed into registers instead of the tile that is stored), or only
later. The finding points at the read, names the buffer and stage and carries the
witness; the fix is to write the data first, which the rule cannot choose for you.

## Why is this bad?
Shared memory is not cleared between CTAs: a read of a location nothing wrote returns
whatever the previous CTA or kernel left there. The result is wrong, and often
plausibly wrong, with no fault to notice.

## Failing example
`corpus/invalid/kmeans_assign/centroids_never_loaded.cake`:
```python
            lm.sqdist(dist, x_s[ring.stage(t)], c_s)  # expect: P018
```

## Passing example
`corpus/valid/kmeans_assign/rows_pipelined_s2.cake`:
```python
        c_s[0].load(C, at=(0, 0), barrier=cbar[0])
```
"""

from cakegov.analysis.diagnose import evidence, structurally_rejected
from cakegov.check.repair import Fix

CODE = "P018"
NAME = "uninitialized-smem-read"
VERSION = "2.1.0"
SEVERITY = "blocking"
CATEGORY = "protocol"
STATUS = "stable"
MOTIVATED_BY = (
    "corpus/invalid/kmeans_assign/centroids_never_loaded.cake",
    "corpus/invalid/scale/store_async_of_unwritten_tile.cake",
)


def check(ctx):
    if ctx.protocol is None or structurally_rejected(ctx.findings):
        return
    seen = set()
    for anomaly in ctx.unclaimed(("uninit",)):
        ev = anomaly.events[0]
        key = (anomaly.resource, anomaly.details.get("stage"))
        if key in seen:
            continue
        seen.add(key)
        stage = anomaly.details.get("stage")
        never = anomaly.details.get("never_written")
        fix = Fix(description=f"load or write `{anomaly.resource}` stage {stage} before "
                              "this read, and order the write before it", applicability="none")
        yield ctx.finding(
            ctx.node_at(ev.path),
            f"`{ev.role}` reads `{anomaly.resource}` stage {stage} ({ev.where()}), which "
            + ("nothing in the kernel ever writes" if never else
               "nothing writes before this read"),
            condition="every shared-memory read is preceded (in happens-before) by a write "
                      "of its bytes",
            hint=fix.description, resource=anomaly.resource, role=ev.role,
            stage=stage, evidence=evidence(anomaly),
            fix=fix, explains=[a for a in ctx.unclaimed(("uninit",))
                               if a.resource == anomaly.resource])
