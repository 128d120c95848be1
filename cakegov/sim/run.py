"""One simulated run of a lowered kernel: fresh inputs for one shape and seed, the chosen
CTAs executed one after another under one strategy, and the outputs compared with the
workload's float64 reference (cakegov/gpu/data.py draws the inputs and poisons the
outputs exactly as the GPU runner does; cakegov/gpu/compare.py compares).

CTA sampling: every CTA of a grid of at most `SMALL_GRID` CTAs; otherwise the first, the
second-to-last and the last along each grid axis (the tail CTAs, where tile guards
matter), one CTA of each class of CTAs whose protocol differs (cakegov/analysis/ctas.py:
different trip counts of a persistent tile loop, a CTA with no tile; at most
`CLASS_CTAS` more) and `RANDOM_CTAS` seeded random ones. With a sample, elements no simulated CTA
wrote are left out of the comparison (they are filled with the reference); with every
CTA, an element nobody wrote keeps its poison and fails it."""

from __future__ import annotations

import itertools
import random
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from cakegov.analysis.cluster import cross_cta, members
from cakegov.analysis.ctas import classes as protocol_classes
from cakegov.analysis.footprint import Footprints
from cakegov.corpus.workloads import Workload
from cakegov.gpu.compare import compare_outputs
from cakegov.gpu.data import INT_POISON, DataError, make_inputs
from cakegov.gpu.data import encode as device_encode
from cakegov.ir.expr import Env, EvalError, evaluate
from cakegov.lower.kernel import LoweredKernel
from cakegov.sim.cluster import ClusterRun
from cakegov.sim.machine import Machine
from cakegov.sim.memory import GlobalMemory, Tensor, values_dtype
from cakegov.sim.placement import Placement
from cakegov.sim.scheduler import make_strategy
from cakegov.sim.state import (
    CORRECT,
    DEFECT,
    INCOMPLETE,
    NOT_SIMULATED,
    WRONG,
    Defect,
    DefectFound,
    EventBound,
    NotSimulated,
    RunResult,
)

SMALL_GRID = 16
RANDOM_CTAS = 2
CLASS_CTAS = 8
MAX_EVENTS = 200_000  # per run, over all its CTAs


@dataclass(frozen=True)
class Options:
    """What one run executes: strategy, seed, the CTAs (None: the sample) and its bound."""

    strategy: str = "round-robin"
    seed: int = 0
    ctas: tuple[tuple[int, int, int], ...] | None = None
    max_events: int = MAX_EVENTS


def grid_dims(kernel: LoweredKernel, sizes: Mapping[str, int]) -> tuple[int, int, int]:
    env = Env(sizes=sizes)
    dims = []
    for axis in range(3):
        try:
            g = evaluate(kernel.grid[axis], env) if axis < len(kernel.grid) else 1
        except EvalError as exc:
            raise NotSimulated(f"cannot evaluate the grid: {exc}") from None
        dims.append(max(int(g), 0))
    return dims[0], dims[1], dims[2]


def sample_ctas(dims: tuple[int, int, int], seed: int,
                classes: list[tuple[int, int, int]] | None = None
                ) -> list[tuple[int, int, int]]:
    """The CTAs a run executes (module docstring), in a deterministic order. `classes`:
    one CTA of each protocol class (cakegov.analysis.ctas.classes)."""
    total = dims[0] * dims[1] * dims[2]
    if total <= SMALL_GRID:
        return [tuple(c) for c in itertools.product(*(range(g) for g in dims))]  # type: ignore[misc]
    axes = [sorted({0, max(g - 2, 0), g - 1}) for g in dims]
    picked = [tuple(c) for c in itertools.product(*axes)]
    extra = [c for c in (classes or []) if c not in picked][:CLASS_CTAS]
    picked += extra
    rng = random.Random(f"ctas:{seed}")
    while len(picked) < min(total, len(axes[0]) * len(axes[1]) * len(axes[2]) + len(extra)
                            + RANDOM_CTAS):
        c = (rng.randrange(dims[0]), rng.randrange(dims[1]), rng.randrange(dims[2]))
        if c not in picked:
            picked.append(c)
    return picked  # type: ignore[return-value]


def cta_classes(kernel: LoweredKernel, sizes: Mapping[str, int]
                ) -> list[tuple[int, int, int]] | None:
    """One CTA of each class of CTAs (of clusters) whose protocol differs."""
    return protocol_classes(kernel, sizes,
                            cluster=kernel.cluster if cross_cta(kernel) else None)


def _tensors(kernel: LoweredKernel, workload: Workload, sizes: Mapping[str, int],
             values: Mapping[str, np.ndarray]) -> dict[str, Tensor]:
    out = {}
    for name, (dtype, dims) in workload.tensors.items():
        n = int(np.prod([sizes[d] for d in dims]))
        if name in workload.outputs:
            poison = INT_POISON.get(dtype, 0) if dtype not in ("f32", "f16", "bf16", "f64") \
                else np.nan
            arr = np.full(n, poison, dtype=values_dtype(dtype))
            out[name] = Tensor(name, dtype, arr, True, np.full(n, -1, dtype=np.int32))
        else:
            arr = np.asarray(values[name]).reshape(-1).astype(values_dtype(dtype))
            out[name] = Tensor(name, dtype, arr, False)
    return out


