"""Dynamic evidence for one schedule, as data: the programmatic API the merge gate calls
for every schedule whose verdict flipped (and `cakegov simulate` and the corpus
cross-check use).

`simulate_evidence` parses and lowers the schedule whatever the checker would say of it
(protocol defects lower fine; the simulator is the oracle that grounds the labels), then
runs a fixed plan: for each seed and each planned shape (`plan_shapes`: the smallest check
shape, its ragged variant and the next check shape), one strategy, rotating through
`STRATEGIES` so that three seeds use all six. It stops at the first run
that reproduces a defect. Everything is a function of the inputs: the same source,
rulebook, workloads and arguments give the same JSON."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cakegov.analysis.footprint import Footprints
from cakegov.analysis.protocol import persistent, ragged
from cakegov.check.context import CheckContext
from cakegov.check.rulebook import Rulebook
from cakegov.corpus.workloads import Workload
from cakegov.ir.errors import InputError
from cakegov.ir.parse import Vocabulary, parse_bytes
from cakegov.lower.kernel import LoweredKernel
from cakegov.sim.placement import Placement
from cakegov.sim.run import MAX_EVENTS, Options, simulate_run
from cakegov.sim.scheduler import STRATEGIES
from cakegov.sim.state import CORRECT, DEFECT, INCOMPLETE, NOT_SIMULATED, RunResult

MAX_SHAPE_ELEMENTS = 1 << 22  # check shapes whose largest tensor is bigger are not run


def lower_any(source: bytes, file: str, rulebook: Rulebook,
              workloads: Mapping[str, Workload]) -> tuple[LoweredKernel | None, Workload | None,
                                                          Any, str]:
    """Parse and lower a schedule without requiring a clean verdict. Returns (kernel,
    workload, schedule, why not) with `why not` empty when the kernel exists."""
    vocab = Vocabulary(primitives=rulebook.spellings(),
                       workloads={n: w.sig for n, w in workloads.items()})
    try:
        schedule = parse_bytes(source, vocab)
    except InputError as exc:
        return None, None, None, f"cannot parse: {exc.code} {exc.message}"
    if schedule.unresolved:
        names = ", ".join(f"`{u.name}`" for u in schedule.unresolved[:3])
        return None, None, schedule, f"unresolved names: {names}"
    workload = workloads.get(schedule.workload)
    if workload is None:
        return None, None, schedule, f"unknown workload {schedule.workload!r}"
    target = rulebook.targets.get(schedule.target)
    if target is None:
        return None, workload, schedule, f"unknown target {schedule.target!r}"
    ctx = CheckContext(schedule, file, target, workload, rulebook.primitives)
    kernel = ctx.lowered
    if kernel is None:
        return None, workload, schedule, "cannot lower: " + (ctx.lowering_error or
                                                             "no launch")
    return kernel, workload, schedule, ""


def plan_shapes(kernel: LoweredKernel, workload: Workload, schedule: Any
                ) -> list[dict[str, int]]:
    """The shapes a plan runs: the smallest check shape, its ragged variant (free sizes
    moved to multiples of no tile constant, cakegov/analysis/protocol.py: tail tiles,
    with few enough CTAs that every one runs, so an output element no CTA writes fails
    the comparison), and the next check shape made ragged (defects that need more loop
    iterations than stages, a missing release or a stage reused too early, only show once
    a loop wraps its ring); for a persistent kernel whose CTAs take one tile each at those
    shapes, a shape where CTA 0 takes two (`carried_shape`). Shapes the schedule's sizes
    make equal are run once."""
    shapes = workload.shapes_for(schedule.sizes, schedule.divisible)
    shapes = sorted(shapes, key=lambda s: (_largest(workload, s), sorted(s.items())))
    first = shapes[0]
    out = [first]
    nxt = next((s for s in shapes[1:] if _largest(workload, s) <= MAX_SHAPE_ELEMENTS), None)
    for shape in (ragged(kernel, first), (ragged(kernel, nxt) or nxt) if nxt else None):
        if shape is not None and shape not in out:
            out.append(shape)
    more = carried_shape(kernel, workload, shapes)
    if more is not None and more not in out:
        out.append(more)
    return out


def carried_shape(kernel: LoweredKernel, workload: Workload,
                  shapes: Sequence[Mapping[str, int]]) -> dict[str, int] | None:
    """For a persistent kernel none of whose shapes gives CTA 0 two tiles: the first check
    shape grown until it does (cakegov/analysis/protocol.py, `persistent`), within
    MAX_SHAPE_ELEMENTS; what carries from tile to tile is then exercised."""
    def fits(shape: Mapping[str, int]) -> bool:
        return _largest(workload, shape) <= MAX_SHAPE_ELEMENTS

    for shape in shapes:
        more = persistent(kernel, shape, passes=2, fits=fits, derive=workload.derive)
        if more is not None:
            return more
    return None


def _largest(workload: Workload, shape: Mapping[str, int]) -> int:
    n = 0
    for _dtype, dims in workload.tensors.values():
        size = 1
        for d in dims:
            size *= shape.get(d, 1)
        n = max(n, size)
    return n


def plan_runs(shapes: Sequence[dict[str, int]], seeds: int) -> list[tuple[str, int, dict]]:
    out = []
    for seed in range(seeds):
        for j, shape in enumerate(shapes):
            out.append((STRATEGIES[(seed * len(shapes) + j) % len(STRATEGIES)], seed, shape))
    return out


def summarise(runs: list[RunResult], why_not: str = "") -> dict[str, Any]:
    """The evidence JSON of a list of runs (module docstring of cakegov/sim/evidence.py)."""
    strategies = [r.to_json() for r in runs]
    if why_not:
        return {"status": NOT_SIMULATED, "detail": f"not simulated: {why_not}",
                "strategies": strategies, "witness": []}
    for r in runs:
        if r.outcome == DEFECT and r.defect is not None:
            return {"status": DEFECT, "detail": r.detail, "strategies": strategies,
                    "witness": r.defect.witness_json()}
    for status in (NOT_SIMULATED, INCOMPLETE):
        hit = next((r for r in runs if r.outcome == status), None)
        if hit is not None:
            return {"status": status, "detail": hit.detail, "strategies": strategies,
                    "witness": []}
    if not runs:
        return {"status": NOT_SIMULATED, "detail": "not simulated: no run planned",
                "strategies": [], "witness": []}
    names = sorted({r.strategy for r in runs})
    shapes = sorted({",".join(f"{k}={v}" for k, v in r.shape.items()) for r in runs})
    seeds = sorted({r.seed for r in runs})
    return {"status": CORRECT,
            "detail": f"{len(runs)} runs matched the reference: strategies "
                      f"{', '.join(names)}; seeds {', '.join(map(str, seeds))}; shapes "
                      f"{'; '.join(shapes)}",
            "strategies": strategies, "witness": []}


def simulate_evidence(source: bytes, file: str, rulebook: Rulebook,
                      workloads: Mapping[str, Workload], *, seeds: int = 3,
                      max_events: int = MAX_EVENTS) -> dict[str, Any]:
    """Simulate one schedule: `{"status", "detail", "strategies", "witness"}` with status
    `correct` (every planned run matched the reference), `defect` (a run reproduced a
    dynamic defect; detail names the kind), `not simulated` (cannot parse or lower, or a
    construct the simulator does not model) or `incomplete` (an event bound was hit)."""
    return simulate_plan(source, file, rulebook, workloads, seeds=seeds,
                         max_events=max_events)


def simulate_plan(source: bytes, file: str, rulebook: Rulebook,
                  workloads: Mapping[str, Workload], *, seeds: int = 3,
                  max_events: int = MAX_EVENTS,
                  shapes: Sequence[Mapping[str, int]] | None = None,
                  strategy: str | None = None,
                  ctas: Sequence[tuple[int, int, int]] | None = None) -> dict[str, Any]:
    """`simulate_evidence` with the plan narrowed: these shapes (already validated
    against the workload) instead of `plan_shapes`, one strategy for every run, these
    CTAs instead of the sample."""
    kernel, workload, schedule, why_not = lower_any(source, file, rulebook, workloads)
    if kernel is None or workload is None:
        return summarise([], why_not)
    chosen = [dict(s) for s in shapes] if shapes else plan_shapes(kernel, workload, schedule)
    runs: list[RunResult] = []
    placement = Placement(kernel, Footprints(kernel))
    for name, seed, shape in plan_runs(chosen, max(1, seeds)):
        run = simulate_run(kernel, workload, rulebook.primitives, shape,
                           Options(strategy=strategy or name, seed=seed,
                                   ctas=tuple(ctas) if ctas else None,
                                   max_events=max_events), placement)
        runs.append(run)
        if run.outcome in (DEFECT, NOT_SIMULATED):
            break
    return summarise(runs)
