"""Roles must not wait on each other's phases in a cycle.

## What it does
Takes every deadlock the protocol exploration reaches (no role can move, no copy is in
flight) and builds the wait-for graph of the blocked roles: role A waits for role B when
A is blocked on a barrier whose awaited phase needs an arrival (or a bulk copy) that B
issues only later in its program than the point where B is blocked. Which arrival
belongs to which phase is derived from the unrolled programs: a role's i-th arrive is
its share of phase i, a copy belongs to the phase its role armed last, and a wait is for
the phase after the one its role observed before (the producer's first wait with
parity 1 observes the initial phase). A cycle A -> B -> ... -> A (B may be A itself:
a role that waits for its own later arrive) is reported as the chain role -> barrier
-> role, pointing at one wait of the cycle: a consumer-side wait rather than a
producer's acquire, then the first role in declaration order. Deadlocks in which some
blocked role waits for an arrival nobody will ever make are not cycles (a count, a
parity or a release is wrong) and are left to the rules for those; so is any deadlock
in a schedule another protocol rule has already rejected.

## Why is this bad?
Each role in the cycle holds back the arrival the next one needs: the CTA hangs
forever. Unlike a wrong count it is a matter of order, not of numbers, so every counting
check passes; typical causes are a wait placed before the arrive it depends on, or a
look-ahead consumer on a ring with too few stages.

## Failing example
`corpus/invalid/gemm/lookahead_single_stage.cake`:
```python
ring.wait(k + 1)  # expect: P016
```

## Passing example
`corpus/valid/gemm/pipeline_lookahead_s2.cake`:
```python
ring.wait(k + 1)                          # look ahead, then hand k back
ring.release(k)
```
"""

from cakegov.analysis.accounting import accounting_of
from cakegov.analysis.flow import at_iter, flow_of, key_text, pipelines_of, runs_longest_first
from cakegov.analysis.waitfor import PhaseMap, wait_for_cycle
from cakegov.analysis.witness import witness_evidence

CODE = "P016"
NAME = "wait-for-cycle"
VERSION = "1.0.1"
SEVERITY = "blocking"
CATEGORY = "protocol"
STATUS = "stable"
MOTIVATED_BY = (
    "corpus/invalid/gemm/lookahead_single_stage.cake",
    "corpus/invalid/kmeans_assign/lookahead_single_stage.cake",
    "corpus/invalid/scale/wait_before_arm.cake",
)


def _explained(findings):
    """Another rule already named the cause of the schedule's protocol failure."""
    return any(f.severity == "blocking" and (f.code.startswith("P") or f.code == "R007")
               for f in findings)


def _anchor(cycle, order):
    """The wait to point at: a consumer-side wait before a producer's acquire, then the
    first role in declaration order."""
    return min(cycle, key=lambda e: (e.wait.source == "pipeline_acquire",
                                     order.index(e.waiter) if e.waiter in order else 99))


def _chain(cycle):
    what = {True: "a bulk copy", False: "an arrive"}
    return "; ".join(
        f"`{e.waiter}` waits on `{key_text(e.key)}` (line {e.wait.line}{at_iter(e.wait)}) "
        f"for {what[e.provider.kind == 'copy']} that `{e.helper}` makes only later, at line "
        f"{e.provider.line}{at_iter(e.provider)}" for e in cycle)


def _blocked_steps(cycle):
    """Witness steps for the final state: every wait of the cycle blocked."""
    return [(e.wait.line, f"{e.wait.where()}: blocks on {key_text(e.key)}, which needs "
                          f"{e.helper} line {e.provider.line}{at_iter(e.provider)} first")
            for e in cycle]


def _hint(cycle, anchor):
    held = next(e for e in cycle if e.helper == anchor.waiter)
    what = ("the bulk copy" if held.provider.kind == "copy" else "the arrive") + \
        f" on `{key_text(held.key)}` at line {held.provider.line}"
    return (f"move this wait after {what}, which `{held.waiter}` needs first; for a "
            "look-ahead on a pipeline, give the ring at least one more stage than the "
            "number of stages the consumer holds")


def _phases(result, run):
    """The accounting's phase of every arrive/copy and the phase every wait must observe
    in `run` (the same derivation the count and parity rules judge from)."""
    acc = accounting_of(result)
    index = next((i for i, r in enumerate(result.runs) if r is run), None)
    if index is None or index >= len(acc.runs):
        return PhaseMap({}, {})
    run_acc = acc.runs[index]
    of = {}
    for tallies in run_acc.phases.values():
        for phase, tally in tallies.items():
            for ev in (*tally.arrives, *tally.copies):
                of[(ev.role, ev.seq)] = phase
    target = {(w.event.role, w.event.seq): w.expected_phase for w in run_acc.waits}
    return PhaseMap(of, target)


def check(ctx):
    result = ctx.protocol
    if result is None or _explained(ctx.findings):
        return
    deadlocks = [a for a in result.anomalies if a.kind == "deadlock"]
    if not deadlocks:
        return
    order = [r.name for r in result.kernel.roles]
    seen = set()
    for run in runs_longest_first(result):
        flow = flow_of(result.kernel, run.unrolled, pipelines_of(ctx.schedule))
        for anomaly in deadlocks:
            blocked = [e for e in anomaly.events if e.role in flow.roles
                       and e.seq < len(flow.roles[e.role])
                       and flow.roles[e.role][e.seq].path == e.path]
            if len(blocked) != len(anomaly.events):
                continue  # the anomaly comes from another run
            cycle = wait_for_cycle(flow, blocked, _phases(result, run))
            if cycle is None:
                continue
            anchor = _anchor(cycle, order)
            if anchor.wait.path in seen:
                continue
            seen.add(anchor.wait.path)
            roles = " -> ".join([*(f"{e.waiter} -[{key_text(e.key)}]" for e in cycle),
                                 cycle[0].waiter])
            yield ctx.finding(
                ctx.node_at(anchor.wait.path),
                f"wait-for cycle {roles}: {_chain(cycle)}",
                condition=("no cycle in the wait-for graph: every awaited phase's arrivals "
                           "must be issuable before the waiter blocks"),
                hint=_hint(cycle, anchor),
                resource=anchor.key[0], role=anchor.waiter,
                evidence=_evidence(anomaly, cycle),
            )
        if seen:
            return


def _evidence(anomaly, cycle):
    evidence = witness_evidence(anomaly, cycle=[
                    {"role": e.waiter, "barrier": key_text(e.key), "line": e.wait.line,
        "needs": e.helper, "provider_line": e.provider.line} for e in cycle])
    steps = _blocked_steps(cycle)
    evidence["witness"] = [*evidence["witness"], *(t for _, t in steps)]
    evidence["witness_steps"] = [*evidence["witness_steps"],
                                 *({"line": ln, "text": t} for ln, t in steps)]
    return evidence
