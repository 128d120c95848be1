"""Which iterations of a long loop the protocol analysis may leave out, and why that is
sound (docs/checker.md, "The iteration window").

For one set of sizes and one CTA, every loop instance gets a *signature* per iteration:
the values, for that iteration, of every expression that reaches the protocol (barrier
indices, parities, transaction bytes, shared-memory stages, the bounds of inner loops and
everything inside them), evaluated with numpy over all iterations at once. Nothing is
assumed about the form of those expressions (`%`, `//`, `lm.min`, comparisons, nested
loops are all just evaluated). A loop instance is periodic with period `p` on the
iterations `[a, b)` when its signatures there repeat every `p` iterations.

A splice plan removes, at one loop depth, the same range of loop-variable values `[lo,
hi)` from every loop instance at that depth: a whole number of periods of each instance,
inside the periodic part of every instance it touches, at least `margin` iterations from
the ends of that part (a margin of one period plus the deepest ring, so that every
pattern of lag between roles that the removed iterations had still occurs in the kept
ones). The spliced program is then the original with whole periods cut from the middle
of each loop: the same stages, parities and bytes in the same order, a shorter run.
Program.removed counts the barrier operations removed per slot; `consistent` checks that
they remove an even number of whole phases of every slot and the same share of every
thread's waits, so the phase arithmetic after the cut is the original's. When a loop is
not periodic, or the check fails, no iteration is removed."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from math import gcd

import numpy as np

from cakegov.analysis.grid import vec_eval
from cakegov.analysis.program import Program
from cakegov.ir.expr import Const, EvalError, Expr, step_expr
from cakegov.lower.kernel import (
    LArrive,
    LCompute,
    LCopy,
    LFor,
    LInit,
    LOp,
    LoweredKernel,
    LWait,
)

MAX_PERIOD = 64  # longest period looked for in one loop
MAX_PLAN_PERIOD = 256  # longest common period a plan may use
MIN_TRIPS = 12  # loops shorter than this are never spliced
MAX_GRID = 1 << 21  # values evaluated at once for one loop's signatures
MAX_INSTANCES = 256  # loop instances at one depth a plan may look at
MAX_TRIPS = 1 << 17  # longest loop whose iterations are compared
MAX_VISITS = 1 << 16  # outer iterations a plan may walk to find the loops at one depth


@dataclass(frozen=True)
class Periodic:
    """Loop instance signatures repeat every `period` iterations on values [lo, hi)."""

    lo: int
    hi: int
    period: int


def _exprs(op: LOp) -> list[Expr]:
    """The expressions of one (non-loop) op that reach the protocol."""
    if isinstance(op, LWait):
        return [op.index, op.parity]
    if isinstance(op, LArrive):
        return [op.index, op.tx]
    if isinstance(op, LCopy):
        return [op.stage, op.barrier_index]
    if isinstance(op, LInit):
        return [op.index]
    if isinstance(op, LCompute):
        return [a.stage for a in (*op.reads, *op.writes) if a.stage is not None]
    return []


def signatures(loop: LFor, sizes: Mapping[str, int], outer: Mapping[str, int],
               blocks: Mapping[int, int], values: np.ndarray) -> np.ndarray:
    """One int64 hash per iteration in `values` of everything the iteration does that
    reaches the protocol. Inner loops are evaluated on a grid with one axis per loop
    (their bounds must not vary with the iteration, else _NotPeriodic)."""
    n = len(values)
    cols: list[np.ndarray] = []

    def visit(ops: tuple[LOp, ...], vars_: dict, shape: tuple[int, ...]) -> None:
        for op in ops:
            if isinstance(op, LFor):
                bounds = []
                for expr in (op.start, op.stop):
                    arr = np.broadcast_to(np.asarray(vec_eval(expr, sizes, vars_, blocks, {}),
                                                     dtype=np.int64), shape)
                    if arr.size and (arr != arr.flat[0]).any():
                        raise _NotPeriodic()
                    bounds.append(int(arr.flat[0]) if arr.size else 0)
                step = np.broadcast_to(np.asarray(vec_eval(step_expr(op.step), sizes, vars_,
                                                           blocks, {}), dtype=np.int64), shape)
                if step.size and ((step != step.flat[0]).any() or step.flat[0] <= 0):
                    raise _NotPeriodic()
                inner = np.arange(bounds[0], bounds[1], int(step.flat[0]) if step.size else 1,
                                  dtype=np.int64)
                cols.append(np.full(n, len(inner), dtype=np.int64))
                if len(inner) == 0:
                    continue
                if math.prod(shape) * len(inner) > MAX_GRID:
                    raise _NotPeriodic()  # too large to compare: no window
                deeper = {k: (v[..., None] if isinstance(v, np.ndarray) else v)
                          for k, v in vars_.items()}
                deeper[op.var] = inner.reshape((1,) * len(shape) + (len(inner),))
                visit(op.body, deeper, (*shape, len(inner)))
                continue
            for expr in _exprs(op):
                if isinstance(expr, Const):
                    continue
                arr = np.broadcast_to(np.asarray(vec_eval(expr, sizes, vars_, blocks, {}),
                                                 dtype=np.int64), shape)
                cols.append(_row_hash(arr.reshape(n, -1)))

    visit(loop.body, {**outer, loop.var: values}, (n,))
    if not cols:
        return np.zeros(n, dtype=np.int64)
    return _row_hash(np.stack(cols, axis=1))


class _NotPeriodic(Exception):
    pass


def _row_hash(matrix: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each row (collisions only make loops look less periodic)."""
    m = np.ascontiguousarray(matrix.astype(np.int64))
    if m.ndim == 1:
        return m
    if m.shape[1] == 1:
        return m[:, 0].copy()
    h = np.full(m.shape[0], np.int64(0x345678), dtype=np.int64)
    with np.errstate(over="ignore"):
        for k in range(m.shape[1]):
            h = (h * np.int64(1000003)) ^ m[:, k]
    return h


