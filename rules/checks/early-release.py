"""A stage read by an asynchronous MMA must not be released before the MMA has finished.

## What it does
`lm.mma_async` (wgmma) reads its shared-memory operands through the async proxy while its
group is in flight; only `lm.mma_wait(pending=N)` tells the issuing role that the group
has finished. The protocol analysis gives every role's in-flight MMA groups a clock lane
of their own that joins the role's clock only when a group wait retires them, so a
release (`ring.release(k)` or an empty-barrier arrive) issued before that wait does not
carry the MMA's reads to the producer. This rule reports the race the exploration then
finds between the producer's next write into the stage and the MMA's read: it points at
the release, names the buffer, the stage, the iterations, the MMA and the overwriting
load, and says which group wait (and with which `pending`) retires the MMA in time.

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

from cakegov.analysis.asynchrony import (
    anomalies_of,
    iteration,
    last_wait_before,
    release_between,
    retiring_wait,
    role_events,
    wait_fix,
)
from cakegov.analysis.witness import witness_evidence

CODE = "P010"
NAME = "early-release"
VERSION = "1.0.0"
SEVERITY = "blocking"
CATEGORY = "protocol"
STATUS = "stable"
MOTIVATED_BY = (
    "corpus/invalid/gemm/wgmma_release_before_wait.cake",
    "corpus/invalid/gemm/raw_empty_arrive_before_mma_wait.cake",
)


def check(ctx):
    result = ctx.protocol
    if result is None:
        return
    seen = set()
    for anomaly in anomalies_of(result, "race"):
        d = anomaly.details
        if d.get("first_group") != "wgmma" or d.get("space") != "smem" or \
                not d.get("issue_ordered"):
            continue
        writer, mma = anomaly.events
        events = role_events(result, mma)
        retire = retiring_wait(events, mma)
        waited = last_wait_before(role_events(result, writer), writer.seq)
        release = release_between(events, mma.seq, retire.seq if retire else len(events),
                                  waited.slot if waited is not None else None)
        if release is None or release.path in seen:
            continue
        seen.add(release.path)
        buf, stage = anomaly.resource, d.get("stage")
        retired = (f"the first wait that retires it is line {retire.line}"
                   f"{iteration(retire)}" if retire else "no lm.mma_wait ever retires it")
        yield ctx.finding(
            ctx.node_at(release.path),
            f"`{mma.role}` releases `{buf}` stage {stage}{iteration(release)} while the "
            f"mma_async of line {mma.line}{iteration(mma)} may still be reading it: "
            f"`{writer.role}` then refills the stage (line {writer.line}"
            f"{iteration(writer)}) under the tensor cores' reads",
            condition=(f"a stage read by lm.mma_async is released only after an "
                       f"lm.mma_wait retires that group; {retired}, after this release "
                       f"(line {release.line})"),
            hint=f"{wait_fix(events, mma, release)}, so the group has finished reading "
                 f"`{buf}` stage {stage} when it is released",
            resource=buf, role=mma.role, stage=str(stage),
            evidence=witness_evidence(anomaly, buffer=buf, stage=stage,
                                      release_line=release.line, mma_line=mma.line,
                                      overwrite_line=writer.line),
        )
