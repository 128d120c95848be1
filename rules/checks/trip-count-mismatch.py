"""Loops that hand tiles from one role to another run the same number of iterations.

## What it does
The protocol analysis finds a deadlock (a consumer waits for a tile that is never
produced) or a bulk copy still in flight when the CTA exits (a producer fills a tile
that no consumer waits for), and the loops through which two roles exchange the tiles
(loops at the same depth of the two roles' loop nests) run different numbers of
iterations for some size or CTA: typically one loop counts `lm.cdiv(lm.K, BK)` tiles and
the other `lm.K // BK`, which differ as soon as `K` is not a multiple of the tile (a size
the schedule does not declare divisible; the analysis checks such a size for every
undeclared one), or the persistent tile loops of a producer and a consumer walk
different numbers of tiles (the analysis runs one CTA of every class of trip counts).
The rule proposes giving one loop the other's bound, has the engine re-check the
schedule, and reports only when that removes the anomaly: at the loop, with the witness
and the re-checked fix.

## Why is this bad?
A producer that runs more iterations than its consumer leaves bulk copies that nobody
waits for: the CTA may exit while they still write its shared memory, and the tiles
they carry never reach the result. A consumer that runs more iterations waits for a
tile that never comes: the kernel hangs. Both hide behind check shapes that happen to be
multiples of the tile.

## Failing example
`corpus/invalid/gemm/tail_tile_consumer_floor.cake`:
```python
        for k in lm.range(0, lm.K // BK):  # expect: P019
```

## Passing example
`corpus/valid/gemm/ws_pipeline_tail_s4.cake`:
```python
        for k in lm.range(0, lm.cdiv(lm.K, BK)):
```
"""

from cakegov.analysis.diagnose import Candidate, classify, evidence, program_of, role_of
from cakegov.ir.nodes import Call, For
from cakegov.ir.parse import walk_statements
from cakegov.plugin import Repair

CODE = "P019"
NAME = "trip-count-mismatch"
VERSION = "1.2.0"
SEVERITY = "blocking"
CATEGORY = "protocol"
STATUS = "stable"
MOTIVATED_BY = (
    "corpus/invalid/gemm/tail_tile_consumer_floor.cake",
    "corpus/invalid/scale/tail_tiles_consumer_floor.cake",
)

_KINDS = ("exit-inflight", "deadlock", "race", "uninit")


def _loops(ctx):
    """Every loop with its role and its depth (the loops around it)."""
    return [(stmt, role.name, len(around)) for role in ctx.schedule.roles
            for stmt, around in walk_statements(role.body) if isinstance(stmt, For)]


_WAITS = ("pipeline_acquire", "pipeline_wait", "mbarrier_wait")


def _only_waits(loop: For) -> bool:
    """A loop whose body only waits (a producer's drain, CUTLASS `producer_tail`)
    hands no tile over: its length is not the other role's loop's."""
    for stmt, _ in walk_statements(loop.body):
        if isinstance(stmt, Call) and stmt.primitive not in _WAITS:
            return False
    return True


def _candidates(ctx, anomaly):
    program = program_of(ctx, anomaly)
    if program is None:
        return
    trips = program.trip_counts
    loops = _loops(ctx)
    involved = {e.role for e in anomaly.events}
    for a, role_a, depth_a in loops:
        for b, role_b, depth_b in loops:
            # the loops that exchange tiles sit at one depth of their roles' loop nests
            # (a persistent tile loop with the other's tile loop, a K loop with a K loop)
            if role_a == role_b or depth_a != depth_b or a.path not in trips or \
                    b.path not in trips:
                continue
            if trips[a.path] == trips[b.path] or _only_waits(a) or _only_waits(b):
                continue
            # work left in flight: extend the shorter loop; a wait for work that never
            # comes: shorten the longer one
            if (anomaly.kind == "deadlock") != (trips[a.path] > trips[b.path]):
                continue
            if involved and role_a not in involved and role_b not in involved:
                continue
            yield Candidate((Repair("copy_bound", a.path, other=b.path),),
                            f"give this loop the bound of `{role_b}`'s loop (line "
                            f"{b.span.line}), so both run the same iterations",
                            subject=a.path, value=(a, b, trips[a.path], trips[b.path]))


def _report(ctx, anomaly, attempt, cand):
    a, b, ta, tb = cand.value
    sizes = program_of(ctx, anomaly).sizes
    at = ", ".join(f"{k}={v}" for k, v in sizes.items())
    return ctx.finding(
        a,
        f"`{role_of(a.path)}` runs {ta} iteration(s) of this loop but `{role_of(b.path)}` "
        f"runs {tb} of its loop (line {b.span.line}) at {at}: {anomaly.message}",
        condition="the loops that hand tiles from one role to another run the same "
                  "iterations for every size and CTA",
        hint=attempt.fix.description, role=role_of(a.path) or None,
        resource=anomaly.resource or None, evidence=evidence(anomaly, trips=[ta, tb]),
        fix=attempt.fix, explains=attempt.removed)


def check(ctx):
    yield from classify(ctx, _KINDS, _candidates, _report)
