"""A consumer starts waiting with parity 0, a producer with parity 1.

## What it does
For every executed wait, derives the phase it must observe: on a full barrier the
consumer of ring iteration `k` (slot `k % S`) observes phase `k // S`, so its first wait
uses parity 0; on an empty barrier the producer of iteration `k` observes phase
`k // S - 1`, so its first pass over the ring waits with parity 1 and finds the stage
free (a producer that skips its first pass starts with parity 0 at `k = S`). When a wait
statement's parity is the opposite at every one of its executions (right period, wrong
start), the rule points at the wait and names the parity that matches.

## Why is this bad?
A producer that starts on parity 0 waits for a release of a stage it has not filled yet:
the kernel hangs before the first copy. A consumer that starts on parity 1 passes on the
barrier's initial state, before any data has landed, and every later wait passes one
phase early: it reads stages while their copies are still in flight.

## Failing example
`corpus/invalid/gemm/consumer_parity_inverted.cake`:
```python
            full[k % S].wait(parity=(k // S + 1) % 2)  # expect: P005
```

## Passing example
`corpus/valid/gemm/raw_barriers_s2.cake`:
```python
            full[k % S].wait(parity=(k // S) % 2)
```
"""

from cakegov.analysis.accounting import (
    accounting_of,
    evidence_of,
    parity_fix,
    plain,
    sequence,
    wait_sites,
    witness_for,
    wrong_parities,
)

CODE = "P005"
NAME = "initial-parity"
VERSION = "1.0.0"
SEVERITY = "blocking"
CATEGORY = "protocol"
STATUS = "stable"
MOTIVATED_BY = (
    "corpus/invalid/gemm/consumer_parity_inverted.cake",
    "corpus/invalid/gemm/producer_parity_zero.cake",
    "corpus/invalid/scale/wait_parity_one.cake",
    "corpus/invalid/kmeans_assign/centroid_wait_parity_one.cake",
)

_KINDS = ("deadlock", "race", "uninit", "stale-wait", "aliasing", "overflow")
_START = {"full": "a consumer waiting for data starts on parity 0",
          "empty": "a producer waiting for a free stage starts on parity 1"}


def check(ctx):
    result = ctx.protocol
    if result is None or not result.runs:
        return
    acc = accounting_of(result)
    for path, checks in wrong_parities(acc).items():
        if any(c.ok for c in checks):
            continue  # right start, wrong period: parity-flip (P006)
        first = checks[0]
        ev = first.event
        assert ev.slot is not None
        barrier = ev.slot[0]
        bar = acc.kernel.barrier(barrier)
        if first.expected_phase < 0:
            effect = ("it waits for a phase that cannot complete before the role itself "
                      "proceeds: the kernel hangs (deadlock)")
        elif first.side == "full":
            effect = ("it passes on the phase before the one it needs, on a fresh barrier "
                      "at once: the role reads stages before their copies have landed "
                      "(race)")
        else:
            effect = ("it passes on the phase before the one it needs: the role overwrites "
                      "a stage its consumers may still be reading (race)")
        its, expected, actual = sequence(checks, ev.slot)
        anomaly = witness_for(result, _KINDS, resource=barrier, line=ev.line)
        evidence = {"slot": ev.slot[1], "iterations": its, "expected_parities": expected,
                    "actual_parities": actual, "side": first.side,
                    "stages": bar.stages if bar is not None else None}
        evidence = evidence_of(anomaly, **evidence)
        parity = plain(wait_sites(acc.kernel)[path][0].parity)
        yield ctx.finding(
            ctx.node_at(path),
            (f"{ev.role} waits on `{barrier}` with parity {parity}, inverted at every wait: "
             f"at {ev.where()} it waits with parity {ev.parity} but must observe phase "
             f"{first.expected_phase} of {barrier}[{ev.slot[1]}] (parity "
             f"{first.expected_parity}); {effect}"),
            condition=(f"wait parity == parity of the phase it must observe; "
                       f"{_START[first.side]}"),
            hint=f"use `{parity_fix(acc.kernel, path, first.side)}`: {_START[first.side]}",
            resource=barrier,
            role=ev.role,
            stage=f"stage {ev.slot[1]}",
            evidence=evidence,
        )

