"""A stage must not be released before its readers, asynchronous MMAs included, are done.

## What it does
The protocol analysis finds a race between a read of a shared-memory stage and a write
into that stage by the role the stage was handed to, and the release came too early:
- an `lm.mma_async` (wgmma) still reading the stage through the async proxy: the stage
  was released (`ring.release(k)` or an empty-barrier arrive) before an
  `lm.mma_wait(pending=N)` retired the MMA's group, so the release does not carry the
  tensor cores' reads. The rule proposes retiring the group before the release (a lower
  `pending` on a wait already in between, or a new `lm.mma_wait` before the release);
- a synchronous read (`lm.mma`, `lm.elementwise`, ...) that comes after the release in
  the same iteration: the release hands back a stage its own role has not read yet
  (the arrive was hoisted above the read). The rule proposes moving the release after
  the read.

It has the engine re-check the schedule and reports only when the repair removes the
race: at the release, with the witness and the re-checked fix. (A producer that never
waits for the hand-back is P008, missing-acquire-or-wait.)

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

`corpus/invalid/attention/raw_v_released_before_pv.cake`:
```python
            vempty[j % S].arrive()                               # expect: P010
            lm.mma(acc, p_s[0], v_s[j % S])
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
    block_of,
    classify,
    evidence,
    guard_slot,
    hand_off_after,
    hoisted_releases,
    program_of,
    slot_stage,
)
from cakegov.plugin import Repair

CODE = "P010"
NAME = "early-release"
VERSION = "2.3.0"
SEVERITY = "blocking"
CATEGORY = "protocol"
STATUS = "stable"
MOTIVATED_BY = (
    "corpus/invalid/gemm/wgmma_release_before_wait.cake",
    "corpus/invalid/gemm/raw_empty_arrive_before_mma_wait.cake",
    "corpus/invalid/attention/raw_v_released_before_pv.cake",
)

_KINDS = ("race", "lapped", "premature")


def _candidates(ctx, anomaly):
    program = program_of(ctx, anomaly)
    if program is None or anomaly.kind != "race" or len(anomaly.events) != 2:
        return
    second, first = anomaly.events
    if first.group != "wgmma":  # a synchronous reader, either event of the pair
        for read, write in ((first, second), (second, first)):
            if read.thread != write.thread and read.kind != "copy" and \
                    any(m.write and m.space == "smem" for m in write.mem) and \
                    not any(m.write for m in read.mem):
                yield from _hoisted(program, read, write)
        return
    if second.thread == first.thread or \
            not any(m.write and m.space == "smem" for m in second.mem):
        return  # not a hand-off: another role overwriting what the MMA still reads
    release = hand_off_after(program, first, guard_slot(program, second))
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
    # a release in a `with lm.warps(...)` block (one signalling warp per warpgroup) moves
    # with its block: out of it, every warp of the role would arrive
    block = block_of(ctx.schedule, release.path)
    anchor = block.path if block is not None else release.path
    later = [e for e in events[release.seq + 1:] if e.kind == "retire" and e.group == "wgmma"]
    if later and later[0].iters == release.iters:
        yield Candidate((Repair("move_after", anchor, other=later[0].path),),
                        "release the stage after the `lm.mma_wait` that retires its MMA",
                        subject=release.path, value=(first, release))
    yield Candidate((Repair("insert", anchor, text="lm.mma_wait(pending=0)"),),
                    "insert `lm.mma_wait(pending=0)` before the release, so the group has "
                    "finished reading the stage", subject=release.path, value=(first, release))


def _hoisted(program, read, write):
    """Each release hoisted above the synchronous `read`, nearest first, proposed after
    the read: with the warp or role sync right before it (which orders the role's lanes
    before a one-lane arrive) when there is one, else alone."""
    events = program.threads[read.thread].events
    for release in hoisted_releases(program, read, write):
        before = events[release.seq - 1] if release.seq > 0 else None
        alone = Repair("move_after", release.path, other=read.path)
        if before is not None and before.kind in ("fence", "named") and \
                not before.derived and before.path != release.path:
            yield Candidate((Repair("move_after", release.path, arg=before.path,
                                    other=read.path),),
                            f"release the stage (with the sync before it) after line "
                            f"{read.line} reads it", subject=release.path,
                            value=(read, release))
        yield Candidate((alone,), f"release the stage after line {read.line} reads it",
                        subject=release.path, value=(read, release))


def _report(ctx, anomaly, attempt, cand):
    reader, release = cand.value
    stage = slot_stage(program_of(ctx, anomaly), anomaly)
    if reader.group == "wgmma":
        what = f"while the mma_async of line {reader.line} may still be reading it"
    else:
        what = f"before line {reader.line} reads it in the same iteration"
    return ctx.finding(
        ctx.node_at(release.path),
        f"`{reader.role}` releases `{anomaly.resource}` stage {stage} {what}: "
        f"{anomaly.message}",
        condition="a stage is released only after every read of it by the releasing "
                  "role has completed (for lm.mma_async, after an lm.mma_wait retires "
                  "that group)",
        hint=attempt.fix.description, resource=anomaly.resource, role=reader.role,
        stage=stage,
        evidence=evidence(anomaly), fix=attempt.fix, explains=attempt.removed)


def check(ctx):
    yield from classify(ctx, _KINDS, _candidates, _report)
