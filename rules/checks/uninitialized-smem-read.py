"""Shared memory is read only after something has written it.

## What it does
The protocol analysis records, for every shared-memory location (one stage of a buffer),
the first write in each explored interleaving, and reports a read that no write happens
before. This rule keeps the reads of locations that no statement of any role ever writes
(a load into the wrong buffer, a stage that is never loaded, a result computed into
registers instead of the tile that is stored) and of locations that only the reading
role writes, later in its own program. Reads that another role's write or a bulk copy
does reach, only without the wait that orders them, are missing waits (P008). The
finding points at the read, names the buffer and stage and lists what is written
instead.

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

from cakegov.analysis.asynchrony import anomalies_of, iteration, writes_to, written_stages
from cakegov.analysis.witness import witness_evidence

CODE = "P018"
NAME = "uninitialized-smem-read"
VERSION = "1.0.0"
SEVERITY = "blocking"
CATEGORY = "protocol"
STATUS = "stable"
MOTIVATED_BY = (
    "corpus/invalid/kmeans_assign/centroids_never_loaded.cake",
    "corpus/invalid/scale/store_async_of_unwritten_tile.cake",
)


def _explain(ctx, anomaly):
    """(why nothing is written, hint), or None when the read belongs to another rule."""
    ev = anomaly.events[0]
    buf, stage = anomaly.resource, anomaly.details["stage"]
    writes = writes_to(ctx.protocol, ev, ("smem", buf, stage))
    if writes:
        if any(w.role != ev.role or w.kind != "compute" for w in writes):
            return None  # written by a copy or another role: ordering, not initialisation
        first = writes[0]
        return (f"its only writes are `{ev.role}`'s own, from line {first.line}"
                f"{iteration(first)} on, after this read",
                f"write `{buf}` stage {stage} before line {ev.line}, or read the tile that "
                "holds the data")
    stages = written_stages(ctx.protocol, ev, buf)
    if stages:
        listed = ", ".join(f"{s} (line {w.line})" for s, w in sorted(stages.items()))
        return (f"no statement writes stage {stage}; `{buf}` is written only at stage(s) "
                f"{listed}",
                f"read a stage that is written, or write `{buf}` stage {stage} (with the "
                "barrier that orders it) before this read")
    return (f"no statement of any role writes `{buf}`",
            f"fill `{buf}` before line {ev.line}: a bulk load with its barrier armed and "
            "waited on, or a write followed by the synchronisation that orders it; if a "
            "write meant for it targets another buffer or a register fragment, point it "
            f"at `{buf}`")


def check(ctx):
    result = ctx.protocol
    if result is None:
        return
    seen = set()
    for anomaly in anomalies_of(result, "uninit"):
        ev = anomaly.events[0]
        if ev.path in seen:
            continue
        explained = _explain(ctx, anomaly)
        if explained is None:
            continue
        seen.add(ev.path)
        why, hint = explained
        buf, stage = anomaly.resource, anomaly.details["stage"]
        yield ctx.finding(
            ctx.node_at(ev.path),
            f"`{ev.role}` reads `{buf}` stage {stage}{iteration(ev)} ({ev.primitive}, line "
            f"{ev.line}) but nothing has written it: {why}",
            condition="every shared-memory read is preceded in happens-before by a write "
                      "of the same location",
            hint=hint, resource=buf, role=ev.role, stage=str(stage),
            evidence=witness_evidence(anomaly, buffer=buf, stage=stage, read_line=ev.line),
        )
