"""An empty barrier's arrival count must equal the consumer releases of each phase.

## What it does
The protocol analysis reaches an anomaly (the producer blocked forever on a stage
that never comes back, or a stage handed back before every consumer warp is done, and
the overwrite race that follows) and the barrier that hands storage back (its waiters
write what its arrivers read) has an init count that differs from the releases each phase
receives. The rule proposes the count each phase really receives (one arrive per warp of
each releasing role, or as the arrive statements say), has the engine re-check the
schedule with it, and reports only when that removes the anomaly, pointing at the
declaration with the witness and the re-checked fix.

## Why is this bad?
With a count above the releases, no phase ever completes: the producer waits forever the
first time it comes back to a stage and the kernel hangs. With a count below, the phase
completes after the first consumer warps have released: the producer overwrites a stage
that other consumer warps are still reading, and the remaining releases complete the next
phase early. The result is silently wrong data.

## Failing example
`corpus/invalid/gemm/pipeline_empty_count_one_warpgroup.cake`:
```python
    ring = lm.pipeline(stages=4, buffers=[a_s, b_s], producer=loader, consumer=math,  # expect: P002
```

## Passing example
`corpus/valid/gemm/raw_two_consumers_s2.cake`:
```python
    empty = lm.mbarrier(count=8, stages=S)          # 4 warps of math0 + 4 warps of math1
```
"""

from cakegov.analysis.diagnose import count_findings

CODE = "P002"
NAME = "empty-barrier-count"
VERSION = "2.0.0"
SEVERITY = "blocking"
CATEGORY = "protocol"
STATUS = "stable"
MOTIVATED_BY = (
    "corpus/invalid/gemm/pipeline_empty_count_one_warpgroup.cake",
    "corpus/invalid/kmeans_assign/pipeline_empty_count_high.cake",
)


def check(ctx):
    yield from count_findings(ctx, "empty")
