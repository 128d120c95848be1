"""Every deadlock, race or protocol anomaly the exploration finds rejects the schedule.

## What it does
Runs after every other rule. The protocol analysis (`cakegov/analysis/`) explores every
interleaving the barriers allow; the specific protocol rules name the cause of what it
finds (a barrier count, a parity, a missing acquire, ...). When an anomaly is left that
no rule explained, and no other rule has already rejected the schedule, this rule reports
it with its witness, so the schedule can never pass as clean.

## Why is this bad?
A deadlock hangs the GPU; a race silently corrupts results. A verifier that only reports
the defects it can name would let an unnamed one through.

## Failing example
`corpus/invalid/gemm/accumulator_read_before_mma_wait.cake`:
```python
        lm.store(C, at=(m0, n0), src=acc, mask=True)  # expect: P099
        lm.mma_wait(pending=0)
```

## Passing example
`corpus/valid/gemm/wgmma_trailing_release_s4.cake`:
```python
        lm.mma_wait(pending=0)
        ring.release(KT - 1)
        lm.store(C, at=(m0, n0), src=acc, mask=True)
```
"""

from cakegov.analysis.witness import witness_evidence

CODE = "P099"
NAME = "protocol-anomaly"
VERSION = "1.0.0"
SEVERITY = "blocking"
CATEGORY = "protocol"
STATUS = "stable"
PHASE = "final"
MOTIVATED_BY = ("corpus/invalid/gemm/accumulator_read_before_mma_wait.cake",)

_WHAT = {
    "deadlock": "no role can make progress and no copy is in flight",
    "race": "two accesses to the same memory (a shared-memory stage, or a fragment an "
            "asynchronous group writes), one a write, unordered by happens-before",
    "proxy": "generic-proxy writes read through the async proxy without a proxy fence",
    "aliasing": "a waiter more than one phase behind cannot tell phases apart",
    "stale-wait": "a wait passes on a phase it already observed",
    "overflow": "more arrivals in one phase than the barrier's count",
    "named": "more threads at a named barrier than it was declared for",
    "leftover": "the kernel exits with a barrier phase half complete",
    "uninit": "a read of shared memory that nothing wrote before it",
    "init-order": "a barrier used before init, fence and CTA sync, or initialised twice",
    "async-pending": "a role ends with asynchronous groups still in flight",
}


def check(ctx):
    if any(f.severity == "blocking" for f in ctx.findings):
        return
    result = ctx.protocol
    if result is None:
        return
    for anomaly in result.anomalies:
        first = anomaly.events[0] if anomaly.events else None
        node = ctx.node_at(first.path) if first is not None else None
        yield ctx.finding(
            node,
            anomaly.message,
            condition=_WHAT.get(anomaly.kind, anomaly.kind),
            hint="follow the witness: the last steps show where the protocol goes wrong",
            resource=anomaly.resource or None,
            role=first.role if first is not None else None,
            evidence=witness_evidence(anomaly),
        )
