"""Which CTAs the protocol analysis (and the simulator's sample) must execute: one CTA
of every class of CTAs whose protocol is the same (docs/checker.md, "Tails and every
CTA").

For one set of sizes, every CTA of the grid gets a *protocol signature*: a 128-bit hash
of everything its unrolled roles do that reaches the protocol, in program order — the
trip count of every loop instance, and for every barrier operation, copy and
shared-memory access the values of its barrier index, parity, transaction bytes, stage,
multicast mask and target CTA. Two CTAs with the same signature unroll into the same
program (the structure of an unrolled role is fixed by its trip counts, and every value
the program holds is one of those expressions), so executing one of them decides the
other. The signatures of all CTAs are computed at once with numpy, one row per (CTA,
iteration), as `Builder.estimate` counts events, so a grid of thousands of CTAs costs a
few array operations per statement.

Running counters (cakegov/ir/persistent.py) are evaluated exactly: a counter's value at
an iteration is its value when the loop started plus the increments of the earlier
iterations of the same instance (a segmented prefix sum), and the increments of an
iteration never depend on counter values because a counter cannot bound a loop.

A kernel whose CTAs touch each other's shared memory is analysed a cluster at a time; its
classes are classes of clusters (the signatures of the cluster's CTAs, rank by rank).

Bounds: grids of more than MAX_GRID CTAs, or more than MAX_ROWS rows at one loop level,
are not classified (`classes` returns None and the caller falls back to its sample and
says so)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from cakegov.analysis.grid import vec_eval
from cakegov.ir.expr import Env, EvalError, Expr, evaluate, step_expr
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

MAX_GRID = 1 << 16
MAX_ROWS = 1 << 22

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_SEEDS = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xD1B54A32D192ED03))


class TooLarge(Exception):
    """The grid or its unrolled iterations exceed the bounds."""


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, elementwise on uint64."""
    with np.errstate(over="ignore"):
        x = x ^ (x >> np.uint64(30))
        x = x * _M1
        x = x ^ (x >> np.uint64(27))
        x = x * _M2
        return x ^ (x >> np.uint64(31))


def protocol_exprs(op: LOp) -> list[Expr]:
    """Every expression of one (non-loop) op whose value reaches the protocol."""
    if isinstance(op, LWait):
        return [op.index, op.parity]
    if isinstance(op, LArrive):
        return [op.index, op.tx] + ([op.cta] if op.cta is not None else [])
    if isinstance(op, LCopy):
        return [op.stage, op.barrier_index] + ([op.multicast] if op.multicast is not None
                                               else [])
    if isinstance(op, LInit):
        return [op.index]
    if isinstance(op, LCompute):
        return [a.stage for a in (*op.reads, *op.writes) if a.stage is not None]
    return []


def grid_of(kernel: LoweredKernel, sizes: Mapping[str, int]) -> tuple[int, int, int]:
    env = Env(sizes=sizes)
    dims = []
    for axis in range(3):
        try:
            g = evaluate(kernel.grid[axis], env) if axis < len(kernel.grid) else 1
        except EvalError:
            g = 1
        dims.append(max(int(g), 1))
    return dims[0], dims[1], dims[2]


