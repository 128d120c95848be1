"""A stage read by an asynchronous MMA must not be released before the MMA has finished.

## What it does
The protocol analysis finds a race between an `lm.mma_async` (wgmma) that is still
reading a shared-memory stage through the async proxy and a write into that stage by the
role it handed the stage to: the stage was released (`ring.release(k)` or an
empty-barrier arrive) before an `lm.mma_wait(pending=N)` retired the MMA's group, so the
release does not carry the tensor cores' reads. The rule proposes retiring the group
before the release (a lower `pending` on a wait already in between, or a new
`lm.mma_wait` before the release), has the engine re-check the schedule, and reports
only when that removes the race: at the release, with the witness and the re-checked
fix.

## Why is this bad?
The producer refills the stage as soon as the release completes its empty phase, while
the tensor cores may still be reading the old tile: the product silently uses operands
of a later iteration. The window is a few hundred cycles, so the kernel passes most tests
and fails under load or on another GPU.

## Failing example
`corpus/invalid/gemm/wgmma_release_before_wait.cake`:
```python
            ring.release(k - 1)  # expect: P010
```

## Passing example
`corpus/valid/gemm/wgmma_trailing_release_s4.cake`:
```python
            lm.mma_wait(pending=1)                            # group k - 1 has finished
            ring.release(k - 1)
```
"""

from cakegov.analysis.diagnose import (
    Candidate,
    classify,
    evidence,
    hand_off_after,
    program_of,
    slot_stage,
)
from cakegov.plugin import Repair

CODE = "P010"
NAME = "early-release"
VERSION = "2.1.0"
SEVERITY = "blocking"
CATEGORY = "protocol"
STATUS = "stable"
MOTIVATED_BY = (
    "corpus/invalid/gemm/wgmma_release_before_wait.cake",
    "corpus/invalid/gemm/raw_empty_arrive_before_mma_wait.cake",
)

_KINDS = ("race", "lapped", "premature")


def _candidates(ctx, anomaly):
    program = program_of(ctx, anomaly)
    if program is None or anomaly.kind != "race" or len(anomaly.events) != 2:
        return
    second, first = anomaly.events
    if first.group != "wgmma" or second.thread == first.thread or \
            not any(m.write and m.space == "smem" for m in second.mem):
        return  # not a hand-off: another role overwriting what the MMA still reads
    release = hand_off_after(program, first)
    if release is None:
        return
    events = program.threads[first.thread].events
    between = [e for e in events[first.seq + 1:release.seq]
               if e.kind == "retire" and e.group == "wgmma"]
    for wait in reversed(between):
        for pending in range(wait.pending - 1, -1, -1):
            yield Candidate((Repair("set_arg", wait.path, "pending", str(pending)),),
                            f"lower `lm.mma_wait(pending={wait.pending})` to "
                            f"`pending={pending}` so the group has finished reading the "
                            "stage when it is released", subject=release.path,
                            value=(first, release))
    later = [e for e in events[release.seq + 1:] if e.kind == "retire" and e.group == "wgmma"]
    if later and later[0].iters == release.iters:
        yield Candidate((Repair("move_after", release.path, other=later[0].path),),
                        "release the stage after the `lm.mma_wait` that retires its MMA",
                        subject=release.path, value=(first, release))
    yield Candidate((Repair("insert", release.path, text="lm.mma_wait(pending=0)"),),
                    "insert `lm.mma_wait(pending=0)` before the release, so the group has "
                    "finished reading the stage", subject=release.path, value=(first, release))


def _report(ctx, anomaly, attempt, cand):
    mma, release = cand.value
    stage = slot_stage(program_of(ctx, anomaly), anomaly)
    return ctx.finding(
        ctx.node_at(release.path),
        f"`{mma.role}` releases `{anomaly.resource}` stage {stage} while the mma_async of "
        f"line {mma.line} may still be reading it: {anomaly.message}",
        condition="a stage read by lm.mma_async is released only after an lm.mma_wait "
                  "retires that group",
        hint=attempt.fix.description, resource=anomaly.resource, role=mma.role,
        stage=stage,
        evidence=evidence(anomaly), fix=attempt.fix, explains=attempt.removed)


def check(ctx):
    yield from classify(ctx, _KINDS, _candidates, _report)
