"""Transaction bytes must be armed once per phase.

## What it does
Counts, for every phase of every barrier slot, how many threads arm it with transaction
bytes: an `arrive_expect_tx` arms from one elected thread, with `per="warp"` once per
warp of the role, and two `arrive_expect_tx` on the same slot in one iteration arm twice.
When a phase is armed more than once and the armed bytes exceed what its copies deliver,
the rule points at the arm that repeats (the `per="warp"` one, else the second) and names
the arms, the bytes armed and delivered, and the arrivals against the count. Several
arms that split the phase's bytes between them are legal and not reported.

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

from cakegov.analysis.accounting import (
    accounting_of,
    describe_copies,
    double_arms,
    evidence_of,
    witness_for,
)

CODE = "P004"
NAME = "double-arming"
VERSION = "1.0.0"
SEVERITY = "blocking"
CATEGORY = "protocol"
STATUS = "stable"
MOTIVATED_BY = (
    "corpus/invalid/gemm/expect_tx_per_warp.cake",
    "corpus/invalid/kmeans_assign/expect_tx_twice.cake",
    "corpus/invalid/scale/handoff_arm_per_warp.cake",
)

_KINDS = ("deadlock", "overflow", "leftover")


def check(ctx):
    result = ctx.protocol
    if result is None or not result.runs:
        return
    acc = accounting_of(result)
    for arm, t in double_arms(acc):
        barrier = t.slot[0]
        count = acc.count(barrier)
        arms = ", ".join(
            f"line {e.line}" + (f" x{e.arrivals} (per warp)" if e.arrivals > 1 else "")
            for e in sorted(t.arms, key=lambda e: e.line))
        if arm.per == "warp" and arm.arrivals > 1:
            why = f"`per=\"warp\"` makes each of the {arm.arrivals} warps of {arm.role} arm it"
            hint = (f"drop `per=\"warp\"`: one elected thread of {arm.role} arms "
                    f"{t.delivered:,} B once per phase (the default `per=\"role\"`)")
        else:
            first = min(t.arms, key=lambda e: e.line)
            why = f"line {arm.line} arms it again after line {first.line}"
            hint = (f"remove this arrive_expect_tx: line {first.line} already arms the phase; "
                    f"arm it once with the bytes of all its copies ({t.delivered:,} B)")
        anomaly = witness_for(result, _KINDS, resource=barrier)
        evidence = {"arms": t.arm_count, "armed": t.armed, "delivered": t.delivered,
                    "arrivals": t.total, "count": count, "slot": t.slot[1],
                    "phase": t.phase}
        evidence = evidence_of(anomaly, **evidence)
        yield ctx.finding(
            ctx.node_at(arm.path),
            (f"{t.label} is armed {t.arm_count} times ({arms}): {why}. The phase expects "
             f"{t.armed:,} B and {t.total} arrival(s) (count {count}) but its copies deliver "
             f"{t.delivered:,} B ({describe_copies(t)}), so it never completes (deadlock)"),
            condition=f"transaction bytes armed once per phase: {t.arm_count} arms",
            hint=hint,
            resource=barrier,
            role=arm.role,
            stage=f"stage {t.slot[1]}",
            evidence=evidence,
        )
