"""Each stage must be released exactly once per phase, including the drain after the loop.

## What it does
The protocol analysis finds a deadlock or an overwrite race that comes from a stage
handed back too few or too many times: a consumer that takes a stage and never releases
it (a release missing from a loop, or the drain after a look-ahead loop ends), so the
producer waits forever when it comes back to it; or an extra release that frees a stage
nobody finished with. The rule proposes the missing `ring.release(...)` (in the loop, or
after it for the last iteration) or deleting the extra release, has the engine re-check
the schedule, and reports only when that removes the anomaly: at the loop that keeps the
stage, or at the extra release, with the witness and the re-checked fix. A drain release
after a loop that names the wrong stage (`empty[KT % S]` for the last K tile's
`empty[(KT - 1) % S]`: one stage released twice, the other never for its last phase) is
re-indexed to the stage of the loop's last iteration, and reported at that release.

## Why is this bad?
A missing release leaves the stage's empty barrier one phase short: the producer's
acquire of the refill blocks forever, a deadlock after `stages` iterations (or, for a
missing drain, at the next tile of a persistent kernel or at the producer's drain). An
extra release completes an empty phase nobody finished, so the producer refills a stage
the consumer may still be reading: silent wrong results.

## Failing example
`corpus/invalid/kmeans_assign/drain_after_full_release.cake`:
```python
ring.release(g * TILES + TILES - 1)  # expect: P009
```

## Passing example
`corpus/valid/kmeans_assign/rows_pipelined_s2.cake`:
```python
ring.wait(t)
lm.sqdist(dist, x_s[ring.stage(t)], c_s)
ring.release(t)
```
"""

from cakegov.analysis.diagnose import (
    Candidate,
    calls,
    classify,
    evidence,
    loops_around,
    role_of,
    siblings_after,
    statements,
)
from cakegov.ir.nodes import For, PipelineDecl
from cakegov.plugin import Repair

CODE = "P009"
NAME = "release-count"
VERSION = "2.1.0"
SEVERITY = "blocking"
CATEGORY = "protocol"
STATUS = "stable"
MOTIVATED_BY = (
    "corpus/invalid/gemm/release_missing.cake",
    "corpus/invalid/gemm/lookahead_drain_missing.cake",
    "corpus/invalid/kmeans_assign/drain_after_full_release.cake",
    "corpus/invalid/scale/release_after_loop.cake",
)

_KINDS = ("deadlock", "race", "lapped", "premature", "early-pass", "over-arrival")


def _candidates(ctx, anomaly):
    if anomaly.kind == "deadlock":
        yield from _missing(ctx)
        yield from _reindexed(ctx)
        yield from _extra(ctx)
    else:
        yield from _extra(ctx)
        yield from _reindexed(ctx)
        yield from _missing(ctx)


def _reindexed(ctx):
    """A drain release after a loop that names the wrong stage: the index of the loop's
    last iteration instead (its trailing release one iteration on, or the stage its last
    wait read)."""
    sched = ctx.schedule
    for call in calls(sched, ("mbarrier_arrive",)):
        role = role_of(call.path)
        loops = [s for s, _, r in statements(sched, role) if isinstance(s, For)
                 and s.span.line < call.span.line and not call.path.startswith(s.path + ".")]
        if not loops:
            continue
        loop = max(loops, key=lambda s: s.span.line)
        for form in ("release", "wait"):
            yield Candidate((Repair("reindex_last", call.path, other=loop.path, form=form),),
                            f"release the stage of the last iteration of the loop at line "
                            f"{loop.span.line}", subject=call.path, value="index")


def _extra(ctx):
    sched = ctx.schedule
    releases = calls(sched, ("pipeline_release", "mbarrier_arrive"))
    releases.sort(key=lambda c: (len(loops_around(sched, c.path)), c.span.line))
    for call in releases:
        yield Candidate((Repair("delete", call.path),),
                        "remove this release: the stage is handed back once more than it "
                        "was taken", subject=call.path, value="extra")


def _missing(ctx):
    sched = ctx.schedule
    for ring in (d for d in sched.resources if isinstance(d, PipelineDecl)):
        waits = [c for c in calls(sched, ("pipeline_wait",), ring.consumer)
                 if c.args["ring"].name == ring.name]
        for stmt, _, _ in statements(sched, ring.consumer):
            if not isinstance(stmt, For):
                continue
            inner = [w for w in waits if any(lp.path == stmt.path
                                             for lp in loops_around(sched, w.path))]
            if not inner:
                continue
            for anchor in [stmt, *siblings_after(sched, stmt.path)]:
                yield Candidate((Repair("insert_pipeline_op", anchor.path, arg=stmt.path,
                                        text=ring.name, form="release_last",
                                        other=inner[-1].path, after=True),),
                                f"drain the ring after the loop's last reader (line "
                                f"{anchor.span.line}): `{ring.name}.release(...)` of its last "
                                "iteration", subject=stmt.path, value="drain")
            last = stmt.body[-1]
            yield Candidate((Repair("insert_pipeline_op", last.path, text=ring.name,
                                    form="release", other=inner[0].path, after=True),),
                            f"release each stage in the loop: `{ring.name}.release(...)` "
                            "after its last read", subject=stmt.path, value="loop")


def _report(ctx, anomaly, attempt, cand):
    node = ctx.node_at(cand.subject)
    role = role_of(cand.subject)
    if cand.value == "index":
        message = (f"`{role}` hands back a stage other than the one its last iteration "
                   f"took: one stage is released once more than it was taken and the "
                   f"other never for its last phase, {anomaly.message}")
    elif cand.value == "extra":
        message = (f"`{role}` hands a stage back once more than it took it: the extra "
                   f"release completes a phase no consumer finished, {anomaly.message}")
    else:
        message = (f"`{role}` keeps a stage it took without handing it back "
                   f"({'after the loop' if cand.value == 'drain' else 'in the loop'}): "
                   f"{anomaly.message}")
    return ctx.finding(
        node, message,
        condition="each stage is released exactly once per phase it was taken, including "
                  "the drain after the loop",
        hint=attempt.fix.description, resource=anomaly.resource or None, role=role or None,
        evidence=evidence(anomaly), fix=attempt.fix, explains=attempt.removed)


def check(ctx):
    yield from classify(ctx, _KINDS, _candidates, _report)
