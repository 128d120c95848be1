"""From a `LoweredKernel` at one shape to the work it does: parameter-free demands per
role and segment (bytes per path, flops per unit, barrier operations), the launch
geometry and the compulsory traffic. `model.predict` prices a profile with parameters, so
calibration re-prices profiles without walking kernels again."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cakegov.ir.dtypes import dtype_bytes
from cakegov.ir.expr import Env, EvalError, evaluate, step_expr
from cakegov.lower.kernel import (
    LArrive,
    LBuffer,
    LCompute,
    LCopy,
    LFor,
    LNamedSync,
    LoweredKernel,
    LWait,
)

MMA_PRIMITIVES = ("mma", "mma_async")


class CostError(Exception):
    """The model cannot price this kernel at this shape (the message says why)."""


@dataclass
class Work:
    """What one stretch of a role's code demands, before any parameter is applied."""

    async_bytes: float = 0.0    # bulk copies global -> shared, in flight
    gmem_bytes: float = 0.0     # synchronous global traffic (stores, register loads)
    gmem_reads: float = 0.0     # synchronous global reads (each pays the latency)
    smem_bytes: float = 0.0     # shared <-> register traffic, bank conflicts included
    flops: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    mbarrier: float = 0.0       # mbarrier arrives and waits
    named: float = 0.0          # bar.sync / bar.arrive
    ops: float = 0.0            # every lowered operation (issue overhead)

    def add(self, other: Work, mult: float = 1.0) -> None:
        self.async_bytes += other.async_bytes * mult
        self.gmem_bytes += other.gmem_bytes * mult
        self.gmem_reads += other.gmem_reads * mult
        self.smem_bytes += other.smem_bytes * mult
        for unit, f in other.flops.items():
            self.flops[unit] += f * mult
        self.mbarrier += other.mbarrier * mult
        self.named += other.named * mult
        self.ops += other.ops * mult

    def scaled(self, mult: float) -> Work:
        out = Work()
        out.add(self, mult)
        return out


@dataclass
class Step:
    """One operation of straight-line code: its work, or a wait on a barrier."""

    work: Work
    wait: str | None = None


@dataclass(eq=False)
class Segment:
    """A role's code between loops (`prologue`/`epilogue`, priced step by step) or one
    top-level loop (`loop`, priced as a pipeline's steady state)."""

    role: str
    kind: str  # "prologue" | "loop" | "epilogue"
    name: str
    path: str
    line: int
    trips: int = 0
    body: Work = field(default_factory=Work)  # one iteration (loops)
    steps: list[Step] = field(default_factory=list)  # straight-line code
    depth: int = 1  # stages of the rings the loop waits on
    copy_barriers: set[str] = field(default_factory=set)


@dataclass
class Profile:
    file: str
    kernel: str
    target: str
    workload: str
    shape: dict[str, int]
    ctas: int
    threads: int
    warps: int
    launch_regs: int
    smem_bytes: int
    role_warps: dict[str, int]
    segments: list[Segment]
    copies_to: dict[str, float]  # barrier -> bytes that straight-line copies deliver
    compulsory_bytes: float
    total: Work
    conflict: dict[str, float]  # buffer -> bank-conflict degree of its mma operand reads
    ring_stage_bytes: int  # shared memory one more stage of the deepest ring would take
    ring_stages: int
    details: dict[str, Any] = field(default_factory=dict)


def conflict_degree(row_bytes: int, where: Callable[[int, int], int] | None = None) -> int:
    """Bank-conflict degree of the mma.sync operand reads of the lowering
    (rules/primitives/mma.py): lane `l` of a warp reads 4 bytes at row `l // 4`, byte
    `4 * (l % 4)` of a 16-byte chunk. `where(row, byte)` is the stage byte the buffer's
    lowered layout puts that byte at (None: row-major, rows `row_bytes` apart; a swizzled
    layout permutes the chunks of each row, cakegov/lower/swizzle.py). 32 banks of 4
    bytes."""
    banks: dict[int, set[int]] = defaultdict(set)
    for lane in range(32):
        row, byte = lane // 4, 4 * (lane % 4)
        word = (row * row_bytes + byte if where is None else where(row, byte)) // 4
        banks[word % 32].add(word)
    return max(len(words) for words in banks.values())


