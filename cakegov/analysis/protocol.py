"""The protocol analysis of one schedule: lower, unroll under windowed workload sizes,
explore, and collect anomalies with witnesses.

Window: the protocol state of a ring (stage index, phase parity) is periodic in the loop
iteration with period P = lcm of the stage counts and index moduli; every (stage, parity)
combination, every wrap-around and every phase flip occurs within 2P iterations. Loops
whose trip count exceeds W = 2P + 2 are explored with the workload sizes reduced so that
the trip count is the smallest value >= W (never below the check shape's own count when
that is smaller). See docs/checker.md for when this is not enough."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from cakegov.analysis.explore import Anomaly, Exploration, explore
from cakegov.analysis.unroll import Unrolled, UnrollError, period, unroll
from cakegov.ir.expr import Env, EvalError, evaluate, free_symbols
from cakegov.lower.kernel import LFor, LOp, LoweredKernel

MAX_WINDOW = 64


@dataclass(frozen=True)
class Bounds:
    """Explicit bounds of the exploration; hitting one makes the verdict incomplete.

    The state bound is the one that normally applies: it is deterministic, so the same
    schedule gets the same verdict on every machine. The time bound is a safety net set
    far above the state bound's cost (a few seconds on a 2-core machine), so that it
    only fires on a machine that is stalled, never decides a verdict under normal load."""

    max_states: int = 50_000
    max_seconds: float = 60.0
    max_events: int = 20_000
    max_window: int = MAX_WINDOW


@dataclass
class Run:
    sizes: dict[str, int]
    unrolled: Unrolled
    exploration: Exploration


@dataclass
class ProtocolResult:
    kernel: LoweredKernel
    runs: list[Run] = field(default_factory=list)
    anomalies: list[Anomaly] = field(default_factory=list)
    incomplete: list[str] = field(default_factory=list)
    window: int = 0
    period: int = 1
    elapsed: float = 0.0

    @property
    def states(self) -> int:
        return sum(r.exploration.states for r in self.runs)


def _loops(ops: tuple[LOp, ...]) -> list[LFor]:
    out: list[LFor] = []
    for op in ops:
        if isinstance(op, LFor):
            out.append(op)
            out.extend(_loops(op.body))
    return out


def _trips(loop: LFor, sizes: Mapping[str, int]) -> int | None:
    try:
        env = Env(sizes=sizes)
        return max(0, -(-(evaluate(loop.stop, env) - evaluate(loop.start, env)) // loop.step))
    except EvalError:
        return None  # depends on an outer loop variable: bounded through the outer loop


def windowed_sizes(kernel: LoweredKernel, shape: Mapping[str, int], window: int
                   ) -> dict[str, int]:
    """`shape` with the sizes that drive loop trip counts reduced to the window."""
    loops = [lp for role in kernel.roles for lp in _loops(role.body)]
    sizes = dict(shape)
    symbols = sorted({s[5:] for lp in loops for s in free_symbols(lp.stop) | free_symbols(
        lp.start) if s.startswith("size:")} - set(kernel.sizes))
    for name in symbols:
        users = [lp for lp in loops if f"size:{name}" in free_symbols(lp.stop) | free_symbols(
            lp.start)]
        step = kernel.divisible.get(name, 1)

        def longest(value: int, users: list[LFor] = users, name: str = name) -> int:
            trial = {**sizes, name: value}
            return max((_trips(lp, trial) or 0) for lp in users)

        target = min(window, longest(sizes[name]))
        lo, hi = 1, max(1, sizes[name] // step)
        while lo < hi:  # smallest multiple of `step` reaching the target trip count
            mid = (lo + hi) // 2
            if longest(mid * step) >= target:
                hi = mid
            else:
                lo = mid + 1
        sizes[name] = lo * step
    return sizes


def analyze(kernel: LoweredKernel, shapes: list[dict[str, int]], bounds: Bounds = Bounds()
            ) -> ProtocolResult:
    """Explore the kernel under every check shape (windowed, deduplicated)."""
    start = time.perf_counter()
    p = period(kernel)
    window = 2 * p + 2
    result = ProtocolResult(kernel=kernel, window=window, period=p)
    if window > bounds.max_window:
        result.incomplete.append(
            f"protocol period {p} needs a window of {window} iterations, over the bound "
            f"{bounds.max_window}")
        return result
    found: dict[tuple, Anomaly] = {}
    budget = bounds.max_seconds
    candidates: dict[tuple, tuple[dict[str, int], Unrolled]] = {}
    for shape in shapes or [dict(kernel.sizes)]:
        sizes = windowed_sizes(kernel, shape, window)
        try:
            unrolled = unroll(kernel, sizes, bounds.max_events)
        except UnrollError as exc:
            result.incomplete.append(f"cannot unroll for {sizes}: {exc}")
            continue
        candidates.setdefault(tuple(sorted(unrolled.trip_counts.items())), (sizes, unrolled))
    # The shortest and the longest trip counts: the longest covers every wrap-around and
    # phase flip of the window; the shortest covers loops shorter than the ring.
    ordered = sorted(candidates.values(), key=lambda c: sum(c[1].trip_counts.values()))
    for sizes, unrolled in ordered[:1] + ordered[1:][-1:]:
        remaining = budget - (time.perf_counter() - start)
        exploration = explore(kernel, unrolled, bounds.max_states, max(remaining, 0.01))
        run = Run(sizes=sizes, unrolled=unrolled, exploration=exploration)
        result.runs.append(run)
        if not exploration.complete:
            result.incomplete.append(f"exploration for {sizes}: {exploration.reason}")
        for anomaly in exploration.anomalies:
            akey = (anomaly.kind, tuple(e.path for e in anomaly.events), anomaly.resource)
            found.setdefault(akey, anomaly)
    result.anomalies = list(found.values())
    result.elapsed = time.perf_counter() - start
    return result
