"""Each stage must be released exactly once per phase, including the drain after the loop.

## What it does
Counts, on the unrolled role programs (every iteration, derived stages), how many
generations of each stage a consumer role takes and how many times it hands the stage
back. A generation is taken by a wait on the stage's full barrier (`ring.wait(k)`, or a
raw wait on the barrier the stage's bulk copies complete on) that is followed by a read
of the stage; it is handed back by an arrive on the barrier the producer waits on before
refilling the stage (`ring.release(k)`, or a raw arrive on the empty barrier). The two
counts must be equal for every stage and every consumer role:
- fewer releases: the finding points at the consumer loop that took the first generation
  never released (a release missing from the loop body, or the drain of the stages still
  held when a look-ahead or delayed-release loop ends);
- more releases: the finding points at the first release that hands back a generation
  the role never took.
It reports the stage, the role, both counts with the iterations involved and, where the
exploration found one, the deadlock or race that follows.

## Why is this bad?
A missing release leaves the stage's empty barrier one phase short: the producer's
acquire of the refill blocks forever, a deadlock after `stages` iterations (or, for a
missing drain, at the next tile of a persistent kernel or at the producer's drain). An
extra release completes an empty phase nobody finished, so the producer refills a stage
the consumer may still be reading: silent wrong results.

## Failing example
`corpus/invalid/kmeans_assign/drain_after_full_release.cake`:
```python
ring.release(TILES - 1)  # expect: P009
```

## Passing example
`corpus/valid/kmeans_assign/rows_pipelined_s2.cake`:
```python
ring.wait(t)
lm.sqdist(dist, x_s[ring.stage(t)], c_s)
ring.release(t)
```
"""

from cakegov.analysis.flow import (
    at_iter,
    flow_of,
    key_text,
    pipelines_of,
    runs_longest_first,
    structurally_rejected,
)
from cakegov.analysis.witness import witness_evidence

CODE = "P009"
NAME = "release-count"
VERSION = "1.0.1"
SEVERITY = "blocking"
CATEGORY = "protocol"
STATUS = "stable"
MOTIVATED_BY = (
    "corpus/invalid/gemm/release_missing.cake",
    "corpus/invalid/gemm/lookahead_drain_missing.cake",
    "corpus/invalid/kmeans_assign/drain_after_full_release.cake",
    "corpus/invalid/scale/release_after_loop.cake",
)


def _loop_path(path):
    """The IR path of the loop around statement `path`, or the statement itself."""
    head, sep, _ = path.rpartition(".body[")
    return head if sep and "." in head else path


def _iters(events):
    parts = [at_iter(e).removeprefix(" at ") for e in events]
    parts = [p for p in parts if p]
    if len(parts) > 6:
        parts = [*parts[:5], "...", parts[-1]]
    return f" ({', '.join(parts)})" if parts else ""


def _witness(anomalies, imb, missing):
    kinds = ("deadlock",) if missing else ("overflow", "stale-wait", "aliasing", "race",
                                           "leftover", "deadlock")
    names = {imb.key[0], *(loc[0] for loc in imb.locs)}
    for kind in kinds:
        for a in anomalies:
            if a.kind != kind:
                continue
            slots = {e.slot[0] for e in a.events if e.slot}
            if a.resource in names or slots & names:
                return a
    return None


def _finding(ctx, flow, imb, group):
    missing = imb.missing
    ring = flow.pipeline_of(imb.locs[0][0])
    culprit = imb.culprit
    bufs = ", ".join(sorted({f"`{loc[0]}`" for loc in imb.locs}))
    stage = imb.key[1]
    counts = "; ".join(f"`{key_text(i.key)}`: taken {len(i.consumed)}x"
                       f"{_iters(i.consumed)}, released {len(i.releases)}x" for i in group)
    if missing:
        node = ctx.node_at(_loop_path(culprit.path))
        held = imb.consumed[len(imb.releases):]
        if imb.releases:
            message = (f"`{imb.role}` takes {len(imb.consumed)} generations of stage {stage} "
                       f"({bufs}) but releases only {len(imb.releases)}: the generation "
                       f"taken{at_iter(held[0])} is never handed back")
            what = (f"`{ring}.release(...)` for the stage still held when the loop ends "
                    "(the drain after the loop)" if ring else
                    f"an arrive on `{key_text(imb.key)}` for the generation still held")
            hint = f"add {what}: every generation taken must be released exactly once"
        else:
            message = (f"`{imb.role}` takes stage {stage} ({bufs}) {len(imb.consumed)} times "
                       f"but never releases it: `{imb.writer}` waits on "
                       f"`{key_text(imb.key)}` to refill it, which deadlocks after "
                       f"{flow.stages_of(imb.key[0]) or 1} iteration(s)")
            var = culprit.iters[-1][0] if culprit.iters else "k"
            hint = (f"add `{ring}.release({var})` in this loop after the last read of the "
                    "stage" if ring else
                    f"arrive on `{imb.key[0]}[...]` after the last read of each generation "
                    "in this loop (one arrive per warp, or as the barrier's count says)")
    else:
        node = ctx.node_at(culprit.path)
        message = (f"`{imb.role}` releases stage {stage} ({bufs}) {len(imb.releases)} times "
                   f"but takes it only {len(imb.consumed)} times: the release"
                   f"{at_iter(culprit)} hands back a generation it never took")
        hint = ("remove this release: each generation is released once, after its last "
                "read")
    anomaly = _witness(ctx.protocol.anomalies, imb, missing)
    evidence = {"role": imb.role, "writer": imb.writer,
                "stages": {key_text(i.key): {"taken": len(i.consumed),
                                             "released": len(i.releases)} for i in group}}
    if anomaly is not None:
        evidence = witness_evidence(anomaly, **evidence)
    return ctx.finding(
        node, message,
        condition=f"releases == generations taken, per stage and consumer role: {counts}",
        hint=hint, resource=ring or imb.key[0], role=imb.role, stage=str(stage),
        evidence=evidence,
    )


def check(ctx):
    result = ctx.protocol
    if result is None or structurally_rejected(ctx.findings):
        return
    pipes = pipelines_of(ctx.schedule)
    for run in runs_longest_first(result):
        flow = flow_of(result.kernel, run.unrolled, pipes)
        groups: dict[tuple, list] = {}
        flagged = {f.role for f in ctx.findings if f.code == "P008"}
        for imb in flow.imbalances():
            if imb.role in flagged:
                continue  # a read without its wait: the missing wait is the cause
            anchor = _loop_path(imb.culprit.path) if imb.missing else imb.culprit.path
            groups.setdefault((imb.role, imb.missing, anchor), []).append(imb)
        for group in groups.values():
            yield _finding(ctx, flow, group[0], group)
        if groups:
            return
