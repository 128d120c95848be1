"""Storage reused through an alias is written only after every access through the
other name is ordered before the write.

## What it does
A view declared with `alias=` shares its bytes with its root, and the protocol analysis
checks every access through one name against every access through the other (the
layout gives both the same offset, so they fall in the same exploration region). This
rule claims the races the exploration finds between two *different* names of the same
bytes: an epilogue tile written while a warp may still read the mainloop stage it
overlays, an output tile written while a bulk copy into the input stage may still be in
flight, or an input stage refilled while the output tile over it may still be read. When
both accesses belong to one role it proposes a named barrier over the role (or
`lm.syncwarp()`) before the second access and has the engine re-check the schedule;
across roles it reports the race with its witness.

## Why is this bad?
The two names are one piece of memory (FlashAttention-3 writes O over the V stages,
CUTLASS unions mainloop and epilogue storage): a write through one name destroys data
another warp, or the copy engine, is still reading through the other, or is itself
overwritten by a late copy. The result is silently wrong, and only in some schedules.

## Failing example
`corpus/invalid/gemm/epilogue_union_without_sync.cake`:
```python
        lm.elementwise(c_s[0], acc, op="copy")  # expect: P020
```

## Passing example
`corpus/valid/gemm/epilogue_union_s4.cake`:
```python
        epi.sync()                                            # every warp is done with a_s
        lm.elementwise(c_s[0], acc, op="copy")
```
"""

from cakegov.analysis.alias import aliased_pair
from cakegov.analysis.diagnose import (
    Candidate,
    evidence,
    first_fix,
    program_of,
    role_sync_repairs,
    structurally_rejected,
)

CODE = "P020"
NAME = "alias-race"
VERSION = "1.0.0"
SEVERITY = "blocking"
CATEGORY = "protocol"
STATUS = "stable"
MOTIVATED_BY = ("corpus/invalid/gemm/epilogue_union_without_sync.cake",
                "corpus/invalid/attention/o_over_v_without_sync.cake")


def _candidates(ctx, anomaly):
    second, first = anomaly.events
    if not anomaly.details.get("intra_role"):
        return
    for lanes in (True, False):
        repairs = role_sync_repairs(ctx, first.role, second.path, lanes_only=lanes)
        if repairs:
            yield Candidate(repairs, f"synchronise the threads of `{first.role}` before this "
                                     "statement", subject=second.path, value=first)


def check(ctx):
    if ctx.protocol is None or structurally_rejected(ctx.findings):
        return
    done: set[int] = set()
    for anomaly in ctx.unclaimed(("race",)):
        pair = aliased_pair(anomaly)
        if id(anomaly) in done or pair is None or program_of(ctx, anomaly) is None:
            continue
        first_name, second_name, first_stage, second_stage = pair
        second, first = anomaly.events
        found = first_fix(ctx, anomaly, _candidates(ctx, anomaly))
        message = (f"`{second_name}` and `{first_name}` are the same bytes: "
                   f"{anomaly.message}")
        condition = ("every access through one name of aliased storage is ordered (by a "
                     "barrier) before a conflicting access through the other")
        common = {"resource": second_name, "role": second.role, "stage": second_stage}
        if found is None:
            done.add(id(anomaly))
            yield ctx.finding(
                ctx.node_at(second.path), message, condition=condition,
                hint=f"order {first.role}'s access to `{first_name}` (line {first.line}) "
                     f"before this one with a barrier, or use separate storage",
                evidence=evidence(anomaly, aliased=[first_name, second_name],
                                  first_stage=first_stage),
                explains=[anomaly], **common)
            continue
        cand, attempt = found
        done.update(id(a) for a in attempt.removed)
        yield ctx.finding(
            ctx.node_at(cand.subject), message, condition=condition,
            hint=attempt.fix.description,
            evidence=evidence(anomaly, aliased=[first_name, second_name],
                              first_stage=first_stage),
            fix=attempt.fix, explains=attempt.removed, **common)
