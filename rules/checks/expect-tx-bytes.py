"""The bytes armed on a phase must equal the bytes of the copies completing on it.

## What it does
For every phase of every barrier slot, adds up the transaction bytes armed on it
(`arrive_expect_tx(bytes=...)`, or a pipeline's acquire in transaction mode) and the
bytes of the bulk copies that complete on it (`load(..., barrier=...)`), from the
unrolled roles of the protocol analysis. When an arm's bytes differ from what its
phase's copies deliver, the rule points at the arming statement and names the bytes
armed, each copy with its bytes, and the `lm.nbytes(...)` that matches. A phase armed by
several threads with too many bytes is double arming (P004), not this rule.

## Why is this bad?
Armed bytes above the copies' bytes: the phase waits for bytes that never arrive and
every waiter hangs. Below: the phase completes when that many bytes have landed, while
the rest is still in flight; the consumer reads a half-written stage, and the late bytes
are subtracted from the next phase, skewing it as well. Nothing reports either.

## Failing example
`corpus/invalid/gemm/expect_tx_a_only.cake`:
```python
            full[k % S].arrive_expect_tx(bytes=lm.nbytes(a_s))  # expect: P003
```

## Passing example
`corpus/valid/gemm/raw_barriers_s2.cake`:
```python
            full[k % S].arrive_expect_tx(bytes=lm.nbytes(a_s, b_s))
```
"""

from cakegov.analysis.accounting import (
    accounting_of,
    copy_buffers,
    describe_copies,
    evidence_of,
    tx_mismatches,
    witness_for,
)

CODE = "P003"
NAME = "expect-tx-bytes"
VERSION = "1.0.0"
SEVERITY = "blocking"
CATEGORY = "protocol"
STATUS = "stable"
MOTIVATED_BY = (
    "corpus/invalid/gemm/expect_tx_a_only.cake",
    "corpus/invalid/scale/expect_tx_elements_not_bytes.cake",
    "corpus/invalid/kmeans_assign/expect_tx_wrong_buffer.cake",
)

_TOO_MANY = ("deadlock",)
_TOO_FEW = ("race", "uninit", "stale-wait", "aliasing", "leftover", "deadlock")


def _hint(tally, pipeline):
    names = copy_buffers(tally)
    delivered = f"{tally.delivered:,} B"
    if pipeline:
        return (f"the pipeline arms the bytes of every load naming its full barrier; load "
                f"each of {', '.join(f'`{n}`' for n in names)} exactly once per iteration "
                f"so that each phase receives {delivered}")
    if names and len(names) == len(tally.copies):
        return f"arm `bytes=lm.nbytes({', '.join(names)})` ({delivered}) once per phase"
    return f"arm `bytes={tally.delivered}` ({delivered}): the bytes of every copy of the phase"


def check(ctx):
    result = ctx.protocol
    if result is None or not result.runs:
        return
    acc = accounting_of(result)
    for m in tx_mismatches(acc):
        t = m.tally
        barrier = t.slot[0]
        if t.armed > t.delivered:
            effect = (f"{t.armed - t.delivered:,} B never arrive, so the phase never "
                      "completes and every wait on it blocks forever (deadlock)")
            kinds = _TOO_MANY
        else:
            effect = (f"the phase can complete once {t.armed:,} B have landed while "
                      f"{t.delivered - t.armed:,} B are still in flight: the waiter reads a "
                      "stage before its copy finished (race), and the late bytes skew the "
                      "next phase")
            kinds = _TOO_FEW
        anomaly = witness_for(result, kinds, resource=barrier)
        evidence = {"armed": t.armed, "delivered": t.delivered, "slot": t.slot[1],
                    "phase": t.phase, "phases_affected": m.phases,
                    "copies": [{"line": c.line, "bytes": c.bytes} for c in t.copies]}
        evidence = evidence_of(anomaly, **evidence)
        yield ctx.finding(
            ctx.node_at(m.arm.path),
            (f"{m.arm.role} arms {t.label} with {t.armed:,} B but the copies completing on "
             f"that phase deliver {t.delivered:,} B ({describe_copies(t)}): {effect}"),
            condition=(f"armed bytes == bytes of the copies completing on the phase: "
                       f"{t.armed:,} == {t.delivered:,}"),
            hint=_hint(t, m.arm.source == "pipeline_acquire"),
            resource=barrier,
            role=m.arm.role,
            stage=f"stage {t.slot[1]}",
            evidence=evidence,
        )
