"""Grid coverage of output tensors: how many times every element of an output is written
by the stores of all CTAs, evaluated with numpy for concrete workload sizes.

Each store writes the tile of its source operand at `at`; `at` is an index expression
over the CTA index (`lm.block(axis)`), loop variables and sizes. The CTA indices of the
whole grid are evaluated at once as numpy vectors (one entry per CTA), once per
combination of enclosing loop values, and the tiles are accumulated into a coverage
count with a difference array (2^d corner updates per tile, then a cumulative sum per
axis), on the output's index space compressed to the tile boundaries (coordinate compression),
so the cost grows with the number of tiles, not with the size of the output."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cakegov.analysis.arrays import unique_sorted
from cakegov.ir.expr import (
    BinOp,
    Block,
    Compare,
    Const,
    Counter,
    EvalError,
    Expr,
    Size,
    StageOf,
    Var,
    free_symbols,
    step_expr,
)
from cakegov.ir.nodes import For
from cakegov.lazy import LazyModule

if TYPE_CHECKING:
    import numpy as np
else:  # numpy loads when a grid is first evaluated, not when the rule is loaded
    np = LazyModule("numpy")

MAX_ELEMENTS = 1 << 26  # outputs larger than this are not counted (see `choose_shapes`)
MAX_TILES = 1 << 20  # tiles per store and shape

Value = "np.ndarray | int"  # a string: naming np.ndarray here would import numpy


def vec_eval(expr: Expr, sizes: Mapping[str, int], vars_: Mapping[str, int],
             blocks: Mapping[int, np.ndarray], stages: Mapping[str, int]) -> Value:
    """`expr` with the CTA index as numpy vectors (elementwise integer arithmetic)."""
    if isinstance(expr, Const):
        return expr.value
    if isinstance(expr, Size):
        if expr.name not in sizes:
            raise EvalError(f"workload size {expr.name} has no value")
        return sizes[expr.name]
    if isinstance(expr, Var | Counter):  # counters travel with the loop variables
        if expr.name not in vars_:
            raise EvalError(f"{'loop variable' if isinstance(expr, Var) else 'counter'} "
                            f"{expr.name} has no value")
        return vars_[expr.name]
    if isinstance(expr, Block):
        return blocks[expr.axis]
    if isinstance(expr, StageOf):
        return vec_eval(expr.iter, sizes, vars_, blocks, stages) % stages[expr.pipeline]
    if isinstance(expr, Compare):
        a = vec_eval(expr.lhs, sizes, vars_, blocks, stages)
        b = vec_eval(expr.rhs, sizes, vars_, blocks, stages)
        ops = {"==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal,
               ">": np.greater, ">=": np.greater_equal}
        return np.asarray(ops[expr.op](a, b), dtype=np.int64)
    if isinstance(expr, BinOp):
        a = vec_eval(expr.lhs, sizes, vars_, blocks, stages)
        b = vec_eval(expr.rhs, sizes, vars_, blocks, stages)
        if expr.op == "+":
            return a + b
        if expr.op == "-":
            return a - b
        if expr.op == "*":
            return a * b
        if expr.op in ("//", "%", "cdiv") and np.any(np.asarray(b) == 0):
            raise EvalError("division by zero")
        if expr.op == "//":
            return a // b
        if expr.op == "%":
            return a % b
        if expr.op == "cdiv":
            return -(-a // b)
        if expr.op == "min":
            return np.minimum(a, b)
        if expr.op == "max":
            return np.maximum(a, b)
    raise EvalError(f"cannot evaluate {expr!r}")


@dataclass(frozen=True)
class Store:
    """One store of a tile into an output tensor."""

    path: str
    line: int
    role: str
    tensor: str
    at: tuple[Expr, ...]
    tile: tuple[int, ...]
    masked: bool
    loops: tuple[For, ...]

    def block_axes(self) -> set[int]:
        return {int(s[6:]) for e in self.at for s in free_symbols(e) if s.startswith("block:")}


@dataclass
class Tiles:
    """Every tile one store writes for one shape: origins (n, d) and CTA indices (n, 3)."""

    store: Store
    origins: np.ndarray
    ctas: np.ndarray


def tiles(store: Store, sizes: Mapping[str, int], grid: Sequence[int],
          stages: Mapping[str, int]) -> Tiles | None:
    """The tiles `store` writes over the whole grid, or None past the bounds. The loops
    around the store are expanded for every CTA at once, so a loop whose bounds depend on
    the CTA (a persistent tile loop) runs its own trip count in each CTA."""
    dims = [max(g, 0) for g in (*grid, 1, 1, 1)[:3]]
    if dims[0] * dims[1] * dims[2] > MAX_TILES:
        return None  # too many CTAs to count tile by tile: the shape is skipped
    ctas = np.array(list(itertools.product(*(range(g) for g in dims))), dtype=np.int64)
    if len(ctas) == 0:
        return Tiles(store, np.zeros((0, len(store.at)), np.int64), np.zeros((0, 3), np.int64))
    rows = np.arange(len(ctas))  # the CTA of every (CTA, loop iteration) row
    env: dict[str, Value] = {}
    for loop in store.loops:
        blocks = {a: ctas[rows, a] for a in range(3)}
        n = len(rows)
        start, stop, step = (np.broadcast_to(np.asarray(vec_eval(e, sizes, env, blocks, stages),
                                                        dtype=np.int64), (n,))
                             for e in (loop.start, loop.stop, step_expr(loop.step)))
        if n and (step <= 0).any():
            raise EvalError(f"{loop.path}: the loop step is not positive")
        trips = np.maximum(0, -(-(stop - start) // np.maximum(step, 1)))
        total = int(trips.sum())
        if total > MAX_TILES:
            return None
        owner = np.repeat(np.arange(n), trips)
        offset = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(trips) - trips, trips)
        env = {k: (np.asarray(v)[owner] if isinstance(v, np.ndarray) else v)
               for k, v in env.items()}
        env[loop.var] = start[owner] + offset * step[owner]
        rows = rows[owner]
    blocks = {a: ctas[rows, a] for a in range(3)}
    cols = [np.broadcast_to(np.asarray(vec_eval(e, sizes, env, blocks, stages),
                                       dtype=np.int64), (len(rows),)) for e in store.at]
    origins = np.stack(cols, axis=1) if cols else np.zeros((len(rows), 0), np.int64)
    return Tiles(store, origins, ctas[rows])


@dataclass
class Coverage:
    """How many times each cell of a compressed grid over one tensor is written: cell
    `(i, j, ...)` spans `edges[0][i]..edges[0][i+1]` x `edges[1][j]..` ... Every tile
    boundary is an edge, so the count is constant on each cell."""

    edges: list[np.ndarray]
    counts: np.ndarray

    def cells(self, mask: np.ndarray) -> tuple[int, tuple[int, ...] | None]:
        """Elements in the cells selected by `mask`, and the first such element."""
        picked = np.argwhere(mask)
        if len(picked) == 0:
            return 0, None
        sizes = [np.diff(e) for e in self.edges]
        volume = np.ones(len(picked), dtype=np.int64)
        for axis, widths in enumerate(sizes):
            volume *= widths[picked[:, axis]]
        first = tuple(int(self.edges[a][picked[0][a]]) for a in range(len(self.edges)))
        return int(volume.sum()), first

    def at(self, element: Sequence[int]) -> int:
        idx = tuple(int(np.searchsorted(e, x, side="right")) - 1
                    for e, x in zip(self.edges, element, strict=True))
        return int(self.counts[idx])


def count(dims: Sequence[int], parts: Sequence[Tiles]) -> Coverage:
    """How many times each element of a tensor of shape `dims` is written, on the grid
    compressed to the tiles' boundaries (a difference array over cells, 2^d corner
    updates per tile, then a cumulative sum per axis)."""
    d = len(dims)
    upper = np.array(dims, dtype=np.int64)
    los, his = [], []
    for part in parts:
        if len(part.origins) == 0:
            continue
        lo = np.clip(part.origins, 0, upper)
        hi = np.clip(part.origins + np.array(part.store.tile, dtype=np.int64), 0, upper)
        keep = np.all(hi > lo, axis=1)
        los.append(lo[keep])
        his.append(hi[keep])
    lo = np.concatenate(los) if los else np.zeros((0, d), np.int64)
    hi = np.concatenate(his) if his else np.zeros((0, d), np.int64)
    edges = [unique_sorted(np.concatenate(([0, dims[a]], lo[:, a], hi[:, a])))
             for a in range(d)]
    diff = np.zeros([len(e) for e in edges], dtype=np.int64)
    lo_i = [np.searchsorted(edges[a], lo[:, a]) for a in range(d)]
    hi_i = [np.searchsorted(edges[a], hi[:, a]) for a in range(d)]
    for corner in itertools.product((0, 1), repeat=d):
        idx = tuple(hi_i[a] if c else lo_i[a] for a, c in enumerate(corner))
        np.add.at(diff, idx, -1 if sum(corner) % 2 else 1)
    for axis in range(d):
        diff = np.cumsum(diff, axis=axis)
    return Coverage(edges, diff[tuple(slice(0, len(e) - 1) for e in edges)])


def writers(element: Sequence[int], parts: Sequence[Tiles]) -> list[tuple[Store, tuple]]:
    """The (store, CTA) pairs whose tile contains `element`."""
    out = []
    point = np.array(element, dtype=np.int64)
    for part in parts:
        if len(part.origins) == 0:
            continue
        inside = np.all((part.origins <= point) &
                        (point < part.origins + np.array(part.store.tile)), axis=1)
        for row in np.nonzero(inside)[0][:4]:
            out.append((part.store, tuple(int(x) for x in part.ctas[row])))
    return out


def out_of_bounds(dims: Sequence[int], part: Tiles) -> tuple[tuple, tuple] | None:
    """An (origin, CTA) of a tile of `part` that reaches outside the tensor, or None."""
    if len(part.origins) == 0:
        return None
    upper = np.array(dims, dtype=np.int64)
    bad = np.any((part.origins < 0) | (part.origins + np.array(part.store.tile) > upper),
                 axis=1)
    rows = np.nonzero(bad)[0]
    if len(rows) == 0:
        return None
    row = rows[0]
    return (tuple(int(x) for x in part.origins[row]), tuple(int(x) for x in part.ctas[row]))


def choose_shapes(shapes: Sequence[Mapping[str, int]], dims: Sequence[str]
                  ) -> list[dict[str, int]]:
    """Check shapes whose output has at most MAX_ELEMENTS elements; the smallest one if
    none does (every defect the corpus seeds shows on the small and the ragged shapes)."""
    def size(shape: Mapping[str, int]) -> int:
        n = 1
        for d in dims:
            n *= shape.get(d, 1)
        return n

    small = [dict(s) for s in shapes if size(s) <= MAX_ELEMENTS]
    if small or not shapes:
        return small
    return [dict(min(shapes, key=size))]
