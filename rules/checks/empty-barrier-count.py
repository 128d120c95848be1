"""An empty barrier's arrival count must equal the consumer releases of each phase.

## What it does
Counts, for every phase of every slot of an empty (consumer -> producer) barrier, the
arrivals with which the consumers release it: a pipeline's `release` and a plain
`arrive` arrive once per warp of the releasing role (`per="warp"`, the default), or once
per role or per thread when the schedule says so. Phases are taken from the unrolled
roles, so several consumer roles releasing the same stage add up, and ping-pong
consumers that release alternate phases do not. When every phase receives the same
number of releases and that number differs from the count of `lm.mbarrier(count=...)`
(or a pipeline's `empty_count=`), the rule points at the declaration and names the count
that matches.

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

from cakegov.analysis.accounting import count_findings

CODE = "P002"
NAME = "empty-barrier-count"
VERSION = "1.0.1"
SEVERITY = "blocking"
CATEGORY = "protocol"
STATUS = "stable"
MOTIVATED_BY = (
    "corpus/invalid/gemm/pipeline_empty_count_one_warpgroup.cake",
    "corpus/invalid/kmeans_assign/pipeline_empty_count_high.cake",
)

# An init count too low completes phases early; these are its consequences.
_TOO_LOW = ("race", "overflow", "stale-wait", "aliasing", "leftover", "deadlock")


def check(ctx):
    yield from count_findings(ctx, "empty", _TOO_LOW)