class _Walk:
    """Unrolls every role of one kernel over all CTAs at once (rows sorted by CTA)."""

    def __init__(self, kernel: LoweredKernel, sizes: Mapping[str, int],
                 dims: tuple[int, int, int]):
        self.kernel = kernel
        self.sizes = sizes
        self.n = dims[0] * dims[1] * dims[2]
        c = np.arange(self.n, dtype=np.int64)
        self.coords = (c % dims[0], (c // dims[0]) % dims[1], c // (dims[0] * dims[1]))
        self.sig = np.zeros((self.n, 2), dtype=np.uint64)
        # every statement's number in program order, the same for every set of sizes
        # (class keys are compared across shapes)
        self.ids: dict[int, int] = {}

        def number(ops: tuple[LOp, ...]) -> None:
            for op in ops:
                self.ids[id(op)] = len(self.ids) + 1
                if isinstance(op, LFor):
                    number(op.body)

        for role in kernel.roles:
            number(role.body)

    def op_id(self, op: LOp) -> int:
        return self.ids[id(op)]

    def blocks(self, cta: np.ndarray) -> dict[int, np.ndarray]:
        return {a: self.coords[a][cta] for a in range(3)}

    def eval(self, expr: Expr, cta: np.ndarray, vars_: Mapping[str, object]) -> np.ndarray:
        value = vec_eval(expr, self.sizes, vars_, self.blocks(cta), {})
        return np.broadcast_to(np.asarray(value, dtype=np.int64), cta.shape)

    def add(self, op: LOp, cta: np.ndarray, values: list[np.ndarray]) -> None:
        """Fold (op, its ordinal within the CTA, values) of every row into its CTA."""
        if len(cta) == 0:
            return
        first = np.searchsorted(cta, cta, side="left")
        ordinal = np.arange(len(cta), dtype=np.int64) - first
        starts = np.flatnonzero(np.concatenate(([True], cta[1:] != cta[:-1])))
        with np.errstate(over="ignore"):
            for lane, seed in enumerate(_SEEDS):
                h = _mix(np.full(len(cta), seed * np.uint64(self.op_id(op)), dtype=np.uint64)
                         ^ ordinal.astype(np.uint64))
                for k, v in enumerate(values):
                    h = _mix(h ^ (v.astype(np.uint64) + np.uint64(k + 1) * seed))
                self.sig[cta[starts], lane] += np.add.reduceat(h, starts)

    def expand(self, op: LFor, cta: np.ndarray, vars_: dict[str, object]):
        """The rows of the iterations of loop `op` run by each row: (trips per row, owner
        row, the inner rows' CTAs and variables)."""
        start = self.eval(op.start, cta, vars_)
        stop = self.eval(op.stop, cta, vars_)
        step = self.eval(step_expr(op.step), cta, vars_)
        if len(step) and (step <= 0).any():
            raise TooLarge(f"{op.path}: a loop step is not positive")
        trips = np.maximum(0, -(-(stop - start) // np.maximum(step, 1)))
        total = int(trips.sum())
        if total > MAX_ROWS:
            raise TooLarge(f"{op.path}: more than {MAX_ROWS} iterations over all CTAs")
        owner = np.repeat(np.arange(len(cta)), trips)
        offset = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(trips) - trips, trips)
        inner = {k: (v[owner] if isinstance(v, np.ndarray) else v) for k, v in vars_.items()}
        inner[op.var] = start[owner] + offset * step[owner]
        return trips, owner, cta[owner], inner

    def increments(self, ops: tuple[LOp, ...], cta: np.ndarray, vars_: dict[str, object],
                   names: list[str]) -> dict[str, np.ndarray]:
        """How much one execution of `ops` advances each counter, per row."""
        out = {c: np.zeros(len(cta), dtype=np.int64) for c in names}
        for op in ops:
            if not isinstance(op, LFor) or not _advances(op):
                continue
            _trips, owner, inner_cta, inner = self.expand(op, cta, vars_)
            if len(owner) == 0:
                continue
            each = self.increments(op.body, inner_cta, inner, names)
            if op.counter:
                each[op.counter] = each[op.counter] + 1
            for c in names:
                out[c] += np.bincount(owner, weights=each[c], minlength=len(cta)).astype(
                    np.int64)
        return out

    def walk(self, ops: tuple[LOp, ...], cta: np.ndarray, vars_: dict[str, object],
             cnt: dict[str, np.ndarray]) -> None:
        cnt = {c: v.copy() for c, v in cnt.items()}
        names = list(cnt)
        for op in ops:
            if not isinstance(op, LFor):
                exprs = protocol_exprs(op)
                env = {**vars_, **cnt}
                self.add(op, cta, [self.eval(e, cta, env) for e in exprs])
                continue
            trips, owner, inner_cta, inner = self.expand(op, cta, vars_)
            self.add(op, cta, [trips])
            if len(owner) == 0:
                continue
            each = self.increments(op.body, inner_cta, inner, names) if names else {}
            if op.counter:
                each[op.counter] = each[op.counter] + 1
            inner_cnt = {}
            for c in names:
                inc = each[c]
                before = np.cumsum(inc) - inc  # exclusive prefix sum over all rows
                seg = (np.cumsum(trips) - trips)[owner]  # first row of each instance
                inner_cnt[c] = cnt[c][owner] + before - before[seg]
                cnt[c] = cnt[c] + np.bincount(owner, weights=inc, minlength=len(cta)).astype(
                    np.int64)
            self.walk(op.body, inner_cta, inner, inner_cnt)


def _advances(op: LFor) -> bool:
    if op.counter:
        return True
    return any(isinstance(o, LFor) and _advances(o) for o in op.body)


def signatures(kernel: LoweredKernel, sizes: Mapping[str, int]) -> np.ndarray:
    """The protocol signature of every CTA of the grid, (CTAs, 2) uint64, CTAs in
    linear order (x fastest); raises TooLarge past the bounds, EvalError when an
    expression has no value."""
    dims = grid_of(kernel, sizes)
    if dims[0] * dims[1] * dims[2] > MAX_GRID:
        raise TooLarge(f"more than {MAX_GRID} CTAs")
    walk = _Walk(kernel, sizes, dims)
    for role in kernel.roles:
        cta = np.arange(walk.n, dtype=np.int64)
        cnt = {c: np.zeros(walk.n, dtype=np.int64) for c in role.counters}
        walk.walk(role.body, cta, {}, cnt)
    return walk.sig


def classes(kernel: LoweredKernel, sizes: Mapping[str, int],
            prefer: list[tuple[int, int, int]] = (),  # type: ignore[assignment]
            cluster: tuple[int, ...] | None = None) -> list[tuple[int, int, int]] | None:
    """One CTA of every class of CTAs (of clusters, with `cluster`) whose protocol is the
    same, or None past the bounds. A class is represented by its first CTA in `prefer`
    if any, else by its lowest CTA; CTAs of `prefer` come first, in their order."""
    found = classify(kernel, sizes, prefer, cluster)
    return None if found is None else [cta for cta, _ in found]


def classify(kernel: LoweredKernel, sizes: Mapping[str, int],
             prefer: list[tuple[int, int, int]] = (),  # type: ignore[assignment]
             cluster: tuple[int, ...] | None = None
             ) -> list[tuple[tuple[int, int, int], bytes]] | None:
    """`classes` with each class's key: equal keys (of any sizes) mean equal programs."""
    try:
        sig = signatures(kernel, sizes)
    except (TooLarge, EvalError):
        return None
    dims = grid_of(kernel, sizes)
    linear = [c[0] + dims[0] * (c[1] + dims[1] * c[2]) for c in prefer
              if all(0 <= x < d for x, d in zip(c, dims, strict=True))]
    if cluster is not None:
        cd = (*cluster, 1, 1, 1)[:3]
        c = np.arange(len(sig))
        x, y, z = c % dims[0], (c // dims[0]) % dims[1], c // (dims[0] * dims[1])
        origin = (x - x % cd[0]) + dims[0] * ((y - y % cd[1]) + dims[1] * (z - z % cd[2]))
        members = [origin + dx + dims[0] * (dy + dims[1] * dz)
                   for dz in range(cd[2]) for dy in range(cd[1]) for dx in range(cd[0])]
        ok = np.all([(m < len(sig)) for m in members], axis=0)
        members = [np.where(ok, m, 0) for m in members]
        key = np.concatenate([sig[m] for m in members], axis=1)
        key[~ok] = np.uint64(0)
        linear = [int(origin[i]) for i in linear]
    else:
        key = sig
    order = list(dict.fromkeys(linear)) + list(range(len(key)))
    seen: dict[bytes, int] = {}
    if cluster is not None:
        origin_set = set(origin.tolist())
        order = [i for i in order if i in origin_set]
    _, first = np.unique(key, axis=0, return_index=True)
    wanted = {key[i].tobytes() for i in first}
    for i in order:
        k = key[i].tobytes()
        if k in wanted and k not in seen:
            seen[k] = i
            if len(seen) == len(wanted):
                break
    return [((i % dims[0], (i // dims[0]) % dims[1], i // (dims[0] * dims[1])), k)
            for k, i in seen.items()]
