"""A producer must wait for a stage to be empty before refilling it; a consumer must wait
for it to be full before reading it.

## What it does
Works on the unrolled role programs of the protocol analysis (every loop iteration, with
derived stages and phases). For every shared-memory location (one stage of a buffer):
- producer side: from its second publish on (a bulk copy, or generic writes followed by
  an arrive), a writer must have waited for the stage to be handed back since its
  previous publish: `ring.acquire(k)` of a pipeline, or a raw wait on the stage's empty
  barrier (a wait on the copy's own full barrier does not count). The first pass over a
  ring needs no wait, so a producer that peels it is fine;
- consumer side: a role that reads a location written by a bulk copy (any role's) or by
  another role's generic writes must, before each read, have waited on one of the
  location's signal barriers (the copy's barrier, `ring.full(k)`, or a barrier the writer
  or a forwarding role arrives on afterwards) once more than the generations it has
  already handed back.
The finding points at the unordered write (or read), names the buffer, the stage, the
iteration and both roles, and carries the exploration's race witness. In transaction
mode `ring.acquire` also arms `ring.full` with the tile bytes, so without it the real
kernel never completes the full phase either; the witness is then explored with that
arming put back, to show the overwrite the missing wait allows.

## Why is this bad?
A producer that refills a stage the consumer has not released overwrites operands while
they are being multiplied; a consumer that reads before the full barrier completes reads
a tile the bulk copy has not written yet. Both give silently wrong results that depend on
timing, so they pass tests on one GPU and fail on another.

## Failing example
`corpus/invalid/gemm/acquire_missing.cake`:
```python
a_s[ring.stage(k)].load(A, at=(m0, k * BK), barrier=ring.full(k), pad=True)  # expect: P008
```

## Passing example
`corpus/valid/gemm/ws_pipeline_s4.cake`:
```python
ring.acquire(k)                                   # stage is free again
a_s[ring.stage(k)].load(A, at=(m0, k * BK), barrier=ring.full(k), pad=True)
```
"""

from cakegov.analysis.explore import explore
from cakegov.analysis.flow import (
    armed_variant,
    at_iter,
    flow_of,
    key_text,
    pipelines_of,
    runs_longest_first,
    structurally_rejected,
)
from cakegov.analysis.protocol import windowed_sizes
from cakegov.analysis.unroll import UnrollError, unroll
from cakegov.analysis.witness import witness_evidence

CODE = "P008"
NAME = "missing-acquire-or-wait"
VERSION = "1.0.1"
SEVERITY = "blocking"
CATEGORY = "protocol"
STATUS = "stable"
MOTIVATED_BY = (
    "corpus/invalid/gemm/acquire_missing.cake",
    "corpus/invalid/gemm/raw_empty_wait_missing.cake",
    "corpus/invalid/kmeans_assign/ring_wait_missing.cake",
    "corpus/invalid/scale/ring_wait_missing.cake",
)


def _race(anomalies, gap):
    """The exploration's race between the gap's access and the other role on its stage."""
    buf, stage = gap.loc
    for a in anomalies:
        if a.kind != "race" or a.resource != buf or a.details.get("stage") != stage:
            continue
        roles = {e.role for e in a.events}
        if gap.event.path in {e.path for e in a.events} and gap.other in roles and \
                gap.role in roles:
            return a
    return None


def _what_if(ctx, run, gap, ring):
    """The race witness with the arming of the missing acquire restored."""
    kernel = armed_variant(ctx.protocol.kernel, gap.role, ring)
    if kernel is None:
        return None
    full = kernel.barrier(f"{ring}.full")
    # just enough iterations for the refill of the first stage
    sizes = windowed_sizes(kernel, run.sizes, (full.stages if full else 1) + 2)
    try:
        unrolled = unroll(kernel, sizes)
    except UnrollError:
        return None
    result = explore(kernel, unrolled, 20_000, 0.5)
    return _race(result.anomalies, gap)