def periodic(sig: np.ndarray, values: np.ndarray) -> Periodic | None:
    """The longest stretch of `sig` that repeats with one period (<= MAX_PERIOD)."""
    n = len(sig)
    best: tuple[int, int, int] | None = None  # (length, -period, start)
    for p in range(1, min(MAX_PERIOD, n // 3) + 1):
        eq = sig[p:] == sig[:-p]
        if not eq.any():
            continue
        # longest run of True
        padded = np.concatenate(([False], eq, [False]))
        edges = np.flatnonzero(padded[1:] != padded[:-1])
        runs = edges[1::2] - edges[::2]
        k = int(np.argmax(runs))
        length = int(runs[k]) + p
        cand = (length, -p, int(edges[2 * k]))
        if best is None or cand[:2] > best[:2]:
            best = cand
        if length >= n - 2:
            break
    if best is None or best[0] < 3 * -best[1]:
        return None
    length, neg, start = best
    return Periodic(int(values[start]), int(values[start]) + length, -neg)


class _TooMany(Exception):
    """The loops at one depth lie under more outer iterations than MAX_VISITS."""


def _has_loop(ops: tuple[LOp, ...]) -> bool:
    return any(isinstance(op, LFor) for op in ops)


@dataclass(frozen=True)
class Instance:
    loop: LFor
    outer: dict[str, int]
    values: range


def _instances(ops: tuple[LOp, ...], depth: int, target: int, outer: dict[str, int],
               sizes: Mapping[str, int], blocks: Mapping[int, int],
               plan: Mapping[int, tuple[int, int]], out: list[Instance],
               budget: list[int] | None = None) -> None:
    """The loop instances at depth `target` under `ops`, appended to `out` (at most
    MAX_INSTANCES + 1). Only loops that contain deeper loops are walked, and at most
    MAX_VISITS of their iterations in all (`budget`), else _TooMany: an outer loop of a
    billion iterations is never walked one value at a time."""
    from cakegov.ir.expr import Env, evaluate

    if budget is None:
        budget = [MAX_VISITS]

    env = Env(sizes=sizes, vars=outer, blocks=blocks)
    for op in ops:
        if not isinstance(op, LFor):
            continue
        try:
            step = evaluate(step_expr(op.step), env)
            if step <= 0:
                continue
            values = range(evaluate(op.start, env), evaluate(op.stop, env), step)
        except EvalError:
            continue
        if depth == target:
            out.append(Instance(op, dict(outer), values))
            if len(out) > MAX_INSTANCES:
                return
            continue
        if not _has_loop(op.body):
            continue
        cut = plan.get(depth)
        for v in values:
            if len(out) > MAX_INSTANCES:
                return
            if cut is not None and cut[0] <= v < cut[1]:
                continue
            budget[0] -= 1
            if budget[0] < 0:
                raise _TooMany()
            _instances(op.body, depth + 1, target, {**outer, op.var: v}, sizes, blocks,
                       plan, out, budget)


def plan(kernel: LoweredKernel, sizes: Mapping[str, int], cta: tuple[int, int, int],
         max_depth: int = 4) -> dict[int, tuple[int, int]]:
    """The splice plan for one set of sizes and one CTA: depth -> removed value range.
    A kernel with running counters (cakegov/ir/persistent.py) is not spliced: the counters
    after a cut would have to advance by the removed iterations, which the builder does
    not do; such kernels are unrolled in full (or are `incomplete` past the bound)."""
    if any(role.counters for role in kernel.roles):
        return {}
    blocks = {0: cta[0], 1: cta[1], 2: cta[2]}
    ring = max([b.stages for b in kernel.barriers] + [b.stages for b in kernel.buffers]
               + [1])
    result: dict[int, tuple[int, int]] = {}
    for depth in range(max_depth):
        found: list[Instance] = []
        try:
            for role in kernel.roles:
                _instances(role.body, 0, depth, {}, sizes, blocks, result, found)
        except _TooMany:
            break
        if not found:
            break
        if len(found) > MAX_INSTANCES:
            break
        cut = _depth_plan(found, sizes, blocks, ring)
        if cut is not None:
            result[depth] = cut
    return result


def _depth_plan(found: list[Instance], sizes, blocks, ring: int) -> tuple[int, int] | None:
    long = [i for i in found if len(i.values) >= MIN_TRIPS and i.values.step == 1]
    if not long or any(len(i.values) > MAX_TRIPS for i in long):
        return None  # too long to compare iteration by iteration: no window
    periods: list[Periodic] = []
    for inst in long:
        values = np.arange(inst.values.start, inst.values.stop, dtype=np.int64)
        try:
            sig = signatures(inst.loop, sizes, inst.outer, blocks, values)
        except (_NotPeriodic, EvalError):
            return None
        per = periodic(sig, values)
        if per is None:
            return None
        periods.append(per)
    common = 1
    for per in periods:
        common = common * per.period // gcd(common, per.period)
        if common > MAX_PLAN_PERIOD:
            return None
    lo = max(p.lo for p in periods)
    hi = min(p.hi for p in periods)
    margin = -(-(common + ring) // common) * common
    m = (hi - lo - 2 * margin) // common
    if m < 1:
        return None
    cut = (lo + margin, lo + margin + m * common)
    for inst in found:  # every instance the cut touches must contain it
        v = inst.values
        if v.stop <= cut[0] or v.start >= cut[1]:
            continue
        if not (v.step == 1 and v.start <= cut[0] and cut[1] <= v.stop and inst in long):
            return None
    for inst, per in zip(long, periods, strict=True):
        if inst.values.start < cut[1] and cut[0] < inst.values.stop and \
                not (per.lo <= cut[0] and cut[1] <= per.hi):
            return None
    return cut


def consistent(program: Program) -> bool:
    """Do the removed barrier operations remove whole, even numbers of phases of every
    slot, and the same share of every thread's waits and copies on it?"""
    if not program.removed:
        return True
    kept: dict[tuple[int, int, str], int] = {}
    for t in program.threads:
        for ev in t.events:
            if ev.kind in ("wait", "arrive", "copy"):
                key = (t.index, ev.slot, ev.kind)
                kept[key] = kept.get(key, 0) + (ev.n if ev.kind == "arrive" else 1)
    slots = {s for _, s, _ in program.removed}
    for slot in slots:
        count = program.slot_count[slot]
        arr_rem = sum(v for (_, s, k), v in program.removed.items()
                      if s == slot and k == "arrive")
        arr_tot = arr_rem + sum(v for (_, s, k), v in kept.items()
                                if s == slot and k == "arrive")
        if arr_rem % max(count, 1) or (arr_rem // max(count, 1)) % 2:
            return False
        users = {(t, k) for (t, s, k) in (*program.removed, *kept) if s == slot
                 and k in ("wait", "copy")}
        for t, k in users:
            rem = program.removed.get((t, slot, k), 0)
            tot = rem + kept.get((t, slot, k), 0)
            if rem * arr_tot != arr_rem * tot:
                return False
    return True