def simulate_run(kernel: LoweredKernel, workload: Workload, primitives: Mapping,
                 sizes: Mapping[str, int], options: Options = Options(),
                 placement: Placement | None = None) -> RunResult:
    """Execute the kernel once for `sizes`; never raises for what the kernel does.
    `placement` may be shared by the runs of one kernel (it only caches)."""
    sizes = dict(sizes)
    result = RunResult(options.strategy, options.seed, sizes, [], NOT_SIMULATED, "")
    try:
        dims = grid_dims(kernel, sizes)
        ctas = list(options.ctas) if options.ctas is not None else \
            sample_ctas(dims, options.seed, cta_classes(kernel, sizes)
                        if dims[0] * dims[1] * dims[2] > SMALL_GRID else None)
        result.ctas = ctas
        inputs = make_inputs(workload, sizes, options.seed)
        gmem = GlobalMemory(_tensors(kernel, workload, sizes, inputs.values))
        placement = placement or Placement(kernel, Footprints(kernel))
        budget = options.max_events
        if cross_cta(kernel):  # every CTA of each sampled CTA's cluster, together
            ctas = list(dict.fromkeys(c for cta in ctas for c in members(kernel, cta)))
            result.ctas = ctas
        names = {i: f"CTA {c}" for i, c in enumerate(ctas)}
        done: set[tuple[int, int, int]] = set()
        for ordinal, cta in enumerate(ctas):
            if any(not 0 <= c < d for c, d in zip(cta, dims, strict=True)):
                raise NotSimulated(f"CTA {cta} is outside the grid {dims}")
            if cta in done:
                continue

            def strategy(infos):
                return make_strategy(options.strategy, options.seed, infos)

            if cross_cta(kernel):  # cakegov/sim/cluster.py
                group = members(kernel, cta)
                done.update(group)
                machine: Machine | ClusterRun = ClusterRun(
                    kernel, sizes, group, ordinal, gmem, placement, primitives, strategy,
                    budget, names.__getitem__)
            else:
                machine = Machine(kernel, sizes, cta, ordinal, gmem, placement, primitives,
                                  strategy, budget, names.__getitem__)
            result.cta = cta
            budget -= machine.run()
            result.events = options.max_events - budget
        result.cta = None
        compared = _compare(workload, gmem, inputs, sizes, sampled=len(ctas) < np.prod(dims))
    except DefectFound as found:
        result.outcome, result.defect = DEFECT, found.defect
        result.detail = found.defect.detail
        return result
    except NotSimulated as exc:
        result.outcome, result.detail = NOT_SIMULATED, f"not simulated: {exc}"
        return result
    except DataError as exc:
        result.outcome, result.detail = NOT_SIMULATED, f"not simulated: inputs: {exc}"
        return result
    except EventBound:
        result.outcome = INCOMPLETE
        result.detail = (f"incomplete: more than {options.max_events} events (the bound was "
                         f"hit in CTA {result.cta})")
        return result
    if compared is not None:
        result.outcome, result.defect, result.detail = DEFECT, compared, compared.detail
    else:
        result.outcome = CORRECT
        result.detail = f"matches the reference ({len(ctas)} of {int(np.prod(dims))} CTAs, " \
                        f"{result.events} events)"
    return result


def _compare(workload: Workload, gmem: GlobalMemory, inputs, sizes: Mapping[str, int],
             sampled: bool) -> Defect | None:
    reference = workload.reference(inputs.values, dict(sizes))
    outputs = {}
    for name in workload.outputs:
        t = gmem.tensors[name]
        shape = tuple(sizes[d] for d in workload.tensors[name][1])
        ref = np.asarray(reference[name]).reshape(-1)
        values = t.values
        if sampled:  # only what the simulated CTAs wrote is compared
            values = np.where(t.owner >= 0, values, ref.astype(values.dtype))
        outputs[name] = device_encode(t.dtype, values.reshape(shape)) \
            if t.dtype == "bf16" else values.reshape(shape)
    for c in compare_outputs(workload, outputs, reference, inputs.values):
        if not c.passed:
            text = f"{c.tensor}: {c.reason}"
            return Defect(WRONG, text, 0, ((0, f"the outputs are compared with the "
                                               f"reference: {text}"),))
    return None


def parse_cta(text: str) -> tuple[int, int, int]:
    """`3`, `3,1` or `3,1,0` -> a CTA index (missing axes are 0); ValueError with the
    reason for anything else."""
    parts = [p.strip() for p in text.split(",")]
    if not 1 <= len(parts) <= 3 or any(not p for p in parts):
        raise ValueError(f"bad CTA {text!r}: expected X, X,Y or X,Y,Z")
    values = []
    for p in parts:
        if not p.isdigit() or not p.isascii():
            raise ValueError(f"bad CTA {text!r}: {p!r} is not a non-negative integer")
        values.append(int(p))
    while len(values) < 3:
        values.append(0)
    return values[0], values[1], values[2]