def _producer(ctx, flow, run, gap):
    buf, stage = gap.loc
    ring = flow.pipeline_of(buf)
    ev, read = gap.event, gap.partner
    what = f"it (its read{at_iter(read)}, line {read.line})" if read is not None else "it"
    full = ctx.protocol.kernel.barrier(f"{ring}.full") if ring else None
    armed = bool(full is not None and full.tx_bytes)
    anomaly = _race(ctx.protocol.anomalies, gap)
    what_if = False
    if anomaly is None and armed:
        anomaly, what_if = _what_if(ctx, run, gap, ring), True
    if ring is not None:
        loop_var = ev.iters[-1][0] if ev.iters else "k"
        hint = (f"add `{ring}.acquire({loop_var})` before this write, in every iteration "
                "that refills a stage")
        if armed:
            hint += (f" (it also arms `{ring}.full` with {full.tx_bytes} transaction bytes, "
                     "which the full barrier now never receives)")
        wanted = f"`{ring}.acquire(k)`"
    else:
        back = flow.next_arrive(gap.other, read.seq) if read is not None else None
        target = f"`{back[0]}[{back[1]}]`" if back else "the stage's empty barrier"
        hint = (f"wait on {target} (the barrier `{gap.other}` arrives on after reading "
                f"`{buf}`) before this write, with parity `(k // stages + 1) % 2`; the first "
                "pass over the ring may skip it")
        wanted = "a wait on the stage's empty barrier"
    evidence = {"buffer": buf, "stage": stage, "iteration": dict(ev.iters),
                "generation": gap.generation, "writer": gap.role, "reader": gap.other}
    note = ""
    if anomaly is not None:
        evidence = witness_evidence(anomaly, **evidence)
        if what_if:
            evidence["what_if"] = (f"explored with the transaction arming of "
                                   f"`{ring}.acquire` restored")
            note = (f" (the witness puts back the arming of `{ring}.full` the acquire also "
                    "does: without it the full phase never completes either)")
    return ctx.finding(
        ctx.node_at(ev.path),
        f"`{gap.role}` writes `{buf}` stage {stage}{at_iter(ev)} without waiting for the "
        f"stage to be empty: `{gap.other}` may still be reading {what}",
        condition=(f"{wanted} since the previous publish of `{buf}` stage {stage}: this is "
                   f"its publish number {gap.generation + 1}, and `{gap.role}` has not "
                   f"waited for the stage to be handed back since the last one{note}"),
        hint=hint, resource=buf, role=gap.role, stage=str(stage), evidence=evidence,
    )


def _consumer(ctx, flow, gap):
    buf, stage = gap.loc
    ring = flow.pipeline_of(buf)
    ev, write = gap.event, gap.partner
    anomaly = _race(ctx.protocol.anomalies, gap)
    keys = ", ".join(f"`{key_text(k)}`" for k in gap.keys) or "its full barrier"
    by = f"{'bulk copy' if write.kind == 'copy' else 'write'} by `{gap.other}`" \
        f"{at_iter(write)} (line {write.line})" if write is not None else f"`{gap.other}`"
    if ring is not None:
        loop_var = ev.iters[-1][0] if ev.iters else "k"
        hint = f"add `{ring}.wait({loop_var})` before this read"
    else:
        hint = (f"wait on {keys} before this read, with parity `(k // stages) % 2` for "
                "iteration k")
    evidence = {"buffer": buf, "stage": stage, "iteration": dict(ev.iters),
                "generation": gap.generation, "writer": gap.other, "reader": gap.role}
    if anomaly is not None:
        evidence = witness_evidence(anomaly, **evidence)
    return ctx.finding(
        ctx.node_at(ev.path),
        f"`{gap.role}` reads `{buf}` stage {stage}{at_iter(ev)} without waiting for it to be "
        f"full: the {by} may not have landed",
        condition=(f"a wait on {keys} before reading generation {gap.generation} of "
                   f"`{buf}` stage {stage}: `{gap.role}` has waited {gap.generation} "
                   f"time(s) there but needs {gap.generation + 1}"),
        hint=hint, resource=buf, role=gap.role, stage=str(stage), evidence=evidence,
    )


def check(ctx):
    result = ctx.protocol
    if result is None or structurally_rejected(ctx.findings):
        return
    pipes = pipelines_of(ctx.schedule)
    for run in runs_longest_first(result):
        flow = flow_of(result.kernel, run.unrolled, pipes)
        seen = set()
        found = False
        for gap in sorted(flow.gaps(), key=lambda g: (g.kind, g.role, g.event.seq)):
            channel = flow.pipeline_of(gap.loc[0]) or ""
            key = (gap.kind, gap.role, gap.other, channel)
            if key in seen:
                continue
            seen.add(key)
            found = True
            if gap.kind == "acquire":
                yield _producer(ctx, flow, run, gap)
            else:
                yield _consumer(ctx, flow, gap)
        if found:
            return
