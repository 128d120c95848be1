"""A result of an asynchronous group is used only after a group wait retires it.

## What it does
The protocol analysis finds a race between an asynchronous tensor-core group
(`lm.mma_async`, in flight until `lm.mma_wait` retires it) and a later statement of the
same role that reads or overwrites the registers the group writes (the accumulator
fragment): a store of the accumulator, an elementwise use of it, another `lm.fill`. The
rule proposes moving that statement after the role's next `lm.mma_wait` that retires the
group, or, when there is none, inserting `lm.mma_wait(pending=0)` before it; the engine
re-checks the schedule, and the rule reports at the statement when that removes the race,
with the witness and the re-checked fix.

## Why is this bad?
`wgmma.mma_async` writes its accumulator registers asynchronously: until
`wgmma.wait_group` retires the group, reading them gives partial sums and writing them
loses the group's result (PTX ISA, wgmma.mma_async: "accessing the accumulator registers
... before the wgmma.wait_group ... is undefined behaviour"). The kernel runs and stores
whatever the registers held: silently wrong results that change from run to run.

## Failing example
`corpus/invalid/gemm/accumulator_read_before_mma_wait.cake`:
```python
        lm.store(C, at=(m0, n0), src=acc, mask=True)  # expect: P028
```

## Passing example
`corpus/valid/gemm/wgmma_trailing_release_s4.cake`:
```python
        lm.mma_wait(pending=0)
        ring.release(KT - 1)
        lm.store(C, at=(m0, n0), src=acc, mask=True)
```

## References
PTX ISA "wgmma.mma_async" and "wgmma.wait_group"; docs/checker.md axioms A13 and A15.
"""

from cakegov.analysis.diagnose import Candidate, classify, evidence, program_of
from cakegov.plugin import Repair

CODE = "P028"
NAME = "group-result-before-wait"
VERSION = "1.0.0"
SEVERITY = "blocking"
CATEGORY = "protocol"
STATUS = "stable"
MOTIVATED_BY = (
    "corpus/invalid/gemm/accumulator_read_before_mma_wait.cake",
    "corpus/invalid/attention/fa3_scores_scaled_before_mma_wait.cake",
)

_KINDS = ("race",)


def _candidates(ctx, anomaly):
    program = program_of(ctx, anomaly)
    if program is None or len(anomaly.events) != 2:
        return
    for group, use in (anomaly.events, reversed(anomaly.events)):
        if group.group != "wgmma" or use.thread != group.thread or use.group or \
                use.seq <= group.seq:
            continue
        if not any(m.space == "reg" for m in use.mem):
            continue
        events = program.threads[use.thread].events
        later = [e for e in events[use.seq + 1:] if e.kind == "retire" and e.group == "wgmma"
                 and e.iters == use.iters]
        if later:
            yield Candidate((Repair("move_after", use.path, other=later[0].path),),
                            f"move this statement after the `lm.mma_wait` of line "
                            f"{later[0].line}, which retires the group", subject=use.path,
                            value=(group, use))
        yield Candidate((Repair("insert", use.path, text="lm.mma_wait(pending=0)"),),
                        "insert `lm.mma_wait(pending=0)` before this statement",
                        subject=use.path, value=(group, use))


def _report(ctx, anomaly, attempt, cand):
    group, use = cand.value
    return ctx.finding(
        ctx.node_at(use.path),
        f"`{use.role}` uses the registers the mma_async of line {group.line} writes "
        f"before an lm.mma_wait retires its group: {anomaly.message}",
        condition="the accumulator of an asynchronous MMA group is read or written only "
                  "after an lm.mma_wait retires the group",
        hint=attempt.fix.description, resource=anomaly.resource or None, role=use.role,
        evidence=evidence(anomaly), fix=attempt.fix, explains=attempt.removed)


def check(ctx):
    yield from classify(ctx, _KINDS, _candidates, _report)
