"""Every deadlock, race or protocol anomaly the exploration finds rejects the schedule.

## What it does
Runs after every other rule. The protocol analysis (`cakegov/analysis/`) executes
the lowered kernel and proves, or refutes with a witness, that every execution the
barriers allow is free of deadlocks, races, aliased waits, unordered arrivals, reads of
unwritten memory, unfenced proxy hand-offs and work left in flight at exit; the specific
protocol rules name the cause of what it finds. When an anomaly is left that no rule
explained, and no other rule has already rejected the schedule, this rule reports it
with its witness, so the schedule can never pass as clean. Further unexplained anomalies
are listed in its evidence, the first five by message and all by count (they are usually
consequences of the first). When the repair search that lets the other rules name a
cause stopped at one of its bounds (`cakegov/check/context.py`: attempts, re-analyses,
race-check work, or four times the work of the schedule's own analysis), the finding says
which: the anomaly and its witness stand, but a rule might have named its cause.

## Why is this bad?
A deadlock hangs the GPU; a race silently corrupts results. A verifier that only reports
the defects it can name would let an unnamed one through.

## Failing example
`corpus/invalid/attention/fa3_scheduler_init_missing.cake`:
```python
        for j in lm.range(0, lm.cdiv(lm.N, BN)):  # expect: P015
```

The corpus has no case of its own for this rule: every anomaly in it is named by the rule
whose repair removes it (`cakegov corpus run` fails above 2 % P099). The case above
deletes math1's `mma_init` arrive on math0's warp-scheduler barrier; P015 names it with
the warm-up arrive. Checked with this rule alone (`cakegov check --select P099`), as a
schedule is when a new defect class meets no rule, it is rejected here with the deadlock
witness (every warp blocked at the scheduler barriers).

## Passing example
`corpus/valid/attention/fa3_mainloop_d128.cake`:
```python
        sched0.arrive()                                     # mma_init: WG2 lets WG1 go first
```
"""

from cakegov.analysis.witness import witness_evidence

CODE = "P099"
NAME = "protocol-anomaly"
VERSION = "2.4.0"
SEVERITY = "blocking"
CATEGORY = "protocol"
STATUS = "stable"
PHASE = "final"
MOTIVATED_BY = ("corpus/invalid/attention/fa3_scheduler_init_missing.cake",)

_WHAT = {
    "deadlock": "no role can make progress and no copy is in flight",
    "race": "two accesses to the same memory, one a write, unordered by happens-before",
    "proxy": "generic-proxy writes read through the async proxy without a proxy fence",
    "early-pass": "a wait can be reached before the phase it follows completes and pass on "
                  "an older phase with the same parity",
    "lapped": "a barrier can move on by a phase before a waiter reaches its wait",
    "premature": "an arrival or copy can land in the phase before its own",
    "over-arrival": "arrivals made at once span two phases",
    "tx-range": "a transaction count outside the hardware's range",
    "named-split": "a role's threads split across two instances of a named barrier",
    "named-premature": "named-barrier arrivals can be counted in the previous instance",
    "uninit": "a read of shared memory that nothing wrote before it",
    "init-order": "a barrier used before init, fence and CTA sync, or initialised twice",
    "async-pending": "a role ends with asynchronous groups still in flight",
    "exit-inflight": "the CTA can exit while a bulk copy still writes its shared memory",
    "exit-remote": "a CTA of the cluster can exit while another CTA's arrival on its "
                   "barrier or copy into its shared memory is still under way",
}


def check(ctx):
    if any(f.severity == "blocking" for f in ctx.findings):
        return
    left = ctx.unclaimed()
    if not left:
        return
    first = left[0]
    ev = first.events[0] if first.events else None
    hint = "follow the witness: its last steps show where the protocol goes wrong"
    extra = {}
    spent = ctx.diagnosis_spent()
    if spent:
        hint += (f"; the repair search stopped at its {spent} bound before a rule named "
                 "the cause, so a named finding may exist for it")
        extra["repair_search"] = f"stopped: {spent} bound"
    yield ctx.finding(
        ctx.node_at(ev.path) if ev is not None else None,
        first.message + (f" ({len(left) - 1} further unexplained anomal"
                         f"{'y' if len(left) == 2 else 'ies'}, 5 at most listed in the "
                         "evidence)" if len(left) > 1 else ""),
        condition=_WHAT.get(first.kind, first.kind),
        hint=hint,
        resource=first.resource or None,
        role=ev.role if ev is not None else None,
        evidence=witness_evidence(first, others=[a.message for a in left[1:6]],
                                  anomalies_unexplained=len(left), **extra),
        explains=left,
    )
