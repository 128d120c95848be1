"""No waiter may fall more than one phase behind the barrier it waits on.

## What it does
The protocol analysis shows a waiter that can fall two or more phases behind the
barrier it waits on: its wait may be reached only after the barrier has moved on by a
phase (it is lapped), or before the phase it follows has completed (it passes early on a
phase with the same parity), or an arrival can land in a phase that is not its own. A
parity bit cannot tell those phases apart. It happens when ping-pong waiters each meet a
stage only every other time round a ring with an odd number of stages, or when a barrier
has fewer slots than the phases that can be outstanding on it. The rule proposes an even
stage count for the ring (changing the constant the schedule names it by, so every use
agrees) and reports with the re-checked fix when that removes the anomaly; otherwise, only when
the barrier has fewer slots than the ring it guards has stages, it reports the anomaly
with advice (one slot per stage, indexed by the ring iteration). A barrier that already
has a slot per stage is left to the rules whose repair removes the anomaly (a release
before its `mma_wait`, a byte count, a stage index), or to P099 with its witness: the
rule never proposes a ring redesign to a ring that has one slot per stage.

## Why is this bad?
A wait for phase `q + 2` passes as soon as phase `q` has completed, while phase `q + 1`
may still be landing: the waiter reads or overwrites a stage the other side is still
writing. When phases pile up on one slot, an arrival meant for the next phase lands in
the current one (more arrivals than the count) and waits observe the wrong phase. The
behaviour is undefined and silent.

## Failing example
`corpus/invalid/scale/pingpong_single_stage.cake`:
```python
    full = lm.mbarrier(count=1, stages=S)  # expect: P007
```

## Passing example
`corpus/valid/gemm/raw_barriers_s2.cake`:
```python
    full = lm.mbarrier(count=1, stages=S)
```
"""

from cakegov.analysis.diagnose import (
    Candidate,
    barrier_decl,
    evidence,
    first_fix,
    program_of,
    slot_stage,
    structurally_rejected,
)
from cakegov.check.repair import Fix
from cakegov.plugin import Repair

CODE = "P007"
NAME = "parity-aliasing"
VERSION = "2.2.0"
SEVERITY = "blocking"
CATEGORY = "protocol"
STATUS = "stable"
PHASE = "late"  # after every rule that names a more specific cause
MOTIVATED_BY = (
    "corpus/invalid/scale/pingpong_single_stage.cake",
    "corpus/invalid/scale/one_full_slot_two_stages.cake",
    "corpus/invalid/kmeans_assign/one_full_slot_two_stages.cake",
)

_KINDS = ("lapped", "early-pass", "premature", "over-arrival")


def _candidates(ctx, decl, stages):
    for value in sorted({stages + 1 if stages % 2 else stages * 2, 2 * stages}):
        yield Candidate((Repair("set_arg", decl.path, "stages", str(value), form="binding"),),
                        f"give the ring an even number of stages ({value}), so that every "
                        "waiter meets each phase of its stage", value=value)


def _ping_pong(ctx, program, bar):
    """Of the barriers with the ring's stage count, the one the most roles wait on."""
    def waiters(name):
        slots = {i for i, (n, _) in enumerate(program.slots) if n == name}
        return len({t.index for t in program.threads for ev in t.events
                    if ev.kind == "wait" and ev.slot in slots})

    same = [b for b in ctx.protocol.kernel.barriers if b.stages == bar.stages]
    return max(same, key=lambda b: (waiters(b.name), b is bar)) if same else bar


def _ring_stages(ctx, program, bar) -> int:
    """The stage count of the ring `bar` guards: the most stages of a buffer that a copy
    completing on it writes or that its waiters touch next, else of any buffer."""
    stages = {b.name: b.stages for b in ctx.protocol.kernel.buffers}
    slots = {i for i, (n, _) in enumerate(program.slots) if n == bar.name}
    seen: set[str] = set()
    for t in program.threads:
        after_wait = False
        for ev in t.events:
            if ev.kind == "copy" and ev.slot in slots:
                seen.update(m.name for m in ev.mem)
            if ev.kind == "wait":
                after_wait = ev.slot in slots
            elif after_wait and ev.mem:
                seen.update(m.name for m in ev.mem if m.space == "smem")
                after_wait = False
    ring = [stages[n] for n in seen if n in stages]
    return max(ring or list(stages.values()) or [1])


def check(ctx):
    if ctx.protocol is None or structurally_rejected(ctx.findings):
        return
    done = set()
    for anomaly in ctx.unclaimed(_KINDS):
        if id(anomaly) in done:
            continue
        decl = barrier_decl(ctx.schedule, anomaly.resource)
        bar = ctx.protocol.kernel.barrier(anomaly.resource)
        if decl is None or bar is None:
            continue
        program = program_of(ctx, anomaly)
        found = first_fix(ctx, anomaly, _candidates(ctx, decl, bar.stages))
        if found is not None:
            _, attempt = found
            fix, explains = attempt.fix, attempt.removed
            if program is not None:  # the ring's stage count changed: name the barrier
                bar = _ping_pong(ctx, program, bar)  # whose waiters skip its phases
                decl = barrier_decl(ctx.schedule, bar.name) or decl
        elif program is None or bar.stages >= _ring_stages(ctx, program, bar):
            continue  # the ring already has a slot per stage: not this class (P099 left)
        else:
            fix = Fix(description="give the barrier one slot per stage the ring can hold, "
                                  "index it with the ring iteration (`bar[k % S]`) and wait "
                                  "with `parity=(k // S) % 2`", applicability="none")
            explains = tuple(a for a in ctx.unclaimed(_KINDS)
                             if a.resource == anomaly.resource)
        done.update(id(a) for a in explains)
        stage = slot_stage(program, anomaly)
        waiter = anomaly.events[0] if anomaly.events else None
        yield ctx.finding(
            decl,
            f"a waiter of `{bar.name}` can fall more than one phase behind: "
            f"{anomaly.message}",
            condition="every waiter observes each phase of its slot, or is at most one "
                      "phase behind it",
            hint=fix.description, resource=bar.name,
            role=waiter.role if waiter is not None else None,
            stage=stage,
            evidence=evidence(anomaly, stages=bar.stages), fix=fix, explains=explains)
