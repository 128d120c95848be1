"""The protocol analysis of one lowered kernel: for every check shape of the workload, a
shape whose undeclared sizes are multiples of no tile, for a persistent kernel a shape in
which a CTA walks several tiles (`persistent`), and every CTA whose protocol
differs (first, last, tail in each grid dimension), build the program (cakegov/analysis/
program.py, spliced by cakegov/analysis/window.py when loops are long and periodic),
execute it once (cakegov/analysis/execute.py) and collect the anomalies with their
witnesses.

Bounds are counts of unrolled events, never time: the same schedule gets the same verdict
on every machine. A bound that is hit makes the result incomplete, never clean."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from cakegov.analysis import cluster
from cakegov.analysis import ctas as cta_classes
from cakegov.analysis.execute import Anomaly, Outcome, execute, unforced_only
from cakegov.analysis.footprint import Footprints, TooLarge
from cakegov.analysis.program import Builder, Program, UnrollError, symmetry_notes
from cakegov.analysis.semantics import ARRIVAL_LIMIT
from cakegov.analysis.window import consistent, plan
from cakegov.ir.expr import (
    BinOp,
    Compare,
    Const,
    Env,
    EvalError,
    Expr,
    evaluate,
    free_symbols,
    step_expr,
)
from cakegov.lower.kernel import LArrive, LCompute, LCopy, LFor, LInit, LOp, LoweredKernel, LWait


@dataclass(frozen=True)
class Bounds:
    """Explicit, deterministic bounds of the analysis."""

    max_events: int = 60_000  # events of one unrolled program
    max_confirm_events: int = 150_000  # an anomaly found after splicing is re-checked
    max_runs: int = 64  # (shape, CTA) programs executed
    window: bool = True  # splice periodic loops (False: unroll every iteration)
    max_orders: int = 24  # thread orders tried when the canonical execution is unforced
    symmetry: bool = True  # explore symmetric warpgroups through one (program.Symmetry)


@dataclass
class Run:
    """One executed program."""

    sizes: dict[str, int]
    cta: tuple[int, int, int]
    program: Program
    outcome: Outcome
    spliced: bool = False
    reduced: bool = False  # symmetric warpgroups explored through one (program.Symmetry)

    @property
    def label(self) -> str:
        sizes = ", ".join(f"{k}={v}" for k, v in self.sizes.items())
        cta = f"CTA {self.cta}" if any(self.cta) else "CTA (0, 0, 0)"
        return f"{sizes}; {cta}"


@dataclass
class ProtocolResult:
    kernel: LoweredKernel
    runs: list[Run] = field(default_factory=list)
    anomalies: list[Anomaly] = field(default_factory=list)
    incomplete: list[str] = field(default_factory=list)
    unforced: list[str] = field(default_factory=list)  # those of `incomplete` that are
    # unforced phase attributions no tried execution turns into a defect (not bounds)
    footprints: Footprints | None = None
    reductions: list[str] = field(default_factory=list)  # symmetry used (program.Symmetry)

    @property
    def events(self) -> int:
        return sum(r.program.events for r in self.runs)

    @property
    def work(self) -> int:
        """Accesses compared by the race checks over every run."""
        return sum(r.outcome.work for r in self.runs)

    @property
    def states(self) -> int:
        """Steps executed over every run (the analysis' measure of work)."""
        return sum(r.outcome.steps for r in self.runs)

    def run_of(self, anomaly: Anomaly) -> Run | None:
        for run in self.runs:
            if any(a is anomaly for a in run.outcome.anomalies):
                return run
        return None


# ---- which shapes and which CTAs --------------------------------------------------------


def _all_exprs(kernel: LoweredKernel) -> list[Expr]:
    out: list[Expr] = list(kernel.grid)

    def visit(ops: tuple[LOp, ...]) -> None:
        for op in ops:
            if isinstance(op, LFor):
                out.extend((op.start, op.stop, step_expr(op.step)))
                visit(op.body)
            elif isinstance(op, LWait):
                out.extend((op.index, op.parity))
            elif isinstance(op, LArrive):
                out.extend((op.index, op.tx))
            elif isinstance(op, LCopy):
                out.extend((op.stage, op.barrier_index, *op.at))
            elif isinstance(op, LInit):
                out.append(op.index)
            elif isinstance(op, LCompute):
                out.extend(a.stage for a in (*op.reads, *op.writes) if a.stage is not None)

    for role in kernel.roles:
        visit(role.body)
    return out


def _protocol_exprs(kernel: LoweredKernel) -> list[Expr]:
    """Expressions that reach the protocol (no grid, no coordinates)."""
    out: list[Expr] = []

    def visit(ops: tuple[LOp, ...]) -> None:
        for op in ops:
            if isinstance(op, LFor):
                out.extend((op.start, op.stop, step_expr(op.step)))
                visit(op.body)
            else:
                out.extend(cta_classes.protocol_exprs(op))

    for role in kernel.roles:
        visit(role.body)
    return out


def _constants(expr: Expr, out: set[int]) -> None:
    if isinstance(expr, Const):
        if expr.value > 1:
            out.add(expr.value)
    elif isinstance(expr, BinOp | Compare):
        _constants(expr.lhs, out)
        _constants(expr.rhs, out)


def ragged(kernel: LoweredKernel, shape: Mapping[str, int]) -> dict[str, int] | None:
    """`shape` with every size the schedule neither fixes nor declares divisible moved to
    a value that is a multiple of no constant of the kernel (no tile divides it); None
    when no size moves."""
    tiles: set[int] = set()
    for expr in _all_exprs(kernel):
        _constants(expr, tiles)
    for buf in kernel.buffers:
        tiles.update(d for d in buf.shape if d > 1)
    used = {s[5:] for e in _all_exprs(kernel) for s in free_symbols(e) if s.startswith("size:")}
    out = dict(shape)
    moved = False
    for name in sorted(used):
        if name in kernel.sizes or name in kernel.divisible or name not in out:
            continue
        value = out[name] + 1
        while any(value % t == 0 for t in tiles) and value < out[name] + 4096:
            value += 1
        if value != out[name]:
            out[name] = value
            moved = True
    return out if moved else None


PERSISTENT_PASSES = 3  # passes of a grid-stride loop one CTA must make in some shape
PERSISTENT_GROWTH = 12  # doublings of the sizes a tile count depends on, at most


def _grid_stride_loops(kernel: LoweredKernel) -> list[LFor]:
    """The outermost loops of the roles that start at the block index or step by an
    expression (`lm.range(lm.block(0), TILES, lm.grid(0))`; a constant grid makes the
    step a constant): the tile loops of persistent kernels."""
    out: list[LFor] = []

    def visit(ops: tuple[LOp, ...]) -> None:
        for op in ops:
            if isinstance(op, LFor):
                if not isinstance(op.step, int) or any(
                        s.startswith("block:") for s in free_symbols(op.start)):
                    out.append(op)
                else:
                    visit(op.body)

    for role in kernel.roles:
        visit(role.body)
    return out


def _passes(loop: LFor, sizes: Mapping[str, int]) -> int | None:
    """Passes CTA 0 makes through a grid-stride loop (None: not evaluable)."""
    env = Env(sizes=sizes, blocks={0: 0, 1: 0, 2: 0})
    try:
        start, stop = evaluate(loop.start, env), evaluate(loop.stop, env)
        step = evaluate(step_expr(loop.step), env)
    except EvalError:
        return None
    if step <= 0:
        return None
    return max(0, -(-(stop - start) // step))


def persistent(kernel: LoweredKernel, shape: Mapping[str, int], *,
               passes: int = PERSISTENT_PASSES,
               fits: Callable[[Mapping[str, int]], bool] | None = None,
               derive: Callable[[dict[str, int]], dict[str, int]] | None = None
               ) -> dict[str, int] | None:
    """`shape` with the sizes the tile count of a grid-stride loop depends on doubled until
    CTA 0 makes `passes` passes through it; None when the kernel has no such loop, CTA 0
    already makes them, or no growth of the sizes gets there (within `fits`, the
    simulator's size bound). `derive`: the workload's derived sizes, recomputed after
    each growth (gemm_fp8's NB from N).

    A persistent kernel's grid is the SM count (`lm.min(SMS, TILES)`): at small check
    shapes every CTA takes one tile, and what carries from tile to tile (the ring's
    phases, a running counter) is never exercised, so a defect there (a position
    restarted at every tile) would pass. Doubling keeps each size's declared
    divisibility; sizes the schedule fixes are never moved, and sizes only the inner
    loops use (K) keep their value, so the trip counts the base shape was chosen for
    stay."""
    loops = [loop for loop in _grid_stride_loops(kernel)
             if (n := _passes(loop, shape)) is not None and n < passes]
    if not loops:
        return None
    grow = sorted({s[5:] for loop in loops for s in free_symbols(loop.stop)
                   if s.startswith("size:")} - set(kernel.sizes))
    grow = [name for name in grow if name in shape]
    if not grow:
        return None
    out = dict(shape)
    for _ in range(PERSISTENT_GROWTH):
        for name in grow:
            out[name] *= 2
        if derive is not None:
            out = derive(out)
        if fits is not None and not fits(out):
            return None
        counts = [_passes(loop, out) for loop in loops]
        if all(n is not None and n >= passes for n in counts):
            return out
    return None


def ctas(kernel: LoweredKernel, sizes: Mapping[str, int]) -> list[tuple[int, int, int]]:
    """The CTAs to analyse: block (0, 0, 0) when nothing the protocol does depends on the
    block index; else one CTA of every class of CTAs (of clusters) whose protocol is the
    same (cakegov/analysis/ctas.py), the first, the second-to-last and the last along each
    grid axis representing their classes; past its bounds, just those."""
    depends = any(s.startswith("block:") for e in _protocol_exprs(kernel)
                  for s in free_symbols(e))
    if not depends:
        return [(0, 0, 0)]
    return [cta for cta, _ in keyed_ctas(kernel, sizes)]


def keyed_ctas(kernel: LoweredKernel, sizes: Mapping[str, int]
               ) -> list[tuple[tuple[int, int, int], bytes | None]]:
    """`ctas` with the key of each one's class (None: not classified): CTAs of equal keys,
    of any sizes, unroll into equal programs, so one execution decides them all."""
    if not any(s.startswith("block:") for e in _protocol_exprs(kernel)
               for s in free_symbols(e)):
        return [((0, 0, 0), None)]
    sample = edge_ctas(kernel, sizes)
    found = cta_classes.classify(kernel, sizes, sample,
                                 kernel.cluster if cluster.cross_cta(kernel) else None)
    return [(c, None) for c in sample] if found is None else found


def classified(kernel: LoweredKernel, sizes: Mapping[str, int]) -> bool:
    """Are the CTAs of `ctas` every class (not a sample past the bounds)?"""
    depends = any(s.startswith("block:") for e in _protocol_exprs(kernel)
                  for s in free_symbols(e))
    if not depends:
        return True
    try:
        cta_classes.signatures(kernel, sizes)
    except (cta_classes.TooLarge, EvalError):
        return False
    return True


def edge_ctas(kernel: LoweredKernel, sizes: Mapping[str, int]) -> list[tuple[int, int, int]]:
    """The first, the second-to-last and the last CTA along each grid axis."""
    dims = []
    env = Env(sizes=sizes)
    for axis in range(3):
        try:
            g = evaluate(kernel.grid[axis], env) if axis < len(kernel.grid) else 1
        except EvalError:
            g = 1
        g = max(g, 1)
        dims.append(sorted({0, max(g - 2, 0), g - 1}))
    return [tuple(c) for c in itertools.product(*dims)]  # type: ignore[misc]


# ---- the analysis ---------------------------------------------------------------------


def analyze(kernel: LoweredKernel, shapes: list[dict[str, int]],
            bounds: Bounds = Bounds(),
            only: list[tuple[dict[str, int], tuple[int, int, int]]] | None = None,
            derive: Callable[[dict[str, int]], dict[str, int]] | None = None
            ) -> ProtocolResult:
    """Analyse the kernel under every check shape, its ragged variant and every CTA that
    differs; programs with identical behaviour are executed once. `only`: just these
    (sizes, CTA) programs (a quick first check of a repair)."""
    fp = Footprints(kernel)
    builder = Builder(kernel, fp, symmetry=bounds.symmetry)
    full = Builder(kernel, fp, symmetry=False) if builder.symmetries else None
    result = ProtocolResult(kernel=kernel, footprints=fp)
    odd = [b.name for b in kernel.barriers if not 1 <= b.count <= ARRIVAL_LIMIT]
    if odd:  # the hardware rules reject these; the protocol has no defined meaning
        result.incomplete.append(f"barrier arrival count outside 1..{ARRIVAL_LIMIT}: "
                                 f"{', '.join(odd)}")
        return result
    all_shapes: list[dict[str, int]] = []
    for shape in shapes or [dict(kernel.sizes)]:
        for s in (dict(shape), ragged(kernel, shape)):
            if s is not None and s not in all_shapes:
                all_shapes.append(s)
    for s in list(all_shapes):  # persistent kernels: a CTA that walks several tiles
        more = persistent(kernel, s, derive=derive)
        if more is not None and more not in all_shapes:
            all_shapes.append(more)
    seen: set[int] = set()
    found: dict[tuple, Anomaly] = {}
    pairs: list[tuple[dict[str, int], tuple[int, int, int], bytes | None]] = \
        [(s, c, None) for s, c in only] if only is not None else \
        [(s, c, k) for s in all_shapes for c, k in keyed_ctas(kernel, s)]
    classes: set[bytes] = set()
    for sizes, cta, key in pairs:
        if key is not None:  # a class of CTAs already executed (for other sizes)
            if key in classes:
                continue
            classes.add(key)
        if len(result.runs) >= bounds.max_runs:
            result.incomplete.append(f"more than {bounds.max_runs} distinct programs "
                                     "(shapes x CTAs)")
            break
        marks = len(result.incomplete), len(result.unforced)
        before = set(seen) if full is not None else seen
        run = _run(builder, fp, kernel, sizes, cta, bounds, seen, result)
        reportable = run is not None and (bool(run.outcome.anomalies)
                                          or not run.outcome.complete)
        if full is not None and (len(result.incomplete) > marks[0] or reportable):
            # Symmetry stands only for a clean, complete run: a program with anything to
            # report is executed again with every warpgroup its own model thread, so
            # findings, witnesses and bounds are those of the unreduced analysis.
            del result.incomplete[marks[0]:], result.unforced[marks[1]:]
            seen.intersection_update(before)  # the reduced run's keys (a cluster's origin)
            run = _run(full, fp, kernel, sizes, cta, bounds, seen, result)
        elif run is not None and builder.symmetries:
            run.reduced = True
        if run is None:
            continue
        result.runs.append(run)
        for anomaly in run.outcome.anomalies:
            found.setdefault(anomaly.key, anomaly)
    result.anomalies = list(found.values())
    if any(run.reduced for run in result.runs):
        result.reductions = symmetry_notes(builder.symmetries)
    return result


def _build(builder: Builder, sizes, cta, cut, limit: int) -> Program:
    if builder.estimate(sizes, cta, cut, limit) > limit:
        raise UnrollError(f"more than {limit} events after unrolling (and no sound window "
                          "shortens the loops)")
    return builder.build(sizes, cta, cut, limit)


def _run(builder: Builder, fp: Footprints, kernel: LoweredKernel, sizes: dict[str, int],
         cta: tuple[int, int, int], bounds: Bounds, seen: set[int],
         result: ProtocolResult) -> Run | None:
    where = ", ".join(f"{k}={v}" for k, v in sizes.items())
    clustered = cluster.cross_cta(kernel)  # every CTA of the cluster in one program
    if clustered:
        cta = cluster.members(kernel, cta)[0]
        origin = ("origin", tuple(sorted(sizes.items())), cta)
        if origin in seen:  # another CTA of a cluster already analysed
            return None
        seen.add(origin)
    try:
        cut = plan(kernel, sizes, cta) if bounds.window and not clustered else {}
    except (EvalError, UnrollError):
        cut = {}
    try:
        if clustered:
            if cluster.estimate(builder, sizes, cta, bounds.max_events) > bounds.max_events:
                raise UnrollError(f"more than {bounds.max_events} events after unrolling "
                                  "the cluster")
            joined = cluster.build(builder, sizes, cta, bounds.max_events, seen)
            if joined is None:
                return None
            program = joined
        else:
            program = _build(builder, sizes, cta, cut, bounds.max_events)
        if cut and not consistent(program):
            cut = {}
            program = _build(builder, sizes, cta, cut, bounds.max_events)
    except UnrollError as exc:
        result.incomplete.append(f"cannot unroll for {where}, CTA {cta}: {exc}")
        return None
    if not clustered:  # cluster.build deduplicated the cluster by its CTAs' signatures
        key = hash(program.signature())
        if key in seen:
            return None
        seen.add(key)
    try:
        outcome = execute(program, fp, 4 * bounds.max_events)
        spliced = bool(cut)
        if spliced and outcome.anomalies:
            try:  # an anomaly is reported from the whole loop when it fits the bound
                full = _build(builder, sizes, cta, {}, bounds.max_confirm_events)
                program, outcome, spliced = \
                    full, execute(full, fp, 4 * bounds.max_confirm_events), False
            except UnrollError:
                pass
        if outcome.complete and unforced_only(outcome):
            outcome = _other_executions(program, fp, bounds, outcome, where, cta, result)
    except TooLarge as exc:
        result.incomplete.append(f"execution for {where}, CTA {cta}: {exc}")
        return None
    if not outcome.complete:
        result.incomplete.append(f"execution for {where}, CTA {cta}: {outcome.reason}")
    return Run(sizes=dict(sizes), cta=cta, program=program, outcome=outcome, spliced=spliced)


def _other_executions(program: Program, fp: Footprints, bounds: Bounds, first: Outcome,
                      where: str, cta: tuple[int, int, int], result: ProtocolResult
                      ) -> Outcome:
    """The canonical execution found only unforced phase attributions: an arrival can
    land in another phase than the one it did, so other executions need not make its
    choices. Run the program again under other schedules (every order of its threads, up
    to `bounds.max_orders`, as a sequence and as a strict priority, each with copies
    landing late and as soon as issued) and take the first execution that reaches a
    defect. When none does, the attribution stands as an unproven choice: the result is
    incomplete, never clean, and nothing is rejected."""
    n = len(program.threads)
    orders = itertools.islice(itertools.permutations(range(n)), bounds.max_orders)
    for order in orders:
        for priority, eager in itertools.product((False, True), repeat=2):
            if order == tuple(range(n)) and not (priority or eager):
                continue  # the canonical execution
            other = execute(program, fp, 4 * bounds.max_events, order, eager, priority)
            if other.complete and other.anomalies and not unforced_only(other):
                return other
    soft = "; ".join(a.message for a in first.anomalies[:2])
    result.unforced.append(
        f"phase attribution not forced for {where}, CTA {cta}: {soft}; none of the "
        f"executions tried ({min(math.factorial(n), bounds.max_orders)} thread orders as "
        "sequences and as priorities, copies landing late and early) shows a deadlock, "
        "race or other defect")
    result.incomplete.append(result.unforced[-1])
    return Outcome(first.program, [], first.steps, True, "", first.observed)

