"""A wait's parity must flip exactly when its ring wraps: parity = (k // S) % 2.

## What it does
For every executed wait, derives the phase it must observe from its ring iteration: the
consumer of iteration `k` on slot `k % S` observes phase `k // S`, the producer phase
`k // S - 1` (see P005). When a wait statement's parity matches that phase at some of its
executions and not at others (it flips every iteration, every 2 with 4 stages, or never),
the rule points at the wait, names the first iteration and stage where it is wrong, and
shows the parities it uses against the ones it must use. A parity that is wrong at every
execution has the right period but the wrong start: initial-parity (P005).

## Why is this bad?
Where the parity is wrong, the wait either blocks on a phase that cannot complete before
its own role proceeds (the kernel hangs), or passes on a phase it already observed and
reads or overwrites a stage the other side has not finished with (silently wrong data).

## Failing example
`corpus/invalid/gemm/parity_flip_period_s4.cake`:
```python
            empty[k % S].wait(parity=(k // 2 + 1) % 2)  # expect: P006
```

## Passing example
`corpus/valid/gemm/raw_barriers_s2.cake`:
```python
            empty[k % S].wait(parity=(k // S + 1) % 2)   # producer starts on parity 1
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

CODE = "P006"
NAME = "parity-flip"
VERSION = "1.0.0"
SEVERITY = "blocking"
CATEGORY = "protocol"
STATUS = "stable"
MOTIVATED_BY = (
    "corpus/invalid/gemm/parity_flip_period_s4.cake",
    "corpus/invalid/kmeans_assign/raw_ring_parity_stage_bit.cake",
)

_KINDS = ("deadlock", "stale-wait", "race", "aliasing", "uninit", "overflow")


def check(ctx):
    result = ctx.protocol
    if result is None or not result.runs:
        return
    acc = accounting_of(result)
    for path, checks in wrong_parities(acc).items():
        if not any(c.ok for c in checks):
            continue  # inverted everywhere: initial-parity (P005)
        bad = next(c for c in checks if not c.ok)
        ev = bad.event
        assert ev.slot is not None
        barrier = ev.slot[0]
        its, expected, actual = sequence(checks, ev.slot)
        q = bad.expected_phase
        if q < 0:
            effect = ("it waits for phase 0, which cannot complete before its own role "
                      "proceeds: deadlock")
        else:
            effect = (f"it can pass on phase {q - 1} before phase {q} completes and touch a "
                      "stage the other side has not finished with (race), or, once phase "
                      f"{q} is done, block for phase {q + 1} (deadlock)")
        anomaly = witness_for(result, _KINDS, resource=barrier, line=ev.line)
        parity = plain(wait_sites(acc.kernel)[path][0].parity)
        yield ctx.finding(
            ctx.node_at(path),
            (f"{ev.role} waits on `{barrier}` with parity {parity}, which does not flip "
             f"with the phases of the ring: at {ev.where()} it waits with parity "
             f"{ev.parity} but must observe phase {bad.expected_phase} of "
             f"{barrier}[{ev.slot[1]}] (parity {bad.expected_parity}); {effect}"),
            condition=(f"wait parity == (phase it must observe) % 2 on {barrier}[{ev.slot[1]}] "
                       f"over {its}: expected {expected}, got {actual}"),
            hint=(f"use `{parity_fix(acc.kernel, path, bad.side)}`: the parity flips each "
                  "time the ring wraps, floor(iteration / stages) % 2"
                  + (", offset by one on an empty barrier" if bad.side == "empty" else "")),
            resource=barrier,
            role=ev.role,
            stage=f"stage {ev.slot[1]}",
            evidence=evidence_of(anomaly, slot=ev.slot[1], iterations=its,
                                 expected_parities=expected, actual_parities=actual,
                                 side=bad.side),
        )
