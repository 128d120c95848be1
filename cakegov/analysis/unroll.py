"""Unroll a LoweredKernel's role bodies into concrete event sequences for one set of
workload sizes. Roles are deterministic programs: after unrolling, the only freedom left
is how roles interleave and when asynchronous copies complete (cakegov/analysis/explore.py).

Shared-memory accesses become locations `("smem", buffer, stage)`. Register fragments are
private to their role and only matter where an asynchronous op (`mma_async`) writes one
while it is in flight: those fragments also become locations `("reg", fragment, 0)`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from math import lcm

from cakegov.ir.expr import BinOp, Compare, Env, EvalError, Expr, evaluate
from cakegov.lower.kernel import (
    LArrive,
    LCompute,
    LCopy,
    LFence,
    LFor,
    LGroupWait,
    LInit,
    LNamedSync,
    LOp,
    LoweredKernel,
    LWait,
)

Slot = tuple[str, int]  # (barrier name, index)
Location = tuple[str, str, int]  # (space, name, stage)


class UnrollError(Exception):
    """The kernel cannot be unrolled for these sizes (a bound or an expression)."""


@dataclass(frozen=True)
class Event:
    """One step of one role, with every index evaluated."""

    role: str
    seq: int
    kind: str  # wait | arrive | copy | compute | named | fence | init | retire
    path: str
    line: int
    iters: tuple[tuple[str, int], ...]
    slot: Slot | None = None
    parity: int = 0
    arrivals: int = 0
    tx: int = 0
    bytes: int = 0
    per: str = ""
    source: str = ""
    reads: tuple[tuple[Location, str], ...] = ()  # (location, proxy)
    writes: tuple[tuple[Location, str], ...] = ()
    named: tuple[int, int, bool] | None = None  # (id, threads, waits)
    scope: str = ""  # fence scope
    primitive: str = ""
    group: str = ""  # compute: the async group it commits; retire: the group it waits for
    pending: int = 0  # retire: groups that may stay in flight
    count: int = 0  # init: the arrival count

    @property
    def cta_sync(self) -> bool:
        """`lm.sync_cta()`: bar.sync 0 over every thread of the CTA."""
        return self.kind == "named" and self.named is not None and self.named[0] == 0

    def where(self) -> str:
        its = ", ".join(f"{k}={v}" for k, v in self.iters)
        return f"{self.role} line {self.line}" + (f" ({its})" if its else "")


@dataclass
class Unrolled:
    sizes: dict[str, int]
    roles: dict[str, tuple[Event, ...]]
    trip_counts: dict[str, int] = field(default_factory=dict)  # loop path -> trips
    reduced: bool = False


def _eval(expr: Expr, env: Env, path: str) -> int:
    try:
        return evaluate(expr, env)
    except EvalError as exc:
        raise UnrollError(f"{path}: {exc}") from None


def _moduli(expr: Expr | None, out: set[int]) -> None:
    if isinstance(expr, BinOp):
        if expr.op in ("%", "//") and hasattr(expr.rhs, "value"):
            out.add(abs(expr.rhs.value))  # type: ignore[union-attr]
        _moduli(expr.lhs, out)
        _moduli(expr.rhs, out)
    elif isinstance(expr, Compare):
        _moduli(expr.lhs, out)
        _moduli(expr.rhs, out)


def period(kernel: LoweredKernel) -> int:
    """The iteration period of the protocol state: every stage/parity pattern repeats
    after lcm(stage counts, moduli in indices) iterations."""
    values: set[int] = {b.stages for b in kernel.barriers} | {b.stages for b in kernel.buffers}

    def visit(ops: tuple[LOp, ...]) -> None:
        for op in ops:
            if isinstance(op, LFor):
                visit(op.body)
            elif isinstance(op, LWait):
                _moduli(op.index, values)
                _moduli(op.parity, values)
            elif isinstance(op, LArrive | LInit):
                _moduli(op.index, values)
            elif isinstance(op, LCopy):
                _moduli(op.stage, values)
                _moduli(op.barrier_index, values)

    for role in kernel.roles:
        visit(role.body)
    result = 1
    for v in values:
        if v > 0:
            result = lcm(result, v)
    return result


def unroll(kernel: LoweredKernel, sizes: Mapping[str, int], max_events: int = 20_000
           ) -> Unrolled:
    """Concrete event sequences of every role under `sizes` (block index 0)."""
    stages = {}
    roles: dict[str, tuple[Event, ...]] = {}
    trips: dict[str, int] = {}
    total = 0
    tracked = _async_fragments(kernel)
    for role in kernel.roles:
        events: list[Event] = []

        def visit(ops: tuple[LOp, ...], vars_: dict[str, int], role_name: str = role.name,
                  events: list[Event] = events) -> None:
            nonlocal total
            env = Env(sizes=sizes, vars=vars_, blocks={0: 0, 1: 0, 2: 0},
                      pipeline_stages=stages)
            for op in ops:
                if isinstance(op, LFor):
                    start = _eval(op.start, env, op.path)
                    stop = _eval(op.stop, env, op.path)
                    values = range(start, stop, op.step)
                    trips[op.path] = max(trips.get(op.path, 0), len(values))
                    for v in values:
                        visit(op.body, {**vars_, op.var: v})
                    continue
                total += 1
                if total > max_events:
                    raise UnrollError(f"more than {max_events} events after unrolling")
                events.append(_event(op, env, role_name, len(events), vars_, tracked))

        visit(role.body, {})
        roles[role.name] = tuple(events)
    return Unrolled(sizes=dict(sizes), roles=roles, trip_counts=trips)


def _async_fragments(kernel: LoweredKernel) -> frozenset[str]:
    """Fragments an asynchronous op writes: the only registers the explorer tracks."""
    out: set[str] = set()

    def visit(ops: tuple[LOp, ...]) -> None:
        for op in ops:
            if isinstance(op, LFor):
                visit(op.body)
            elif isinstance(op, LCompute) and op.group is not None:
                out.update(a.name for a in op.writes if a.space == "reg")

    for role in kernel.roles:
        visit(role.body)
    return frozenset(out)


def _event(op: LOp, env: Env, role: str, seq: int, vars_: dict[str, int],
           tracked: frozenset[str] = frozenset()) -> Event:
    base = {"role": role, "seq": seq, "path": op.path, "line": op.span.line,
            "iters": tuple(sorted(vars_.items()))}
    if isinstance(op, LWait):
        return Event(kind="wait", slot=(op.barrier, _eval(op.index, env, op.path)),
                     parity=_eval(op.parity, env, op.path) % 2, source=op.source, **base)
    if isinstance(op, LArrive):
        return Event(kind="arrive", slot=(op.barrier, _eval(op.index, env, op.path)),
                     arrivals=op.arrivals, tx=op.tx_bytes, per=op.per, source=op.source,
                     **base)
    if isinstance(op, LCopy):
        stage = _eval(op.stage, env, op.path)
        return Event(kind="copy", slot=(op.barrier, _eval(op.barrier_index, env, op.path)),
                     bytes=op.bytes, writes=((("smem", op.buffer, stage), "async"),),
                     source="load", **base)
    if isinstance(op, LNamedSync):
        return Event(kind="named", named=(op.id, op.threads, op.wait), **base)
    if isinstance(op, LFence):
        return Event(kind="fence", scope=op.scope, **base)
    if isinstance(op, LInit):
        return Event(kind="init", slot=(op.barrier, _eval(op.index, env, op.path)),
                     count=op.count, source=op.source, **base)
    if isinstance(op, LGroupWait):
        return Event(kind="retire", group=op.group, pending=op.pending, source=op.source,
                     **base)
    assert isinstance(op, LCompute)

    def locs(accesses) -> tuple[tuple[Location, str], ...]:
        out = []
        for a in accesses:
            if a.space == "reg" and a.name in tracked:
                out.append((("reg", a.name, 0), "generic"))
                continue
            if a.space != "smem":
                continue
            stage = _eval(a.stage, env, op.path) if a.stage is not None else 0
            out.append((("smem", a.name, stage), a.proxy))
        return tuple(out)

    return Event(kind="compute", reads=locs(op.reads), writes=locs(op.writes),
                 primitive=op.primitive, group=op.group or "", **base)
