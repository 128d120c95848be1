"""The dynamic outcome of a schedule, for labelling mutants: what launching and running it
would do, decided without the checker.

Two steps, in the order the hardware meets them:

1. **Launch.** The CUDA runtime refuses a launch whose dynamic shared memory exceeds the
   per-block limit (the kernel needs `cudaFuncSetAttribute` up to
   `cudaDevAttrMaxSharedMemoryPerBlockOptin`, 227 KB on sm_90a; beyond it the launch
   fails with `cudaErrorInvalidValue`), whose block exceeds the threads per block, whose
   cluster exceeds the portable size (or, with the non-portable opt-in, the non-portable
   one: `cudaErrorInvalidClusterSize`), whose grid has an extent below 1 or above its
   axis's limit at a check shape (`cudaErrorInvalidConfiguration`), or whose registers
   at launch exceed the SM's file (`cudaErrorLaunchOutOfResources`);
   CUDA C++ Programming Guide, "Technical Specifications per Compute Capability", and
   CUDA Runtime API `cudaLaunchKernel`. Inside a launched CTA, `setmaxnreg.inc` blocks
   until the CTA's pool has the registers it asks for (PTX ISA, "setmaxnreg"): when the
   roles' budgets add up to more than the pool the launch allocated, some warpgroup
   waits forever, a deadlock. The limits are the target plugin's, the facts the lowered
   kernel's (threads, registers at launch, shared-memory bytes), both trusted data.
2. **Run.** The CPU simulator's evidence plan (cakegov/sim/evidence.py: three seeds, up to
   three shapes, six scheduling strategies): a reproduced defect names its kind
   (deadlock, race, wrong result, ...).
3. **Run longer.** A mutant the plan finds correct is not yet benign: a missing release
   deadlocks only once a loop wraps its ring more than once, a low arrival count races
   only when a laggard warp is late. It is run again on every check shape of its
   workload, the ragged variant of each, and a long shape (every free size four times
   the largest check shape's, so every loop wraps its ring several times), each under
   all six strategies with `THOROUGH_SEEDS` seeds. Only then is it `benign`: no run
   showed a defect. That is evidence, not proof: a defect no explored schedule exposes
   stays `benign`, and `cakegov corpus run` lists every benign mutant the checker
   rejects for review.

A schedule that cannot be parsed or lowered, uses a construct the simulator does not
model, or hits the simulator's event bound has no outcome (`unknown`, with the reason): it
is reported, never counted as benign or harmful."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from cakegov.analysis.protocol import ragged
from cakegov.check.rulebook import Rulebook
from cakegov.corpus.workloads import Workload
from cakegov.lower.kernel import LoweredKernel
from cakegov.sim.evidence import (
    MAX_SHAPE_ELEMENTS,
    _largest,
    carried_shape,
    lower_any,
    simulate_evidence,
    simulate_plan,
)
from cakegov.sim.scheduler import STRATEGIES
from cakegov.sim.state import CORRECT, DEFECT

THOROUGH_SEEDS = len(STRATEGIES)  # with plan_runs' rotation: every strategy on every shape
LONG_FACTOR = 4

BENIGN = "benign"
LAUNCH = "launch failure"
UNKNOWN = "unknown"


@dataclass(frozen=True)
class Outcome:
    kind: str  # benign | launch failure | a simulator defect kind | unknown
    detail: str

    @property
    def harmful(self) -> bool:
        return self.kind not in (BENIGN, UNKNOWN)


def launch_outcome(kernel: LoweredKernel, limits: Mapping[str, int]) -> Outcome | None:
    """Why the launch of `kernel` fails or never finishes, or None when it starts."""
    smem = limits.get("smem_per_cta")
    if smem is not None and kernel.smem_bytes > smem:
        return Outcome(LAUNCH, f"launch failure: {kernel.smem_bytes} bytes of shared memory "
                       f"per CTA, the target allows {smem}")
    threads = limits.get("threads_per_cta")
    if threads is not None and kernel.threads > threads:
        return Outcome(LAUNCH, f"launch failure: {kernel.threads} threads per CTA, the "
                       f"target allows {threads}")
    file = limits.get("registers_per_sm")
    pool = kernel.launch_regs * kernel.threads
    if file is not None and pool > file:
        return Outcome(LAUNCH, f"launch failure: {kernel.launch_regs} registers x "
                       f"{kernel.threads} threads = {pool}, the SM has {file}")
    size = 1
    for d in kernel.cluster:
        size *= d
    key = "cluster_max_nonportable" if kernel.cluster_nonportable else "cluster_max"
    cluster = limits.get(key, limits.get("cluster_max"))
    if cluster is not None and size > max(cluster, 1):
        return Outcome(LAUNCH, f"launch failure: a cluster of {size} CTAs, the target allows "
                       f"{cluster} ({key})")
    demand = sum((r.regs if r.regs is not None else kernel.launch_regs) * r.warps * 32
                 for r in kernel.roles)
    if demand > pool:
        return Outcome("deadlock", f"deadlock: the roles' register budgets need {demand} "
                       f"registers, the CTA's pool holds {pool}; a `setmaxnreg.inc` waits "
                       "for registers no warpgroup frees")
    return None


def grid_outcome(kernel: LoweredKernel, limits: Mapping[str, int],
                 shapes: list[dict[str, int]]) -> Outcome | None:
    """A launch failure when a grid extent is below 1 or above the target's limit for its
    axis at one of `shapes` (cudaErrorInvalidConfiguration), else None."""
    from cakegov.ir.expr import Env, EvalError, evaluate

    for sizes in shapes:
        for axis, extent in zip("xyz", kernel.grid, strict=False):
            try:
                value = evaluate(extent, Env(sizes=sizes))
            except (EvalError, KeyError, ValueError, ZeroDivisionError):
                continue
            limit = limits.get(f"grid_{axis}_max")
            if value < 1 or (limit is not None and value > limit):
                return Outcome(LAUNCH, f"launch failure: the grid's {axis}-extent is "
                               f"{value} at {sizes}, the target allows 1..{limit}")
    return None


def thorough_shapes(kernel: LoweredKernel, workload: Workload, schedule) -> list[dict]:
    """Every check shape of the schedule, its ragged variant, a long shape (step 3 of
    the module docstring) and, for a persistent kernel, a shape where CTA 0 takes two
    tiles (cakegov/sim/evidence.py, `carried_shape`), each at most MAX_SHAPE_ELEMENTS
    elements per tensor."""
    base = workload.shapes_for(schedule.sizes, schedule.divisible)
    out: list[dict] = []
    for shape in sorted(base, key=lambda s: (_largest(workload, s), sorted(s.items()))):
        for s in (shape, ragged(kernel, shape)):
            if s is not None and s not in out and _largest(workload, s) <= MAX_SHAPE_ELEMENTS:
                out.append(dict(s))
    if out:
        top = max(out, key=lambda s: _largest(workload, s))
        long = {k: (v if k in schedule.sizes else v * LONG_FACTOR) for k, v in top.items()}
        for k, mult in schedule.divisible.items():
            if k in long and k not in schedule.sizes:
                long[k] = -(-long[k] // mult) * mult
        while _largest(workload, long) > MAX_SHAPE_ELEMENTS and any(
                v > top[k] for k, v in long.items()):
            # too big: keep the long loop dimension, shrink the others back
            k = max((k for k in long if long[k] > top[k]), key=lambda k: long[k])
            long[k] = top[k]
        if long not in out and _largest(workload, long) <= MAX_SHAPE_ELEMENTS:
            out.append(long)
    more = carried_shape(kernel, workload, out)
    if more is not None and more not in out:
        out.append(more)
    return out


def outcome(source: bytes, name: str, rulebook: Rulebook,
            workloads: Mapping[str, Workload], *, seeds: int = 3) -> Outcome:
    """The dynamic outcome of one schedule (module docstring)."""
    kernel, _workload, schedule, why_not = lower_any(source, name, rulebook, workloads)
    if kernel is None:
        return Outcome(UNKNOWN, why_not)
    target = rulebook.targets.get(schedule.target)
    limits = {k: v.value for k, v in target.limits.items()} if target is not None else {}
    launch = launch_outcome(kernel, limits) or grid_outcome(
        kernel, limits, _workload.shapes_for(schedule.sizes, schedule.divisible)
        if _workload is not None else [])
    if launch is not None:
        return launch
    evidence = simulate_evidence(source, name, rulebook, workloads, seeds=seeds)
    if evidence["status"] == CORRECT:
        shapes = thorough_shapes(kernel, _workload, schedule)
        evidence = simulate_plan(source, name, rulebook, workloads, seeds=THOROUGH_SEEDS,
                                 shapes=shapes)
    if evidence["status"] == CORRECT:
        return Outcome(BENIGN, evidence["detail"])
    if evidence["status"] == DEFECT:
        kind = str(evidence["detail"]).split(":", 1)[0]
        return Outcome(kind, str(evidence["detail"]))
    return Outcome(UNKNOWN, str(evidence["detail"]))
