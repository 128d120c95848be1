"""A producer must wait for a stage to be empty before refilling it; a consumer must wait
for it to be full before reading it.

## What it does
The protocol analysis finds a race on a shared-memory stage between a write and a
read of two roles (or a deadlock because a missing `ring.acquire` never arms the full
barrier), and one of the two accesses is not preceded by the wait that would order it: a
producer refilling a stage without waiting for it to be handed back (`ring.acquire(k)`
or the empty barrier), or a consumer reading a stage without waiting for its data
(`ring.wait(k)` or the barrier the copy completes on). The rule proposes inserting that
wait before the access, written with the schedule's own barrier expression and a parity
that follows the ring, has the engine re-check the schedule, and reports only when that
removes the anomaly: at the unordered access, naming the buffer, the stage and both
roles, with the witness and the re-checked fix. A copy that no thread waits for before
the CTA exits, because the role that reads its buffer waits for it only inside a loop
some CTA never enters (a persistent CTA without a tile), gets the wait before that loop,
reported at the copy.

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

from cakegov.analysis.diagnose import (
    Candidate,
    calls,
    classify,
    evidence,
    hand_off_after,
    hoisted_releases,
    loop_head,
    program_of,
    role_of,
    slot_stage,
    statements,
)
from cakegov.ir.nodes import Call, PipelineDecl
from cakegov.plugin import Repair

CODE = "P008"
NAME = "missing-acquire-or-wait"
VERSION = "2.5.0"
SEVERITY = "blocking"
CATEGORY = "protocol"
STATUS = "stable"
MOTIVATED_BY = (
    "corpus/invalid/gemm/acquire_missing.cake",
    "corpus/invalid/gemm/raw_empty_wait_missing.cake",
    "corpus/invalid/kmeans_assign/ring_wait_missing.cake",
    "corpus/invalid/scale/ring_wait_missing.cake",
    "corpus/invalid/kmeans_assign/persistent_centroids_unwaited_idle_cta.cake",
)

_KINDS = ("race", "deadlock", "uninit", "lapped", "early-pass", "exit-inflight")


def _ring_of(ctx, buffer):
    for d in ctx.schedule.resources:
        if isinstance(d, PipelineDecl) and buffer in d.buffers:
            return d
    return None


def _candidates(ctx, anomaly):
    program = program_of(ctx, anomaly)
    if program is None:
        return
    if anomaly.kind == "race" and len(anomaly.events) == 2:
        second, first = anomaly.events
        for access, other in ((second, first), (first, second)):
            smem = [m for m in access.mem if m.space == "smem"]
            # the operand the race is about (an mma reads two buffers)
            mem = next((m for m in smem if m.name == anomaly.resource), smem[0] if smem else None)
            if mem is None:
                continue
            ring = _ring_of(ctx, mem.name)
            writes = any(m.write for m in access.mem if m.name == mem.name)
            if hoisted_releases(program, other if writes else access, access if writes else other):
                continue  # the reader handed the stage back before reading it: P010
            if ring is not None:
                op = "acquire" if writes else "wait"
                yield Candidate((Repair("insert_pipeline_op", access.path, text=ring.name,
                                        form=op),),
                                f"add `{ring.name}.{op}(...)` before this access",
                                subject=access.path, value=(access, other, ring.name))
                continue
            head = loop_head(ctx.schedule, access.path)
            places = [p for p in (head.path if head is not None else None, access.path) if p]
            if other.kind == "copy" and not writes:  # a read of a copy's data
                for place in dict.fromkeys(places):
                    for form in ("ring", "0", "ring+1", "1"):
                        yield Candidate((Repair("insert_wait_like", place, other=other.path,
                                                form=form),),
                                        "wait for the copy's barrier before reading the stage",
                                        subject=access.path, value=(access, other, ""))
            if writes:  # an overwrite of what `other` reads: wait for its hand-back
                back = hand_off_after(program, other)
                if back is not None and back.kind == "arrive":
                    for place in dict.fromkeys(places):
                        for form in ("ring+1", "ring", "1", "0"):
                            yield Candidate((Repair("insert_wait_like", place,
                                                    other=back.path, form=form),),
                                            "wait for the stage to be handed back before "
                                            "writing it, at the start of the iteration",
                                            subject=access.path, value=(access, other, ""))
    if anomaly.kind == "exit-inflight":
        yield from _unwaited_copy(ctx, anomaly)
    if anomaly.kind == "deadlock":  # a pipeline whose producer never arms its full side
        for load in calls(ctx.schedule, ("load",)):
            bar = load.args.get("barrier")
            if getattr(bar, "pipeline_side", None) == "full":
                yield Candidate((Repair("insert_pipeline_op", load.path, text=bar.name,
                                        form="acquire"),),
                                f"add `{bar.name}.acquire(...)` before this load",
                                subject=load.path, value=(None, None, bar.name))


def _unwaited_copy(ctx, anomaly):
    """A copy no thread waits for before the CTA exits, although another role reads its
    buffer: that role waits for it where every CTA passes, before the outermost loop
    around its first read (a persistent CTA without a tile never enters the loop)."""
    copy = next((e for e in anomaly.events if e.kind == "copy" and e.mem), None)
    if copy is None:
        return
    buffer = copy.mem[0].name
    for stmt, loops, role in statements(ctx.schedule):
        if role == copy.role or not isinstance(stmt, Call):
            continue
        if not any(a.space == "smem" and a.name == buffer
                   for a in ctx.effects(stmt).reads):
            continue
        place = loops[0].path if loops else stmt.path
        for form in ("0", "ring", "1", "ring+1"):
            yield Candidate((Repair("insert_wait_like", place, other=copy.path, form=form),),
                            f"wait for the copy into `{buffer}` before `{role}` starts the "
                            "loop that reads it, where every CTA passes (one with no "
                            "iteration too)" if loops else
                            f"wait for the copy into `{buffer}` before reading it",
                            subject=copy.path, value=(None, role, "unwaited"))
        return


def _report(ctx, anomaly, attempt, cand):
    access, other, _ring = cand.value
    if _ring == "unwaited":
        return ctx.finding(
            ctx.node_at(cand.subject),
            f"`{other}` reads `{anomaly.resource}` only inside a loop that a CTA may not "
            f"enter, and waits for this copy there: {anomaly.message}",
            condition="every bulk copy is waited for, in every CTA, before the CTA exits",
            hint=attempt.fix.description, resource=anomaly.resource or None,
            role=other, evidence=evidence(anomaly), fix=attempt.fix,
            explains=attempt.removed)
    program = program_of(ctx, anomaly)
    stage = slot_stage(program, anomaly)
    path = cand.subject
    role = role_of(path)
    what = "writes" if access is None or any(m.write for m in access.mem) else "reads"
    resource = anomaly.resource
    node = ctx.node_at(path)
    if access is None and node is not None and "dst" in getattr(node, "args", {}):
        resource = node.args["dst"].name  # the buffer the unguarded load writes
    peer = f" while `{other.role}` may still be using it ({other.where()})" if other else ""
    return ctx.finding(
        node,
        f"`{role}` {what} `{resource}` without waiting for it first{peer}: "
        f"{anomaly.message}",
        condition="a producer waits for a stage to be handed back before refilling it; a "
                  "consumer waits for a stage's data before reading it",
        hint=attempt.fix.description, resource=resource, role=role or None,
        stage=stage,
        evidence=evidence(anomaly), fix=attempt.fix, explains=attempt.removed)


def check(ctx):
    yield from classify(ctx, _KINDS, _candidates, _report)
