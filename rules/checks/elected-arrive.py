"""An elected arrive publishes only the writes its warp or role has synchronised first.

## What it does
The protocol analysis finds a race whose first access was made by many threads of a
role (generic shared-memory writes, or reads that no warp-collective instruction
completes) while the role handed the data on through an arrive by one elected thread
(`per="role"`, or one lane per warp with `per="warp"`) with nothing ordering the other
threads' accesses before it; or a race between two statements of one role whose threads
touch each other's bytes (different layouts) with no synchronisation in between. The
barrier's release covers only the arriving thread's own accesses (PTX memory model). The
rule proposes `lm.syncwarp()` (one warp, or lanes of one warp) or a named barrier over
the role before the arrive (or the second access), has the engine re-check the schedule,
and reports only when that removes the race: at the arrive, with the witness and the
re-checked fix. Lanes of one warp that arrive through an elected lane need no user
`lm.syncwarp()`: the lowering derives the `__syncwarp` (axiom A12), so only accesses by
other warps of the role, or by one thread while others read, reach this rule. A race
between two names of the same bytes (a view declared with
`alias=` and its root) is left to P020 alias-race.

## Why is this bad?
The waiter observes the phase and reads the buffer, but only the elected thread's writes
are guaranteed visible: the other lanes' values may still sit in flight, so the reader
gets a mix of new and stale data. Nothing deadlocks and nothing crashes; the result is
silently wrong, and only sometimes.

## Failing example
`corpus/invalid/gemm/elected_arrive_without_role_sync.cake`:
```python
cdone[0].arrive(per="role")  # expect: P011
```

## Passing example
`corpus/valid/scale/staged_epilogue_syncwarp.cake`:
```python
lm.syncwarp()                                 # every lane's writes before the arrive
done[0].arrive(per="role")
```
"""

from cakegov.analysis.alias import aliased_pair
from cakegov.analysis.diagnose import (
    Candidate,
    classify,
    evidence,
    guard_slot,
    hand_off_after,
    program_of,
    role_sync_repairs,
    slot_stage,
)

CODE = "P011"
NAME = "elected-arrive"
VERSION = "2.4.0"
SEVERITY = "blocking"
CATEGORY = "protocol"
STATUS = "stable"
MOTIVATED_BY = (
    "corpus/invalid/gemm/elected_arrive_without_role_sync.cake",
    "corpus/invalid/gemm/coop_mma_sync_elected_release.cake",
)

_KINDS = ("race", "uninit", "lapped", "premature", "early-pass")


def _candidates(ctx, anomaly):
    program = program_of(ctx, anomaly)
    if program is None or anomaly.kind != "race" or len(anomaly.events) != 2:
        return
    if aliased_pair(anomaly) is not None:  # two names of the same bytes: P020 alias-race
        return
    second, first = anomaly.events
    if anomaly.details.get("intra_role"):
        for fence in (False, True):
            for lanes in (True, False):
                repairs = role_sync_repairs(ctx, first.role, second.path, lanes_only=lanes,
                                            fence=fence)
                if repairs:
                    yield Candidate(repairs, f"synchronise the threads of `{first.role}` "
                                             f"before this statement{_FENCED[fence]}",
                                    subject=second.path, value=(first, second))
        return
    if anomaly.details.get("first_who") not in ("T", "W0"):
        return
    arrive = hand_off_after(program, first, guard_slot(program, second))
    if arrive is None or arrive.kind != "arrive" or arrive.who == "T":
        return
    for fence in (False, True):
        for lanes in (arrive.who == "W0", False):
            repairs = role_sync_repairs(ctx, first.role, arrive.path, lanes_only=lanes,
                                        fence=fence)
            if repairs:
                how = "`lm.syncwarp()`" if repairs[-1].text == "lm.syncwarp()" else \
                    "a named barrier over the role"
                yield Candidate(repairs, f"order every thread's accesses before the elected "
                                         f"arrive with {how}{_FENCED[fence]}",
                                subject=arrive.path, value=(first, arrive))


# the second try: the threads' generic reads of a stage a copy refills must also be fenced
# before the hand-off (axiom A19); the rule offers it when the plain synchronisation alone
# leaves that anomaly
_FENCED = {False: "", True: ", each thread first fencing its generic accesses for the "
                            "async-proxy refill (`lm.fence_proxy()`)"}


def _report(ctx, anomaly, attempt, cand):
    first, _at = cand.value
    stage = slot_stage(program_of(ctx, anomaly), anomaly)
    return ctx.finding(
        ctx.node_at(cand.subject),
        f"`{first.role}` hands `{anomaly.resource}` on before all its threads are done with "
        f"it (line {first.line}): {anomaly.message}",
        condition="an arrive by one elected thread carries only that thread's accesses; the "
                  "others are ordered before it by __syncwarp or a barrier over the role",
        hint=attempt.fix.description, resource=anomaly.resource, role=first.role,
        stage=stage,
        evidence=evidence(anomaly), fix=attempt.fix, explains=attempt.removed)


def check(ctx):
    yield from classify(ctx, _KINDS, _candidates, _report)
