"""An iteration peeled out of a ring loop names the ring position that iteration has.

## What it does
The protocol analysis finds an anomaly (a deadlock, a wait that passes on the wrong
phase, the race that follows) in a role that runs a ring loop and then, after the loop,
a peeled iteration of it: a wait (or an acquire) written out by hand for the position
after the loop's last, as kernels do to fuse the last K tile with the epilogue. The
rule proposes writing the peeled statement as the loop writes it, with the loop
variable replaced by the loop's stop (the position the peeled iteration has) or by its
last value, in the schedule's own names (`full[(KT - 1) % S].wait(parity=((KT - 1) // S)
% 2)` for a loop over `range(0, KT - 1)`), has the engine re-check the schedule, and
reports at the peeled statement when that removes the anomaly, with the witness and the
re-checked fix. A peeled statement whose index alone disagrees with the rest of its
peeled iteration (the read and the release name the last position, the wait the next)
is stage-mismatch (P029), whose repair is that one index.

## Why is this bad?
A peeled wait on the wrong stage, or with the parity of another position, waits for a
phase of a slot that is never filled again (the kernel hangs before its last tile, and
the producer's drain with it), or passes on a phase it already observed and reads a
stage the copy of another tile is writing (silently wrong results). The index and the
parity are two halves of one position: fixing one alone leaves the other wrong.

## Failing example
`corpus/invalid/gemm/coop_peeled_last_wait_next_position.cake`:
```python
        full[KT % S].wait(parity=(KT // S) % 2)  # expect: P027
```

## Passing example
`corpus/valid/gemm/cutlass_coop_wgmma_wait0_peeled_last_s4.cake`:
```python
        full[(KT - 1) % S].wait(parity=((KT - 1) // S) % 2)
```

## References
CUTLASS `include/cutlass/gemm/collective/sm90_mma_tma_gmma_ss_warpspecialized.hpp`
(`PipelineState` advanced once per K tile, also for the peeled first tile); PTX ISA
"mbarrier.try_wait.parity".
"""

from cakegov.analysis.diagnose import Candidate, calls, classify, evidence, role_of, statements
from cakegov.ir.nodes import For
from cakegov.plugin import Repair

CODE = "P027"
NAME = "peeled-position"
VERSION = "1.1.0"
SEVERITY = "blocking"
CATEGORY = "protocol"
STATUS = "stable"
MOTIVATED_BY = (
    "corpus/invalid/gemm/coop_peeled_last_wait_next_position.cake",
)

_KINDS = ("deadlock", "race", "uninit", "early-pass", "lapped", "premature")
_WAITS = ("mbarrier_wait", "pipeline_wait", "pipeline_acquire")


def _candidates(ctx, anomaly):
    sched = ctx.schedule
    involved = {e.role for e in anomaly.events}
    for call in calls(sched, _WAITS):
        role = role_of(call.path)
        if involved and role not in involved:
            continue
        before = [s for s, _, _ in statements(sched, role) if isinstance(s, For)
                  and s.span.line < call.span.line and not call.path.startswith(s.path + ".")]
        if not before:
            continue
        loop = max(before, key=lambda s: s.span.line)  # the loop this iteration was peeled from
        for form, what in (("next", "the position after its last"),
                           ("last", "its last position")):
            yield Candidate((Repair("like_loop", call.path, other=loop.path, form=form),),
                            f"write the peeled wait as the loop at line {loop.span.line} "
                            f"writes it, for {what}", subject=call.path, value=(call, loop))


def _report(ctx, anomaly, attempt, cand):
    call, loop = cand.value
    role = role_of(call.path)
    return ctx.finding(
        call,
        f"`{role}` peels an iteration of the loop at line {loop.span.line} but this wait "
        f"names another ring position than that iteration's: {anomaly.message}",
        condition="a statement peeled out of a ring loop names the stage and the parity of "
                  "the iteration it stands for",
        hint=attempt.fix.description, role=role or None, resource=anomaly.resource or None,
        evidence=evidence(anomaly), fix=attempt.fix, explains=attempt.removed)


def check(ctx):
    yield from classify(ctx, _KINDS, _candidates, _report)
