"""The lowered kernel as the protocol analysis executes it: model threads and their
events, for one set of workload sizes and one CTA.

Granularity follows the lowering (docs/checker.md, "The model"). Every role is one
*model thread* whose warps run its program in lockstep; what each operation is executed
by is recorded with it:

- `E`: one elected thread (lane 0 of the role's first warp): `arrive(per="role")`,
  `arrive_expect_tx`, `mbarrier.init`, bulk copy issue (the lowering synchronises the role
  just before it);
- `W0`: lane 0 of every warp (`arrive(per="warp")`), and shared-memory reads consumed by a
  warp-collective instruction (complete warp-wide once lane 0 passes it);
- `T`: every thread (waits, named barriers, fences, ordinary loads and stores);
- `engine`: the asynchronous proxy on the role's behalf (bulk copies, bulk stores, wgmma
  operands).

A role whose body has `with lm.warps(...)` blocks (LOp.subset) is split, warp-granular,
into one model thread per *class* of its warps: warps that belong to exactly the same
blocks (docs/checker.md, "Part of a role"). Each class runs the role's program without
the blocks it is not part of; an elected-thread op runs in the class holding the first
warp of its block (or of the role); arrivals, named-barrier threads and footprints count
the class's own warps only. A role without blocks is one model thread, as before.

Shared memory is a byte array laid out at the lowered offsets: an access names the
*region* (the bytes of one buffer stage, merged with every stage that overlaps it), its
byte offset in the region and its footprint (cakegov/analysis/footprint.py). Register
fragments matter only where an asynchronous group writes one: those become regions too.

Loops are unrolled with every index, stage, parity and byte count evaluated. A *splice
plan* (cakegov/analysis/window.py) may remove whole periods of iterations from loops whose
protocol behaviour is periodic; `Program.removed` then counts what was removed, per slot,
so the plan can be checked against the phase arithmetic.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cakegov.analysis.footprint import ENGINE, Footprint, Footprints, TooLarge, tile_origin
from cakegov.analysis.semantics import WARPGROUP_WARPS
from cakegov.ir.expr import Env, EvalError, Expr, compile_expr, evaluate, step_expr
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

WARP = 32
_COMPILE_AFTER = 64  # evaluations of one expression before it is compiled to Python


class UnrollError(Exception):
    """The kernel cannot be unrolled for these sizes (a bound or an expression)."""


@dataclass(slots=True, eq=False)
class Mem:
    """One shared-memory (or tracked register) access of an event."""

    region: int
    shift: int  # byte offset of the accessed stage inside its region
    fp: Footprint
    write: bool
    proxy: str  # generic | async
    who: str  # E | W0 | T | engine
    name: str  # buffer or fragment
    stage: int
    space: str = "smem"

    @property
    def mask(self) -> int:
        return self.fp.mask << self.shift

    def where(self) -> str:
        return f"{self.name} stage {self.stage}" if self.space == "smem" else \
            f"fragment {self.name}"


@dataclass(slots=True, eq=False)
class Event:
    """One step of one model thread, every index evaluated."""

    thread: int
    seq: int
    kind: str  # wait | arrive | copy | compute | named | fence | init | retire
    path: str
    line: int
    iters: tuple[tuple[str, int], ...]
    role: str = ""
    slot: int = -1
    parity: int = 0
    n: int = 0  # arrivals this step makes (all warps or threads of `who`)
    tx: int = 0  # transaction bytes each arrival adds
    who: str = "T"
    nbytes: int = 0  # bytes a copy delivers
    mem: tuple[Mem, ...] = ()
    named: tuple[int, int, bool] | None = None  # (id, declared threads, waits)
    scope: str = ""  # fence scope
    group: str = ""  # compute: group committed; retire: group retired
    pending: int = 0
    count: int = 0  # init: arrival count
    source: str = ""
    primitive: str = ""
    derived: str = ""
    collective: bool = False  # a warp-collective instruction (lanes converge)
    # a wgmma issue or wait on the wgmma path (LGroupWait.wgmma): warpgroup-collective
    # groups (axiom A13, cakegov/analysis/semantics.py WarpgroupIssue)
    warpgroup: bool = False
    # thread-block clusters (cakegov/analysis/cluster.py): the cluster rank of the CTA
    # executing the event (-1: a one-CTA program), and the rank a remote arrive or a
    # multicast copy targets (-1: the executing CTA itself); `dests`: a multicast copy's
    # destination ranks before the cluster program splits it per destination
    cta: int = -1
    peer: int = -1
    dests: tuple[int, ...] = ()
    part: str = ""  # the warps of a split role executing it (`warps 1..3`); "": all

    def where(self) -> str:
        its = ", ".join(f"{k}={v}" for k, v in self.iters)
        role = f"{self.role} ({self.part})" if self.part else self.role
        who = role if self.cta < 0 else f"{role} of CTA {self.cta}"
        return f"{who} line {self.line}" + (f" ({its})" if its else "")


@dataclass
class Thread:
    """A model thread: one role (or one class of a split role's warps, `members`),
    `warps` warps in lockstep."""

    index: int
    role: str
    warps: int
    events: list[Event] = field(default_factory=list)
    cta: int = -1  # cluster rank of its CTA (-1: a one-CTA program)
    # a split role (`with lm.warps(...)`): the role-relative warps of this class, and the
    # role's warp count; () / 0: the whole role
    members: tuple[int, ...] = ()
    role_warps: int = 0
    # a symmetric class (`Symmetry`): the warps of warpgroup 0 whose program it runs, how
    # many warpgroups it stands for, and the named barriers each has a copy of
    rep: tuple[int, ...] = ()
    blocks: int = 1
    private: frozenset[int] = frozenset()

    @property
    def threads(self) -> int:
        return self.warps * WARP

    @property
    def runs(self) -> tuple[int, ...]:
        """The warps whose ops the thread executes (`executes`): its own, or for a
        symmetric class its warpgroup-0 representative's."""
        return self.rep or self.members

    @property
    def role_threads(self) -> int:
        """Threads of the whole role (footprints number the role's threads)."""
        return (self.role_warps or self.warps) * WARP

    @property
    def part(self) -> str:
        shown = self.rep or self.members  # a symmetric class speaks as its representative
        return f"warps {warp_text(shown)}" if shown else ""


def warp_text(warps: tuple[int, ...]) -> str:
    """`0`, `1..3`, `0, 4`: role-relative warp indices for messages."""
    if len(warps) > 1 and warps == tuple(range(warps[0], warps[-1] + 1)):
        return f"{warps[0]}..{warps[-1]}"
    return ", ".join(str(w) for w in warps)


def warp_classes(role) -> list[tuple[int, ...]]:
    """The model threads of a lowered role: the classes of its warps that belong to
    exactly the same `with lm.warps(...)` blocks, ordered by first warp; [()] (the whole
    role) when it has none."""
    subsets = sorted({op.subset for op in _all_ops(role.body) if op.subset is not None})
    if not subsets:
        return [()]
    classes: dict[tuple[bool, ...], list[int]] = {}
    for w in range(role.warps):
        classes.setdefault(tuple(w in s for s in subsets), []).append(w)
    return sorted((tuple(ws) for ws in classes.values()), key=lambda ws: ws[0])


def _all_ops(ops: tuple[LOp, ...]):
    for op in ops:
        yield op
        if isinstance(op, LFor):
            yield from _all_ops(op.body)


_ELECTED_ARRIVE = "role"


def executes(members: tuple[int, ...], op: LOp) -> bool:
    """Does the class `members` of a split role (() = the whole role) execute `op`? Ops
    of a `with lm.warps(...)` block run on its warps only; an op of one elected thread
    (`arrive(per="role")`, arrive_expect_tx, mbarrier.init, a bulk copy or bulk store)
    runs on the first warp of its block, or of the role."""
    if not members:
        return True
    warps = op.subset if op.subset is not None else None
    if warps is not None and members[0] not in warps:
        return False
    elected = (isinstance(op, LArrive) and op.per == _ELECTED_ARRIVE) or \
        isinstance(op, LCopy | LInit) or (isinstance(op, LCompute) and op.group == "bulk")
    if elected:
        first = warps[0] if warps is not None else 0
        return first in members
    return True


def arrivals(members: tuple[int, ...], op: LArrive, blocks: int = 1) -> int:
    """Arrivals the class `members` makes at `op` (the op's own count for a whole role);
    a symmetric class standing for `blocks` warpgroups elects one thread in each."""
    if not members:
        return op.arrivals
    return {"role": blocks, "warp": len(members), "thread": WARP * len(members)}[op.per]


# ---- symmetric warpgroups ------------------------------------------------------------


@dataclass(frozen=True)
class Symmetry:
    """Warp classes of a split role that are images of one another under a shift by whole
    warpgroups: each warpgroup runs the same ops on its own threads, its own copy of any
    named barrier it alone uses, and shared memory it only reads. The images are explored
    as one model thread (the union of their warps, in lockstep like the warps of an unsplit
    role), running the representative's ops (docs/checker.md, "Symmetric warpgroups")."""

    role: str
    rep: tuple[int, ...]  # the class in the role's first warpgroup
    members: tuple[int, ...]  # it and its images in every warpgroup
    blocks: int  # warpgroups
    private: frozenset[int]  # named barrier ids of the representative's own copies



def symmetry_notes(symmetries: list[Symmetry]) -> list[str]:
    """One line per reduced role: which warpgroups were explored through the first."""
    out = []
    for role in dict.fromkeys(sym.role for sym in symmetries):
        mine = [sym for sym in symmetries if sym.role == role]
        blocks = mine[0].blocks
        private = sorted({i for sym in mine for i in sym.private})
        copies = (f", each on its own copy of named barrier{'s' if len(private) > 1 else ''} "
                  f"{', '.join(str(i) for i in private)}") if private else ""
        others = "warpgroup 1" if blocks == 2 else f"warpgroups 1..{blocks - 1}"
        out.append(f"`{role}`: {others} explored through warpgroup 0 "
                   f"({blocks} warpgroups running the same code on their own threads"
                   f"{copies})")
    return out


_SYM_SKIP = frozenset({"path", "span", "subset", "id", "barrier"})


def _executed(ops: tuple[LOp, ...], members: tuple[int, ...]) -> list:
    out: list = []
    for op in ops:
        if not executes(members, op):
            continue
        out.append((op, _executed(op.body, members)) if isinstance(op, LFor) else (op, None))
    return out


def _same_op(a: LOp, b: LOp, shift: int, rho: dict[int, int]) -> bool:
    """Is `b` the image of `a` under a shift of `shift` warps (subsets shifted, or the same
    subset when it holds both), with named barrier ids mapped by `rho` (extended here)?"""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    for name in type(a).model_fields:
        if name in _SYM_SKIP:
            continue
        if name == "body":
            continue
        if getattr(a, name) != getattr(b, name):
            return False
    if a.subset != b.subset and (a.subset is None or b.subset is None or
                                 tuple(w + shift for w in a.subset) != b.subset):
        return False
    if isinstance(a, LNamedSync):
        assert isinstance(b, LNamedSync)
        if a.id == b.id or rho.setdefault(a.id, b.id) != b.id:
            return False  # one barrier used by two warpgroups is shared, not a copy
    elif getattr(a, "barrier", None) != getattr(b, "barrier", None):
        return False
    return True


def _same_seq(a: list, b: list, shift: int, rho: dict[int, int]) -> bool:
    if len(a) != len(b):
        return False
    for (op_a, body_a), (op_b, body_b) in zip(a, b, strict=True):
        if not _same_op(op_a, op_b, shift, rho):
            return False
        if body_a is not None and not _same_seq(body_a, body_b, shift, rho):
            return False
    return True


def _named_ids(seq: list, out: set[int]) -> set[int]:
    for op, body in seq:
        if isinstance(op, LNamedSync):
            out.add(op.id)
        if body is not None:
            _named_ids(body, out)
    return out


def _unshared(seq: list) -> bool:
    """Does the class do something each warpgroup's copy would do once more on a shared
    resource, which one merged op cannot stand for: write shared memory (a write could
    race another warpgroup's read), issue a bulk copy or bulk store (one elected issue
    per warpgroup, each with its own bytes and group), add transaction bytes (each
    warpgroup's `arrive_expect_tx` adds its own) or initialise a barrier (each would
    initialise it again)?"""
    for op, body in seq:
        if isinstance(op, LCompute) and (op.group == "bulk" or
                                         any(a.space == "smem" for a in op.writes)):
            return True
        if isinstance(op, LCopy | LInit) or (isinstance(op, LArrive) and op.expects):
            return True
        if isinstance(op, LFence) and op.scope == "mbarrier_init":
            return True
        if body is not None and _unshared(body):
            return True
    return False


def symmetric(kernel: LoweredKernel, role, classes: list[tuple[int, ...]],
              used: dict[int, set[tuple[str, tuple[int, ...]]]]) -> list[Symmetry] | None:
    """The classes of a split role merged by warpgroup symmetry, or None when the role is
    not symmetric: every class lies in one warpgroup, the classes of warpgroup g are those
    of warpgroup 0 shifted by g warpgroups, each image executes the same ops as its
    representative (subsets shifted; a named barrier only as a copy the image's warpgroup
    alone uses, `used`: barrier id -> the classes that execute it), and no class does
    what `_unshared` lists (writes shared memory, issues bulk copies or stores, adds
    transaction bytes, initialises a barrier)."""
    d = WARPGROUP_WARPS
    if classes == [()] or role.warps % d or role.warps // d < 2:
        return None
    m = role.warps // d
    if any(w // d != c[0] // d for c in classes for w in c):
        return None
    base = [c for c in classes if c[0] < d]
    images = {tuple(w + g * d for w in c) for c in base for g in range(m)}
    if images != set(classes):
        return None
    out = []
    for c in base:
        seq = _executed(role.body, c)
        if _unshared(seq):
            return None
        private: set[int] = set()
        for g in range(1, m):
            image = tuple(w + g * d for w in c)
            rho: dict[int, int] = {}
            if not _same_seq(seq, _executed(role.body, image), g * d, rho):
                return None
            block = {(role.name, tuple(w + g * d for w in k)) for k in base}
            home = {(role.name, k) for k in base}
            for a, b in rho.items():  # each copy is its own warpgroup's alone
                if not used.get(a, set()) <= home or not used.get(b, set()) <= block:
                    return None
                private.add(a)
        members = tuple(sorted(w + g * d for w in c for g in range(m)))
        out.append(Symmetry(role.name, c, members, m, frozenset(private)))
    return out


def named_users(kernel: LoweredKernel) -> dict[int, set[tuple[str, tuple[int, ...]]]]:
    """Named barrier id -> the (role, class) pairs that execute an op on it."""
    used: dict[int, set[tuple[str, tuple[int, ...]]]] = {}
    for role in kernel.roles:
        for c in warp_classes(role):
            for i in _named_ids(_executed(role.body, c), set()):
                used.setdefault(i, set()).add((role.name, c))
    return used


@dataclass
class Program:
    """Every model thread's events for one set of sizes and one CTA."""

    kernel: LoweredKernel
    sizes: dict[str, int]
    cta: tuple[int, int, int]
    threads: list[Thread]
    slots: list[tuple[str, int]]  # slot id -> (barrier, index)
    slot_count: list[int]
    slot_manual: list[bool]
    regions: list[str]  # region id -> description
    trip_counts: dict[str, int] = field(default_factory=dict)  # loop path -> most trips
    spliced: dict[int, tuple[int, int]] = field(default_factory=dict)  # depth -> removed
    # removed per slot: (thread, kind) -> count (arrivals weighted by multiplicity)
    removed: dict[tuple[int, int, str], int] = field(default_factory=dict)
    cluster: int = 1  # CTAs the program runs together (cakegov/analysis/cluster.py)

    @property
    def events(self) -> int:
        return sum(len(t.events) for t in self.threads)

    def slot_name(self, slot: int) -> str:
        name, index = self.slots[slot]
        if self.cluster > 1:
            return f"{name}[{index}] of CTA {slot // (len(self.slots) // self.cluster)}"
        return f"{name}[{index}]"

    def signature(self) -> tuple:
        """What the program does, for deduplicating runs with identical behaviour."""
        return tuple(tuple(_sig(ev) for ev in t.events) for t in self.threads)


def _sig(ev: Event) -> tuple:
    return (ev.kind, ev.path, ev.slot, ev.parity, ev.n, ev.tx, ev.nbytes, ev.who,
            tuple((m.region, m.shift, m.write) for m in ev.mem), ev.named, ev.scope,
            ev.group, ev.pending, ev.cta, ev.peer, ev.dests)


def loops_of(ops: tuple[LOp, ...]) -> list[LFor]:
    out: list[LFor] = []
    for op in ops:
        if isinstance(op, LFor):
            out.append(op)
            out.extend(loops_of(op.body))
    return out


def async_fragments(kernel: LoweredKernel) -> frozenset[str]:
    """Fragments an asynchronous op writes: the only registers the analysis tracks."""
    out: set[str] = set()
    for role in kernel.roles:
        for op in _ops(role.body):
            if isinstance(op, LCompute) and op.group is not None:
                out.update(a.name for a in op.writes if a.space == "reg")
    return frozenset(out)


def _ops(ops: tuple[LOp, ...]):
    for op in ops:
        if isinstance(op, LFor):
            yield from _ops(op.body)
        else:
            yield op


class Builder:
    """Unrolls one LoweredKernel into Programs (one per sizes and CTA)."""

    def __init__(self, kernel: LoweredKernel, footprints: Footprints | None = None,
                 symmetry: bool = True):
        self.kernel = kernel
        self.fp = footprints or Footprints(kernel)
        self.tracked = async_fragments(kernel)
        self.slot_ids: dict[tuple[str, int], int] = {}
        self.slots: list[tuple[str, int]] = []
        self.slot_count: list[int] = []
        self.slot_manual: list[bool] = []
        self._counters: dict[str, int] = {}
        self._compiled: dict[int, Any] = {}
        self._uses: dict[int, int] = {}
        self._keep: list[Expr] = []
        for bar in kernel.barriers:
            for i in range(bar.stages):
                self.slot_ids[(bar.name, i)] = len(self.slots)
                self.slots.append((bar.name, i))
                self.slot_count.append(bar.count)
                self.slot_manual.append(bar.init == "manual")
        self._regions()
        # the model threads of every role (warp classes of split roles), symmetric
        # warpgroups merged (`Symmetry`) unless `symmetry` is off
        self.classes: list[tuple[Any, tuple[int, ...], Symmetry | None]] = []
        self.symmetries: list[Symmetry] = []
        used = named_users(kernel) if symmetry else {}
        for role in kernel.roles:
            classes = warp_classes(role)
            merged = symmetric(kernel, role, classes, used) if symmetry else None
            if merged is None:
                self.classes += [(role, members, None) for members in classes]
            else:
                self.classes += [(role, sym.members, sym) for sym in merged]
                self.symmetries += merged

    def _regions(self) -> None:
        """Stages that share bytes form one region (views never overlap in today's
        layout, but the model does not assume it)."""
        spans: list[tuple[int, int, str, int]] = []
        for buf in self.kernel.buffers:
            for s in range(buf.stages):
                start = buf.offset + s * buf.stage_bytes
                spans.append((start, start + buf.stage_bytes, buf.name, s))
        spans.sort()
        self.region_of: dict[tuple[str, int], tuple[int, int]] = {}
        self.regions: list[str] = []
        current_end = -1
        base = 0
        for start, end, name, stage in spans:
            if start >= current_end:
                self.regions.append(f"{name} stage {stage}")
                base = start
            else:
                self.regions[-1] += f" / {name} stage {stage}"
            current_end = max(current_end, end)
            self.region_of[(name, stage)] = (len(self.regions) - 1, start - base)
        for frag in sorted(self.tracked):
            self.region_of[("reg:" + frag, 0)] = (len(self.regions), 0)
            self.regions.append(f"fragment {frag}")

    def slot(self, barrier: str, index: int, path: str) -> int:
        key = (barrier, index)
        if key not in self.slot_ids:
            bar = self.kernel.barrier(barrier)
            stages = bar.stages if bar is not None else 0
            raise UnrollError(f"{path}: barrier index {barrier}[{index}] is outside its "
                              f"{stages} stage(s)")
        return self.slot_ids[key]

    # ---- unrolling --------------------------------------------------------------------

    def estimate(self, sizes: Mapping[str, int], cta: tuple[int, int, int] = (0, 0, 0),
                 plan: Mapping[int, tuple[int, int]] | None = None,
                 limit: int = 10_000_000) -> int:
        """How many events `build` would make, counted with numpy without building them
        (capped a little above `limit`)."""
        import numpy as np

        from cakegov.analysis.grid import vec_eval

        plan = dict(plan or {})
        blocks = {0: cta[0], 1: cta[1], 2: cta[2]}

        def count(ops, vars_: dict, n: int, depth: int, members: tuple[int, ...]) -> int:
            total = 0
            for op in ops:
                if not executes(members, op):
                    continue
                if not isinstance(op, LFor):
                    total += n
                    continue
                start = np.broadcast_to(np.asarray(vec_eval(op.start, sizes, vars_, blocks, {}),
                                                   dtype=np.int64), (n,))
                stop = np.broadcast_to(np.asarray(vec_eval(op.stop, sizes, vars_, blocks, {}),
                                                  dtype=np.int64), (n,))
                step = np.broadcast_to(np.asarray(vec_eval(step_expr(op.step), sizes, vars_,
                                                           blocks, {}), dtype=np.int64), (n,))
                if n and (step <= 0).any():
                    raise UnrollError(f"{op.path}: the loop step is not positive")
                trips = np.maximum(0, -(-(stop - start) // np.maximum(step, 1)))
                inner = int(trips.sum())
                if inner == 0:
                    continue
                if inner > limit:
                    return limit + 1
                owner = np.repeat(np.arange(n), trips)
                offset = np.arange(inner) - np.repeat(np.cumsum(trips) - trips, trips)
                values = start[owner] + offset * step[owner]
                keep = np.ones(inner, dtype=bool)
                cut = plan.get(depth)
                if cut is not None:
                    keep = (values < cut[0]) | (values >= cut[1])
                deeper = {k: (np.asarray(v)[owner][keep] if isinstance(v, np.ndarray) else v)
                          for k, v in vars_.items()}
                deeper[op.var] = values[keep]
                total += count(op.body, deeper, int(keep.sum()), depth + 1, members)
                if total > limit:
                    return limit + 1
            return total

        out = 0
        for role, members, sym in self.classes:
            out += count(role.body, {}, 1, 0, sym.rep if sym is not None else members)
            if out > limit:
                return limit + 1
        return out

    def build(self, sizes: Mapping[str, int], cta: tuple[int, int, int] = (0, 0, 0),
              plan: Mapping[int, tuple[int, int]] | None = None,
              max_events: int = 100_000) -> Program:
        plan = dict(plan or {})
        program = Program(kernel=self.kernel, sizes=dict(sizes), cta=cta, threads=[],
                          slots=self.slots, slot_count=self.slot_count,
                          slot_manual=self.slot_manual, regions=self.regions,
                          spliced=plan)
        self._total = 0
        self._max = max_events
        blocks = {0: cta[0], 1: cta[1], 2: cta[2]}
        for i, (role, members, sym) in enumerate(self.classes):
            thread = Thread(index=i, role=role.name, warps=len(members) or role.warps,
                            members=members, role_warps=role.warps if members else 0)
            if sym is not None:
                thread.rep, thread.blocks, thread.private = sym.rep, sym.blocks, sym.private
            # a role's running counters (cakegov/ir/persistent.py), all 0 at its start
            self._counters = dict.fromkeys(role.counters, 0)
            try:
                self._visit(role.body, {}, 0, sizes, blocks, thread, program, plan)
            except TooLarge as exc:  # an analysis bound: incomplete, never a crash
                raise UnrollError(str(exc)) from exc
            program.threads.append(thread)
        return program

    def _eval(self, expr: Expr, env: Env, path: str) -> int:
        key = id(expr)
        fn = self._compiled.get(key)
        try:
            if fn is not None:
                return fn(env.sizes, env.vars, env.blocks)
            uses = self._uses[key] = self._uses.get(key, 0) + 1
            if uses == _COMPILE_AFTER:  # evaluated often (a long loop): compile it once
                self._keep.append(expr)  # the id stays this expression's while cached
                with contextlib.suppress(EvalError):
                    self._compiled[key] = compile_expr(expr)
            return evaluate(expr, env)
        except EvalError as exc:
            raise UnrollError(f"{path}: {exc}") from None

    def _visit(self, ops, vars_: dict[str, int], depth: int, sizes, blocks, thread: Thread,
               program: Program, plan) -> None:
        env = Env(sizes=sizes, vars=vars_, blocks=blocks)
        counters = self._counters
        for op in ops:
            if not executes(thread.runs, op):
                continue
            if isinstance(op, LFor):
                start = self._eval(op.start, env, op.path)
                stop = self._eval(op.stop, env, op.path)
                step = op.step if isinstance(op.step, int) else \
                    self._eval(op.step, env, op.path)
                if step <= 0:
                    raise UnrollError(f"{op.path}: the loop step {step} is not positive")
                values = range(start, stop, step)
                program.trip_counts[op.path] = max(program.trip_counts.get(op.path, 0),
                                                   len(values))
                cut = plan.get(depth)
                removed = range(0)
                if cut is not None and op.step == 1:
                    lo, hi = max(cut[0], start), min(cut[1], stop)
                    if lo < hi:
                        removed = range(lo, hi)
                        values = [*range(start, lo), *range(hi, stop)]  # type: ignore[assignment]
                for v in values:
                    self._visit(op.body, {**vars_, op.var: v}, depth + 1, sizes, blocks,
                                thread, program, plan)
                    if op.counter:
                        counters[op.counter] += 1
                if removed:
                    self._count_removed(op, vars_, removed, sizes, blocks, thread, program)
                continue
            self._total += 1
            if self._total > self._max:
                raise UnrollError(f"more than {self._max} events after unrolling")
            if counters:  # the counters' current values join the loop variables
                now = {**vars_, **counters}
                thread.events.append(self._event(op, Env(sizes=sizes, vars=now, blocks=blocks),
                                                 thread, now))
                continue
            thread.events.append(self._event(op, env, thread, vars_))

    def _count_removed(self, loop: LFor, vars_: dict[str, int], removed: range,
                       sizes, blocks, thread: Thread, program: Program) -> None:
        """Count, with numpy, the waits, arrivals and copies per slot that the removed
        iterations of `loop` would have made (Program.removed)."""
        import numpy as np

        from cakegov.analysis.grid import vec_eval

        def visit(ops, env: dict, n: int) -> None:
            for op in ops:
                if not executes(thread.runs, op):
                    continue
                if isinstance(op, LFor):
                    start = np.broadcast_to(np.asarray(
                        vec_eval(op.start, sizes, env, blocks, {}), dtype=np.int64), (n,))
                    stop = np.broadcast_to(np.asarray(
                        vec_eval(op.stop, sizes, env, blocks, {}), dtype=np.int64), (n,))
                    step = np.broadcast_to(np.asarray(
                        vec_eval(step_expr(op.step), sizes, env, blocks, {}), dtype=np.int64),
                        (n,))
                    trips = np.maximum(0, -(-(stop - start) // np.maximum(step, 1)))
                    total = int(trips.sum())
                    if total == 0:
                        continue
                    owner = np.repeat(np.arange(n), trips)
                    offset = np.arange(total) - np.repeat(np.cumsum(trips) - trips, trips)
                    deeper = {k: (np.asarray(v)[owner] if isinstance(v, np.ndarray) else v)
                              for k, v in env.items()}
                    deeper[op.var] = start[owner] + offset * step[owner]
                    visit(op.body, deeper, total)
                    continue
                if isinstance(op, LWait | LArrive):
                    kind, weight, index = ("wait", 1, op.index) if isinstance(op, LWait) \
                        else ("arrive", arrivals(thread.members, op, thread.blocks), op.index)
                elif isinstance(op, LCopy):
                    kind, weight, index = "copy", 1, op.barrier_index
                else:
                    continue
                values = np.broadcast_to(np.asarray(vec_eval(index, sizes, env, blocks, {}),
                                                    dtype=np.int64), (n,))
                for value, times in zip(*np.unique(values, return_counts=True), strict=True):
                    slot = self.slot(op.barrier, int(value), op.path)
                    key = (thread.index, slot, kind)
                    program.removed[key] = program.removed.get(key, 0) + weight * int(times)

        env = {**vars_, loop.var: np.arange(removed.start, removed.stop, dtype=np.int64)}
        visit(loop.body, env, len(removed))

    def _event(self, op: LOp, env: Env, thread: Thread, vars_: dict[str, int]) -> Event:
        base = {"thread": thread.index, "seq": len(thread.events), "path": op.path,
                "line": op.span.line, "iters": tuple(vars_.items()), "role": thread.role,
                "part": thread.part}
        if isinstance(op, LWait):
            slot = self.slot(op.barrier, self._eval(op.index, env, op.path), op.path)
            return Event(kind="wait", slot=slot, parity=self._eval(op.parity, env, op.path) % 2,
                         source=op.source, **base)
        if isinstance(op, LArrive):
            slot = self.slot(op.barrier, self._eval(op.index, env, op.path), op.path)
            who = {"role": "E", "warp": "W0", "thread": "T"}[op.per]
            tx = self._eval(op.tx, env, op.path) if op.expects else 0
            peer = self._eval(op.cta, env, op.path) if op.cta is not None else -1
            return Event(kind="arrive", slot=slot, n=arrivals(thread.members, op, thread.blocks),
                         tx=tx,
                         who=who,
                         source=op.source, peer=peer, **base)
        if isinstance(op, LCopy):
            slot = self.slot(op.barrier, self._eval(op.barrier_index, env, op.path), op.path)
            stage = self._eval(op.stage, env, op.path)
            mem = self._mem(op.buffer, stage, self.fp.engine(op.buffer), True, "async",
                            "engine", op.path)
            dests: tuple[int, ...] = ()
            if op.multicast is not None:
                mask = self._eval(op.multicast, env, op.path)
                if not 0 < mask < 1 << 16:
                    raise UnrollError(f"{op.path}: multicast mask {mask} is not a non-empty "
                                      "16-bit CTA mask")
                dests = tuple(r for r in range(16) if mask >> r & 1)
            return Event(kind="copy", slot=slot, nbytes=op.bytes, who="E", mem=(mem,),
                         source="load", dests=dests, **base)
        if isinstance(op, LNamedSync):
            # a symmetric class brings one warpgroup's threads to its own copy of a barrier
            n = thread.threads // thread.blocks if op.id in thread.private else thread.threads
            return Event(kind="named", named=(op.id, op.threads, op.wait), n=n,
                         derived=op.derived, source=op.barrier, **base)
        if isinstance(op, LFence):
            return Event(kind="fence", scope=op.scope, derived=op.derived,
                         collective=op.scope == "warp", **base)
        if isinstance(op, LInit):
            slot = self.slot(op.barrier, self._eval(op.index, env, op.path), op.path)
            return Event(kind="init", slot=slot, count=op.count, who="E", source=op.source,
                         **base)
        if isinstance(op, LGroupWait):  # wgmma.wait_group is .sync.aligned: lanes converge
            return Event(kind="retire", group=op.group, pending=op.pending, source=op.source,
                         collective=op.group == "wgmma", warpgroup=op.wgmma, **base)
        assert isinstance(op, LCompute)
        mem: list[Mem] = []
        collective = False
        for write, accesses in ((False, op.reads), (True, op.writes)):
            for n, a in enumerate(accesses):
                if a.space == "reg" and a.name in self.tracked:
                    region, _ = self.region_of[("reg:" + a.name, 0)]
                    who = "engine" if op.group else "T"
                    mem.append(Mem(region, 0, _PRIVATE, write, "generic", who, a.name, 0,
                                   space="reg"))
                    continue
                if a.space != "smem":
                    continue
                stage = self._eval(a.stage, env, op.path) if a.stage is not None else 0
                origin = tile_origin(a, lambda e: self._eval(e, env, op.path))
                fp = self.fp.of(thread.role, op.path, n, write, a, origin)
                if thread.members:  # a class of a split role: its own threads' bytes
                    fp = self.fp.restrict(fp, thread.members)
                    if not fp.mask:
                        continue
                who = "engine" if fp.who == ENGINE else ("W0" if a.collective else "T")
                collective = collective or a.collective
                mem.append(self._mem(a.name, stage, fp, write, a.proxy, who, op.path))
        # wgmma.mma_async is .sync.aligned too: every lane of the warp executes it together
        collective = collective or op.group == "wgmma"
        return Event(kind="compute", mem=tuple(mem), primitive=op.primitive,
                     group=op.group or "", collective=collective,
                     warpgroup=op.group == "wgmma" and op.wgmma is not None, **base)

    def _mem(self, buffer: str, stage: int, fp: Footprint, write: bool, proxy: str, who: str,
             path: str) -> Mem:
        key = (buffer, stage)
        if key not in self.region_of:
            buf = self.kernel.buffer(buffer)
            stages = buf.stages if buf is not None else 0
            raise UnrollError(f"{path}: stage {stage} of `{buffer}` is outside its "
                              f"{stages} stage(s)")
        region, shift = self.region_of[key]
        return Mem(region, shift, fp, write, proxy, who, buffer, stage)


_PRIVATE = Footprint(1, 1, 0, None)  # a thread's own registers: never shared
