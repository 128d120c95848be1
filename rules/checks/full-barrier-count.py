"""A full barrier's arrival count must equal the producer arrivals of each phase.

## What it does
Counts, for every phase of every slot of a full (producer -> consumer) barrier, the
arrivals the schedule makes on it: an `arrive_expect_tx` (or a pipeline's acquire in
transaction mode) is one arrival from one elected thread, `per="warp"` one per warp of the
role, a plain `arrive` one per warp (`per="warp"`, the default), one per role or one per
thread. Phases are taken from the unrolled roles of the protocol analysis, so a
prologue, a peeled loop or several producer roles are counted as they run. When every
phase receives the same number of arrivals and that number differs from the count given
by `lm.mbarrier(count=...)` (or a pipeline's `full_count=`), the rule points at the
declaration and names the count that matches.

## Why is this bad?
With a count above the arrivals, no phase ever completes: every consumer waits forever
and the kernel hangs. With a count below, a phase completes as soon as the first
producers have arrived: consumers read a stage another producer is still filling, and
the remaining arrivals complete later phases early. Neither shows up as an error.

## Failing example
`corpus/invalid/gemm/full_count_per_loader_warp.cake`:
```python
    full = lm.mbarrier(count=4, stages=S)           # expect: P001
```

## Passing example
`corpus/valid/gemm/raw_barriers_s2.cake`:
```python
    full = lm.mbarrier(count=1, stages=S)
```
"""

from cakegov.analysis.accounting import count_findings

CODE = "P001"
NAME = "full-barrier-count"
VERSION = "1.0.1"
SEVERITY = "blocking"
CATEGORY = "protocol"
STATUS = "stable"
MOTIVATED_BY = (
    "corpus/invalid/gemm/full_count_per_loader_warp.cake",
    "corpus/invalid/kmeans_assign/pipeline_full_count_two.cake",
    "corpus/invalid/scale/full_count_split_loaders.cake",
)

# An init count too low completes phases early; these are its consequences.
_TOO_LOW = ("race", "overflow", "stale-wait", "aliasing", "uninit", "leftover", "deadlock")


def check(ctx):
    yield from count_findings(ctx, "full", _TOO_LOW)
