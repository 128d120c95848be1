"""A full barrier's arrival count must equal the producer arrivals of each phase.

## What it does
The protocol analysis reaches an anomaly (a deadlock, a phase that completes early,
arrivals that spill into the next phase, the race that follows) and the barrier whose
completion publishes the data (copies complete on it, or its waiters read what its
arrivers wrote) has an init count that differs from what its phases receive. The rule
proposes the count each phase really receives (from the arrive statements of the
schedule, one per warp, role or thread as written), has the engine re-check the schedule
with it, and reports only when that removes the anomaly: the finding points at the
declaration, gives the count and the arrivals, carries the witness and offers the
re-checked fix.

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

from cakegov.analysis.diagnose import count_findings

CODE = "P001"
NAME = "full-barrier-count"
VERSION = "2.0.0"
SEVERITY = "blocking"
CATEGORY = "protocol"
STATUS = "stable"
MOTIVATED_BY = (
    "corpus/invalid/gemm/full_count_per_loader_warp.cake",
    "corpus/invalid/kmeans_assign/pipeline_full_count_two.cake",
    "corpus/invalid/scale/full_count_split_loaders.cake",
)


def check(ctx):
    yield from count_findings(ctx, "full")
