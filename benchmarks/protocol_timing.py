"""Protocol-analysis timings for benchmarks/bench_check.py: per corpus schedule (lowering,
unrolling and exploration, measured apart from the rest of the check) and the growth of
time and explored states with the number of pipeline stages and loop iterations."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# A warp-specialised GEMM whose ring depth and trip count are parameters: one loader warp
# and one math warpgroup, 64x64x32 bf16 tiles (8 KiB per stage, so 8 stages fit).
GROWTH_TEMPLATE = '''"""Synthetic ring for the growth benchmark."""
@cake.schedule(target="sm_90a", workload="gemm", {binding})
def growth_s{stages}(lm, A, B, C):
    BM, BN, BK = 64, 64, 32
    lm.launch(grid=(lm.cdiv(lm.M, BM), lm.cdiv(lm.N, BN)), warps=8)
    a_s = lm.smem("bf16", (BM, BK), stages={stages})
    b_s = lm.smem("bf16", (BN, BK), stages={stages})
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 8), regs=232)
    acc = lm.fragment("f32", (BM, BN), role=math)
    ring = lm.pipeline(stages={stages}, buffers=[a_s, b_s], producer=loader, consumer=math)
    m0, n0 = lm.block(0) * BM, lm.block(1) * BN
    with loader:
        for k in lm.range(0, lm.cdiv(lm.K, BK)):
            ring.acquire(k)
            a_s[ring.stage(k)].load(A, at=(m0, k * BK), barrier=ring.full(k), pad=True)
            b_s[ring.stage(k)].load(B, at=(n0, k * BK), barrier=ring.full(k), pad=True)
    with math:
        for k in lm.range(0, lm.cdiv(lm.K, BK)):
            ring.wait(k)
            lm.mma(acc, a_s[ring.stage(k)], b_s[ring.stage(k)], transpose_b=True, init=(k == 0))
            ring.release(k)
        lm.store(C, at=(m0, n0), src=acc, mask=True)
'''


@dataclass
class ProtocolTiming:
    file: str
    analysed: bool
    reps: int
    median_s: float
    p95_s: float
    states: int
    runs: int
    complete: bool


@dataclass
class GrowthPoint:
    """One (stages, iterations) point: `windowed` is what the checker does (loop trip
    counts reduced to the protocol window); `raw` explores every iteration (K fixed)."""

    stages: int
    iterations: int
    windowed_iterations: int
    windowed_s: float
    windowed_states: int
    raw_s: float | None
    raw_states: int | None
    complete: bool


def _context(checker, data: bytes, name: str):
    from cakegov.check.context import CheckContext
    from cakegov.ir.errors import InputError
    from cakegov.ir.parse import parse_bytes

    try:
        schedule = parse_bytes(data, checker.vocabulary)
    except InputError:
        return None
    book = checker.rulebook
    return CheckContext(schedule, name, book.targets.get(schedule.target),
                        checker.workloads.get(schedule.workload), book.primitives,
                        known_targets=tuple(sorted(book.targets)))


def _time_analysis(checker, data: bytes, name: str, reps: int, shapes=None):
    """(samples, last result) of lowering + protocol analysis on a fresh context."""
    samples, result = [], None
    for _ in range(reps):
        ctx = _context(checker, data, name)
        if ctx is None:
            return [], None
        if shapes is not None:
            ctx.__dict__["shapes"] = shapes  # the cached property, set for this run
        t0 = time.perf_counter()
        result = ctx.protocol
        samples.append(time.perf_counter() - t0)
    return samples, result


def time_protocol(checker, root: Path, reps: int) -> list[ProtocolTiming]:
    out: list[ProtocolTiming] = []
    for path in sorted((root / "corpus").rglob("*.cake")):
        name = path.relative_to(root).as_posix()
        samples, result = _time_analysis(checker, path.read_bytes(), name, reps)
        if result is None:
            out.append(ProtocolTiming(name, False, 0, 0.0, 0.0, 0, 0, False))
            continue
        out.append(ProtocolTiming(
            name, True, len(samples), statistics.median(samples),
            float(np.percentile(samples, 95)), result.states, len(result.runs),
            not result.incomplete))
    return out


def growth(checker, stages: range, iterations: tuple[int, ...], reps: int,
           raw_limit: int = 16) -> list[GrowthPoint]:
    points: list[GrowthPoint] = []
    for s in stages:
        for t in iterations:
            windowed = GROWTH_TEMPLATE.format(stages=s, binding='divisible={"K": 32}')
            shape = [{"M": 64, "N": 64, "K": 32 * t}]
            samples, result = _time_analysis(checker, windowed.encode(), f"g{s}_{t}", reps,
                                             shapes=shape)
            if result is None:
                continue
            explored = max((max(r.unrolled.trip_counts.values(), default=0)
                            for r in result.runs), default=0)
            raw_s = raw_states = None
            if t <= raw_limit:
                raw = GROWTH_TEMPLATE.format(stages=s, binding=f'sizes={{"K": {32 * t}}}')
                raw_samples, raw_result = _time_analysis(checker, raw.encode(), f"r{s}_{t}",
                                                         reps)
                if raw_result is not None:
                    raw_s = statistics.median(raw_samples)
                    raw_states = raw_result.states
            points.append(GrowthPoint(s, t, explored, statistics.median(samples),
                                      result.states, raw_s, raw_states,
                                      not result.incomplete))
    return points
