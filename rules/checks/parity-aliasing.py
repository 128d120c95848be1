"""No waiter may fall more than one phase behind the barrier it waits on.

## What it does
A parity wait can only tell the phase it wants from the one before it. The rule finds
the two ways a waiter falls two or more phases behind, statically, and reports them
when the protocol exploration confirms an anomaly on the barrier (a stale or aliased
wait, a race, an overflow or a deadlock):
- a role that skips phases of a slot: its consecutive waits on the slot observe phases
  two or more apart (ping-pong consumers on a ring with an odd stage count, where each
  consumer meets a stage only every other time it comes round), or its first wait is
  for phase 1 or later;
- a barrier with fewer parity bits than the ring has phases in flight: a slot indexed
  without the ring iteration (`full[0]`) that its producer refills coming from waits on
  several stages of the opposite barrier (`empty[t % 2]`), so that many of its phases can
  be outstanding at once.
The rule points at the barrier's declaration and names the waits and the phases.

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

from cakegov.analysis.accounting import (
    accounting_of,
    barrier_decl,
    evidence_of,
    phase_gaps,
    phase_leads,
    witness_for,
)

CODE = "P007"
NAME = "parity-aliasing"
VERSION = "1.0.0"
SEVERITY = "blocking"
CATEGORY = "protocol"
STATUS = "stable"
MOTIVATED_BY = (
    "corpus/invalid/scale/pingpong_single_stage.cake",
    "corpus/invalid/scale/one_full_slot_two_stages.cake",
    "corpus/invalid/kmeans_assign/one_full_slot_two_stages.cake",
)

_KINDS = ("aliasing", "stale-wait", "overflow", "race", "uninit", "deadlock")


def _gap_finding(ctx, result, barrier, gaps):
    first = gaps[0]
    ev = first.check.event
    roles = sorted({g.check.event.role for g in gaps})
    waits = "; ".join(
        f"{g.check.event.where()} waits for phase {g.check.expected_phase} of "
        f"{barrier}[{g.check.event.slot[1]}] after phase {g.previous}"
        for g in _distinct(gaps)[:4])
    bar = result.kernel.barrier(barrier)
    stages = bar.stages if bar is not None else 1
    anomaly = witness_for(result, _KINDS, resource=barrier, line=ev.line)
    return ctx.finding(
        barrier_decl(ctx.schedule, barrier),
        (f"{', '.join(roles)} skip phases of `{barrier}` and wait more than one phase "
         f"behind: {waits}. Each such wait has the parity of a phase it already observed "
         "(or of the initial state), so it can pass while the phase in between is still "
         "landing"),
        condition=("every waiter observes each phase of a slot, or at most one phase "
                   f"behind: phase {first.check.expected_phase} after phase {first.previous}"),
        hint=(f"let every waiter of `{barrier}` see each phase of the slots it uses: with "
              f"ping-pong waiters give the ring an even number of stages (now {stages}), "
              "or wait on every phase"),
        resource=barrier,
        role=", ".join(roles),
        stage=f"stage {ev.slot[1]}",
        evidence=evidence_of(anomaly, waits=[
            {"line": g.check.event.line, "role": g.check.event.role,
             "phase": g.check.expected_phase, "previous": g.previous} for g in gaps[:8]]),
    )


def _lead_finding(ctx, result, barrier, leads):
    lead = leads[0]
    gates = ", ".join(f"{g[0]}[{g[1]}]" for g in lead.gates)
    anomaly = witness_for(result, _KINDS, resource=barrier)
    n = len(lead.gates)
    waits = [c.event for run in accounting_of(result).runs for c in run.waits
             if c.event.slot == lead.slot and c.event.iters]
    var = waits[0].iters[-1][0] if waits else "k"
    return ctx.finding(
        barrier_decl(ctx.schedule, barrier),
        (f"`{barrier}[{lead.slot[1]}]` has one parity bit but {lead.role} refills it after "
         f"waiting on {n} different stages ({gates}): up to {n} of its phases can be "
         "outstanding at once, so an arrival lands in the wrong phase and a wait cannot "
         "tell the phases apart"),
        condition=("one barrier slot per ring stage, so that no waiter is more than one phase "
                   f"behind: {n} stages share `{barrier}[{lead.slot[1]}]`"),
        hint=(f"give `{barrier}` one slot per stage (`stages={n}`), index it with the ring "
              f"iteration (`{barrier}[{var} % {n}]`) and wait with parity "
              f"`({var} // {n}) % 2`"),
        resource=barrier,
        role=lead.role,
        stage=f"stage {lead.slot[1]}",
        evidence=evidence_of(anomaly, slot=lead.slot[1], gates=list(lead.gates)),
    )


def _distinct(gaps):
    seen, out = set(), []
    for g in gaps:
        key = (g.check.event.path, g.check.event.slot, g.check.expected_phase)
        if key not in seen:
            seen.add(key)
            out.append(g)
    return out


def check(ctx):
    result = ctx.protocol
    if result is None or not result.runs:
        return
    acc = accounting_of(result)
    confirmed = {a.resource for a in result.anomalies if a.kind in _KINDS}
    gaps = phase_gaps(acc)
    leads = phase_leads(acc)
    for barrier in sorted(set(gaps) | set(leads)):
        related = {barrier} | {g[0] for lead in leads.get(barrier, []) for g in lead.gates}
        if not related & confirmed and not any(a.kind == "race" for a in result.anomalies):
            continue  # the exploration shows no harm: other synchronization covers it
        if barrier in gaps:
            yield _gap_finding(ctx, result, barrier, gaps[barrier])
        else:
            yield _lead_finding(ctx, result, barrier, leads[barrier])