def buffer_conflict(buf: LBuffer) -> float:
    """The conflict degree of mma.sync reads of one buffer in its lowered layout."""
    row = buf.shape[-1] * dtype_bytes(buf.dtype) if buf.shape else 0
    if not row:
        return 1.0
    size = dtype_bytes(buf.dtype)
    if buf.layout == "swizzled" and buf.shape[0] >= 8:
        return float(conflict_degree(
            row, lambda r, b: buf.element_offset(r, b // size) + b % size))
    return float(conflict_degree(row))


def _eval(expr: Any, env: Env, what: str) -> int:
    try:
        return evaluate(expr, env)
    except EvalError as exc:
        raise CostError(f"{what} cannot be evaluated: {exc}") from None


def _op_work(op: Any, kernel: LoweredKernel, conflict: dict[str, float]) -> Work:
    w = Work(ops=1)
    if isinstance(op, LCopy):
        w.async_bytes = op.bytes
    elif isinstance(op, (LArrive, LWait)):
        w.mbarrier = 1
    elif isinstance(op, LNamedSync):
        w.named = 1
    elif isinstance(op, LCompute):
        if op.flops:
            w.flops["@" + op.primitive] += op.flops  # unit resolved by the parameters
        w.gmem_bytes = op.global_bytes
        if any(a.space == "global" for a in op.reads):
            w.gmem_reads = 1
        rep_a = rep_b = 1
        wgmma = getattr(op, "wgmma", None)
        if wgmma is not None:  # the tensor cores read each warpgroup's operand rows, swizzled
            rep_a, rep_b = wgmma.groups_n, wgmma.groups_m
        elif op.primitive in MMA_PRIMITIVES:
            acc = next((a.name for a in op.writes if a.space == "reg"), None)
            frag = kernel.fragment(acc) if acc else None
            if frag is not None and frag.layout is not None:
                rep_a, rep_b = frag.layout.warps_n, frag.layout.warps_m
        smem_reads = [a for a in op.reads if a.space == "smem"]
        for i, a in enumerate(smem_reads):
            factor = conflict.get(a.name, 1.0) if op.primitive in MMA_PRIMITIVES \
                and wgmma is None else 1.0
            rep = (rep_a if i == 0 else rep_b) if op.primitive in MMA_PRIMITIVES else 1
            w.smem_bytes += a.bytes * factor * rep
        w.smem_bytes += sum(a.bytes for a in op.writes if a.space == "smem")
    return w


def _walk(ops: Any, env: Env, kernel: LoweredKernel, conflict: dict[str, float],
          into: Work, mult: float, barriers: dict[str, int], copies: set[str]) -> None:
    for op in ops:
        if isinstance(op, LFor):
            trips = _trips(op, env)
            inner = Env(sizes=env.sizes, vars={**env.vars, op.var: _eval(op.start, env,
                        f"loop `{op.var}` start")}, blocks=env.blocks)
            _walk(op.body, inner, kernel, conflict, into, mult * trips, barriers, copies)
            continue
        into.add(_op_work(op, kernel, conflict), mult)
        if isinstance(op, LWait):
            b = kernel.barrier(op.barrier)
            if b is not None:
                barriers[op.barrier] = max(barriers.get(op.barrier, 1), b.stages)
        if isinstance(op, LCopy):
            copies.add(op.barrier)


def _trips(op: LFor, env: Env) -> int:
    start = _eval(op.start, env, f"loop `{op.var}` start")
    stop = _eval(op.stop, env, f"loop `{op.var}` stop")
    step = _eval(step_expr(op.step), env, f"loop `{op.var}` step")
    return max(0, -(-(stop - start) // step)) if step > 0 else 0


def _min_regs(kernel: LoweredKernel) -> int:
    """Registers per thread the largest role's fragments need (a floor for a smaller
    register budget; 16 more for addresses and loop state)."""
    need: dict[str, int] = defaultdict(int)
    for f in kernel.fragments:
        if f.layout is not None:
            need[f.role] += math.ceil(f.layout.slots * dtype_bytes(f.dtype) / 4)
    return max(need.values(), default=0) + 16


def profile(kernel: LoweredKernel, shape: dict[str, int], tensors: dict[str, Any],
            limits: dict[str, Any], file: str = "") -> Profile:
    """The parameter-free work of `kernel` at `shape` (sizes the schedule fixes win)."""
    sizes = {**shape, **kernel.sizes}
    # a loop whose trip count depends on the CTA (a persistent tile loop) is counted as
    # CTA 0 runs it: the first CTA of a grid-stride schedule has the most tiles
    env = Env(sizes=sizes, blocks={0: 0, 1: 0, 2: 0})
    dims = [_eval(g, env, "grid") for g in kernel.grid]
    if any(d < 1 for d in dims):
        raise CostError(f"grid {dims} is empty at this shape")
    ctas = math.prod(dims)
    conflict = {buf.name: buffer_conflict(buf) for buf in kernel.buffers}
    segments: list[Segment] = []
    copies_to: dict[str, float] = defaultdict(float)
    total = Work()
    for role in kernel.roles:
        seen_loop = False
        current: Segment | None = None
        for op in role.body:
            if isinstance(op, LFor):
                seen_loop = True
                seg = Segment(role.name, "loop", f"loop {op.var}", op.path, op.span.line,
                              trips=_trips(op, env))
                barriers: dict[str, int] = {}
                inner = Env(sizes=sizes, vars={op.var: _eval(op.start, env, "loop start")},
                            blocks=env.blocks)
                _walk(op.body, inner, kernel, conflict, seg.body, 1.0, barriers,
                      seg.copy_barriers)
                seg.depth = max(barriers.values(), default=1)
                segments.append(seg)
                total.add(seg.body, seg.trips)
                current = None
                continue
            if current is None:
                kind = "epilogue" if seen_loop else "prologue"
                current = Segment(role.name, kind, kind, op.path, op.span.line)
                segments.append(current)
            w = _op_work(op, kernel, conflict)
            total.add(w)
            current.steps.append(Step(w, op.barrier if isinstance(op, LWait) else None))
            if isinstance(op, LCopy):
                copies_to[op.barrier] += op.bytes
    compulsory = 0.0
    for _name, (dtype, tdims) in tensors.items():
        n = 1
        for d in tdims:
            if d not in sizes:
                raise CostError(f"size {d} has no value at this shape")
            n *= sizes[d]
        compulsory += n * dtype_bytes(dtype)
    ring = max((b for b in kernel.barriers if b.origin == "pipeline_full" or b.tx_bytes),
               key=lambda b: b.stages, default=None)
    ring_bytes = 0
    if ring is not None and ring.pipeline:
        ring_bytes = sum(b.stage_bytes for b in kernel.buffers if b.stages == ring.stages)
    elif ring is not None:
        ring_bytes = ring.tx_bytes or 0
    return Profile(
        file=file, kernel=kernel.name, target=kernel.target, workload=kernel.workload,
        shape=dict(sorted(sizes.items())), ctas=ctas, threads=kernel.threads,
        warps=kernel.warps, launch_regs=kernel.launch_regs, smem_bytes=kernel.smem_bytes,
        role_warps={r.name: r.warps for r in kernel.roles}, segments=segments,
        copies_to=dict(copies_to), compulsory_bytes=compulsory, total=total,
        conflict=conflict, ring_stage_bytes=ring_bytes,
        ring_stages=ring.stages if ring is not None else 0,
        details={"min_regs": _min_regs(kernel), "smem_per_sm": int(limits.get("smem_per_sm", 0)),
                 "smem_per_cta": int(limits.get("smem_per_cta", 0)),
                 "registers_per_sm": int(limits.get("registers_per_sm", 0))})
