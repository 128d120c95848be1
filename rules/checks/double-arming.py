"""Transaction bytes must be armed once per phase.

## What it does
The protocol analysis reaches an anomaly (a phase that never completes because more
bytes are armed than delivered, or arrivals that spill into the next phase) on a barrier
whose phases are armed by more than one thread: an `arrive_expect_tx(per="warp")` that
every warp of the role executes, or a second arming statement. The rule proposes arming
once (`per="role"`, or deleting the extra `arrive_expect_tx`), has the engine re-check the
schedule, and reports only when that removes the anomaly, pointing at the statement that
arms again, with the witness and the re-checked fix.

## Why is this bad?
Every arm adds its bytes to the phase's transaction count and one arrival to its
pending count, but the copies deliver their bytes only once: the phase waits for bytes
that never come and every waiter hangs (and the extra arrivals exceed the count).

## Failing example
`corpus/invalid/gemm/expect_tx_per_warp.cake`:
```python
            full[k % S].arrive_expect_tx(bytes=lm.nbytes(a_s, b_s), per="warp")  # expect: P004
```

## Passing example
`corpus/valid/gemm/raw_barriers_s2.cake`:
```python
            full[k % S].arrive_expect_tx(bytes=lm.nbytes(a_s, b_s))
```
"""

from cakegov.analysis.diagnose import (
    Candidate,
    barriers_of,
    classify,
    evidence,
    program_of,
    slots_of,
)
from cakegov.plugin import Repair

CODE = "P004"
NAME = "double-arming"
VERSION = "2.0.0"
SEVERITY = "blocking"
CATEGORY = "protocol"
STATUS = "stable"
MOTIVATED_BY = (
    "corpus/invalid/gemm/expect_tx_per_warp.cake",
    "corpus/invalid/kmeans_assign/expect_tx_twice.cake",
    "corpus/invalid/scale/handoff_arm_per_warp.cake",
)

_KINDS = ("deadlock", "over-arrival", "premature", "race", "early-pass", "lapped",
          "tx-range")


def _candidates(ctx, anomaly):
    program = program_of(ctx, anomaly)
    if program is None:
        return
    for name in barriers_of(ctx, anomaly):
        bar = ctx.protocol.kernel.barrier(name)
        slots = slots_of(program, bar.name)
        arms = [ev for t in program.threads for ev in t.events
                if ev.kind == "arrive" and ev.slot in slots and ev.tx]
        paths = list(dict.fromkeys(a.path for a in arms))
        for arm in {a.path: a for a in arms}.values():
            if arm.n > 1 and arm.source == "mbarrier_expect_tx":
                yield Candidate((Repair("set_arg", arm.path, "per", '"role"'),),
                                f"drop `per=\"warp\"`: one elected thread of {arm.role} "
                                "arms the phase once (the default `per=\"role\"`)",
                                subject=arm.path, value=(arm, len(paths)))
        if len(paths) > 1:
            for path in reversed(paths):
                arm = next(a for a in arms if a.path == path)
                if arm.source != "mbarrier_expect_tx":
                    continue
                yield Candidate((Repair("delete", path),),
                                f"remove this arrive_expect_tx: another statement already "
                                f"arms every phase of `{bar.name}`", subject=path,
                                value=(arm, len(paths)))


def _report(ctx, anomaly, attempt, cand):
    arm, statements = cand.value
    program = program_of(ctx, anomaly)
    barrier = program.slots[arm.slot][0] if program is not None else ""
    if arm.n > 1:
        why = f"`per=\"warp\"` makes each of the {arm.n} warps of {arm.role} arm it"
    else:
        why = f"{statements} statements arm it"
    return ctx.finding(
        ctx.node_at(arm.path),
        f"each phase of `{barrier}` is armed more than once: {why}, so the phase expects "
        f"more bytes (and arrivals) than its copies deliver",
        condition="transaction bytes armed once per phase",
        hint=attempt.fix.description, resource=barrier, role=arm.role,
        evidence=evidence(anomaly, arms=arm.n, statements=statements),
        fix=attempt.fix, explains=attempt.removed)


def check(ctx):
    yield from classify(ctx, _KINDS, _candidates, _report)
