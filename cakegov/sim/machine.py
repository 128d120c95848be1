"""The CTA machine: every warp of one CTA runs as a coroutine over the lowered program
(`LoweredKernel` role bodies), with the asynchronous proxy as pending operations that
finish when the scheduler says, and real data.

What runs where follows the lowering (cakegov/lower/kernel.py):

- a bulk copy (`LCopy`) and a bulk store (`store_async`) are issued by the first warp of
  the role (after the role synchronisation the lowering inserts); an `arrive(per="role")`,
  `arrive_expect_tx` and `mbarrier.init` by lane 0 of that warp; `arrive(per="warp")` by
  lane 0 of every warp; `arrive(per="thread")` by every lane;
- an op of a `with lm.warps(...)` block (`LOp.subset`) by the warps of the block only,
  its first warp standing for the role's first warp in the rules above;
- waits, named barriers, fences and compute primitives by every warp, each for the
  elements its lanes hold (cakegov/sim/placement.py).

Synchronisation objects are the state machines of cakegov/analysis/semantics.py (the same
classes the protocol analysis drives): `MBarrier` (phase, pending arrivals, tx-count,
`try_wait.parity` passing when the current phase's parity differs, so a waiter two phases
behind aliases), `NamedBarrier` (thread counts per instance), `AsyncGroups` (commit,
finish in order, `wait_group N`). PTX ISA sections: "mbarrier" (9.7.13.15),
"bar/barrier" (9.7.13.4), "wgmma.commit_group/wait_group" (9.7.15.7),
"cp.async.bulk.commit_group/wait_group" (9.7.9.25), "fence.proxy" (9.7.13.4 membar).

Happens-before is tracked with vector clocks. Each warp is two clock threads: lane 0 and
lanes 1-31 (lockstep among themselves), so an elected lane's arrive publishes only what
lane 0 knows unless a `__syncwarp`, a warp-collective instruction or a barrier over the
role merged the lanes first. The asynchronous proxy has its own clock threads: one per
(issuing role, barrier slot) stream of bulk copies and one per (warp, group kind) stream
of wgmma or bulk-store groups. Releases (arrivals, copy completions, named-barrier
arrivals) join into the phase or instance they land in; waiters that observe it acquire
the join."""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cakegov.analysis.footprint import tile_origin
from cakegov.analysis.semantics import (
    AsyncGroups,
    BarrierError,
    MBarrier,
    NamedBarrier,
    OverArrival,
    WarpgroupIssue,
    warpgroup_of,
)
from cakegov.ir.expr import Env, EvalError, Expr, evaluate
from cakegov.lower.kernel import (
    CLUSTER_BARRIER,
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
    LRole,
    LWait,
)
from cakegov.sim.memory import Fragments, GlobalMemory, SharedMemory
from cakegov.sim.ops import OpSim
from cakegov.sim.placement import Placement
from cakegov.sim.scheduler import Strategy, WarpInfo
from cakegov.sim.state import (
    BARRIER,
    DEADLOCK,
    INFLIGHT,
    OOB,
    OVER_ARRIVAL,
    RACE,
    UNINIT,
    WITNESS_STEPS,
    Defect,
    DefectFound,
    EventBound,
    NotSimulated,
)

WARP = 32


def _walk(ops: tuple[LOp, ...], vars_: dict[str, int], ev: Callable[[Expr, dict], int],
          rwarp: int = 0, counters: dict[str, int] | None = None
          ) -> Iterator[tuple[LOp, dict[str, int]]]:
    """The ops of a role body that warp `rwarp` of the role executes, in program order,
    loops unrolled lazily (the ops of a `with lm.warps(...)` block it is not part of are
    skipped). `counters`: the role's running counters (cakegov/ir/persistent.py), advanced
    after each iteration of a loop that names them and visible to the ops with the loop
    variables."""
    for op in ops:
        if op.subset is not None and rwarp not in op.subset:
            continue
        if isinstance(op, LFor):
            start, stop = ev(op.start, vars_), ev(op.stop, vars_)
            step = op.step if isinstance(op.step, int) else ev(op.step, vars_)
            if step <= 0:
                raise NotSimulated(f"{op.path}: the loop step {step} is not positive")
            for v in range(start, stop, step):
                yield from _walk(op.body, {**vars_, op.var: v}, ev, rwarp, counters)
                if op.counter and counters is not None:
                    counters[op.counter] += 1
        elif counters:
            yield op, {**vars_, **counters}
        else:
            yield op, vars_


def _issuer(op: Any) -> int:
    """The warp of the role that issues an elected op: the first of its block's warps."""
    return op.subset[0] if op.subset is not None else 0


@dataclass
class Warp:
    """One warp of the CTA."""

    index: int
    role: LRole
    rwarp: int  # index inside its role
    z: int  # clock thread of lane 0
    r: int  # clock thread of lanes 1-31
    vz: np.ndarray
    vr: np.ndarray
    program: Iterator[tuple[LOp, dict[str, int]]]
    clock: int = 0
    cur: tuple[LOp, dict[str, int]] | None = None
    done: bool = False
    named_wait: tuple[int, int] | None = None  # (barrier id, instance) of a bar.sync
    wait_slot: int = -1  # the current op's slot and parity, when it is a wait
    wait_parity: int = 0
    groups: dict[str, AsyncGroups] = field(default_factory=dict)
    inflight: dict[str, list[tuple[int, frozenset[str]]]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.role.name} warp {self.rwarp}"

    def both(self) -> np.ndarray:
        return np.maximum(self.vz, self.vr)

    def tick(self) -> None:
        self.clock += 1
        self.vz[self.z] = self.clock
        self.vr[self.r] = self.clock

    def acquire(self, vc: np.ndarray) -> None:
        np.maximum(self.vz, vc, out=self.vz)
        np.maximum(self.vr, vc, out=self.vr)

    def converge(self) -> None:
        """Every lane of the warp met every other (`__syncwarp`, a collective)."""
        joined = self.both()
        self.vz[:] = joined
        self.vr[:] = joined


@dataclass
class Slot:
    """One mbarrier object."""

    name: str
    manual: bool
    mb: MBarrier | None
    acc: np.ndarray
    done: dict[int, np.ndarray] = field(default_factory=dict)  # phase -> release join
    init_by: int = -1  # clock thread of the init
    init_clock: int = 0
    fence_clock: int = 0  # fence.mbarrier_init after the init (0: none)
    uses: int = 0


@dataclass
class Named:
    bar: NamedBarrier
    acc: np.ndarray
    done: dict[int, np.ndarray] = field(default_factory=dict)


@dataclass(eq=False)  # identity: two copies of one multicast differ only in arrays
class Pending:
    """An operation of the asynchronous proxy that has not finished."""

    kind: str  # copy | wgmma | bulk
    warp: Warp
    op: Any
    vars: dict[str, int]
    vc: np.ndarray
    agent: int
    clock: int
    slot: int = -1
    line: int = 0
    dest: Any = None  # the Machine of the CTA a multicast copy lands in (None: this one)


class Machine:
    """One CTA of one kernel under one strategy."""

    def __init__(self, kernel: LoweredKernel, sizes: dict[str, int],
                 cta: tuple[int, int, int], ordinal: int, gmem: GlobalMemory,
                 placement: Placement, primitives: dict[str, Any], strategy: type[Strategy]
                 | Callable[[list[WarpInfo]], Strategy], max_events: int,
                 cta_name: Callable[[int], str], cluster: Any = None, rank: int = 0):
        self.kernel = kernel
        self.sizes = sizes
        self.cta = cta
        self.ordinal = ordinal
        self.gmem = gmem
        self.placement = placement
        self.primitives = primitives
        self.max_events = max_events
        self.cta_name = cta_name
        self.blocks = {0: cta[0], 1: cta[1], 2: cta[2]}
        # a thread-block cluster run together (cakegov/sim/cluster.py): every CTA's clock
        # threads live in one vector-clock space, this CTA's from `base` on
        self.cluster = cluster
        self.rank = rank
        self.events = 0
        self.trace: deque[tuple[int, str]] = deque(maxlen=WITNESS_STEPS)
        size = cluster.size if cluster is not None else 1
        self._agents(kernel, size)
        self.base = rank * self.width
        self.width *= size
        self._rebase()
        self.smem = SharedMemory(kernel, self.width)
        self.frags = Fragments(kernel.fragments)
        self.slot_ids: dict[tuple[str, int], int] = {}
        self.slots: list[Slot] = []
        for bar in kernel.barriers:
            for i in range(bar.stages):
                self.slot_ids[(bar.name, i)] = len(self.slots)
                mb = None
                if bar.init == "auto":
                    try:
                        mb = MBarrier(bar.count)
                    except BarrierError as exc:
                        raise NotSimulated(f"mbarrier {bar.name}: {exc}") from None
                self.slots.append(Slot(f"{bar.name}[{i}]", bar.init == "manual", mb,
                                       np.zeros(self.width, dtype=np.int64)))
        self.named: dict[int, Named] = {}
        self.pending: list[Pending] = []
        self.completed: list[tuple[int, int, str, int]] = []  # (agent, clock, what, line)
        self.log: list[list[tuple[int, int, str]]] = [[] for _ in range(self.width)]
        self.warps: list[Warp] = []
        for role in kernel.roles:
            for rw in range(role.warps):
                idx = len(self.warps)
                w = Warp(idx, role, rw, self.base + 2 * idx, self.base + 2 * idx + 1,
                         np.zeros(self.width, dtype=np.int64),
                         np.zeros(self.width, dtype=np.int64),
                         _walk(role.body, {}, self._ev_loop, rw,
                               dict.fromkeys(role.counters, 0)),
                         groups={"wgmma": AsyncGroups(), "bulk": AsyncGroups()},
                         inflight={"wgmma": [], "bulk": []})
                self.warps.append(w)
        # wgmma groups are operations of a whole warpgroup (axiom A13): one issue count per
        # warpgroup of every role whose mma_async lower to wgmma
        self.warpgroups: dict[int, WarpgroupIssue] = {}
        for w in self.warps:
            if any(isinstance(op, LCompute) and op.group == "wgmma" and op.wgmma is not None
                   for op in _ops(w.role.body)):
                wg = self.warpgroups.setdefault(warpgroup_of(w.role.warp_start + w.rwarp),
                                                WarpgroupIssue())
                wg.members[w.index] = 0
        producers = {r.name for r in kernel.roles if _has(r.body, LCopy)}
        infos = [WarpInfo(w.index, w.role.name, w.role.name in producers, w.role.warps)
                 for w in self.warps]
        self.strategy = strategy(infos)
        for w in self.warps:
            self._fetch(w)

    def _rebase(self) -> None:
        """Move this CTA's clock threads to `base` in a cluster's shared clock space."""
        if not self.base and self.width == len(self.names):
            return
        local = len(self.names)
        tag = f"CTA rank {self.rank}: "
        self.names = [""] * self.base + [tag + n for n in self.names] + \
            [""] * (self.width - self.base - local)
        self.copy_agent = {k: v + self.base for k, v in self.copy_agent.items()}
        self.group_agent = {k: v + self.base for k, v in self.group_agent.items()}
        self.agent_clock = [0] * self.width

    def _agents(self, kernel: LoweredKernel, ranks: int = 1) -> None:
        """Clock threads: 2 per warp, then the async proxy's streams (a copy stream per
        destination CTA of the cluster)."""
        nwarps = sum(r.warps for r in kernel.roles)
        self.names = []
        for r in kernel.roles:
            for rw in range(r.warps):
                self.names += [f"{r.name} warp {rw} lane 0", f"{r.name} warp {rw} lanes 1-31"]
        n = 2 * nwarps
        self.copy_agent: dict[tuple[str, str], int] = {}
        self.group_agent: dict[tuple[int, str], int] = {}
        widx = 0
        for r in kernel.roles:
            if _has(r.body, LCopy):
                for bar in kernel.barriers:
                    for i in range(bar.stages):
                        for d in range(ranks):
                            self.copy_agent[(r.name, f"{bar.name}[{i}]", d)] = n
                            into = f" of CTA rank {d}" if ranks > 1 else ""
                            self.names.append(f"the bulk copies {r.name} issues on "
                                              f"{bar.name}[{i}]{into}")
                            n += 1
            kinds = _group_kinds(r.body)
            for rw in range(r.warps):
                for kind in sorted(kinds):
                    self.group_agent[(widx + rw, kind)] = n
                    what = "wgmma groups" if kind == "wgmma" else "bulk stores"
                    self.names.append(f"the {what} of {r.name} warp {rw}")
                    n += 1
            widx += r.warps
        self.width = n
        self.agent_clock = [0] * n

    # ---- helpers ------------------------------------------------------------------------

    def _ev_loop(self, expr: Expr, vars_: dict) -> int:
        try:
            return evaluate(expr, Env(sizes=self.sizes, vars=vars_, blocks=self.blocks))
        except EvalError as exc:
            raise NotSimulated(f"cannot evaluate a loop bound: {exc}") from None

    def eval(self, expr: Expr, vars_: dict, op: Any) -> int:
        try:
            return evaluate(expr, Env(sizes=self.sizes, vars=vars_, blocks=self.blocks))
        except EvalError as exc:
            raise NotSimulated(f"line {op.span.line}: cannot evaluate {exc}") from None

    def where(self, w: Warp, op: Any, vars_: dict) -> str:
        its = ", ".join(f"{k}={v}" for k, v in vars_.items())
        return f"{w.name}" + (f" ({its})" if its else "")

    def note(self, line: int, text: str) -> None:
        self.trace.append((line, text))

    def defect(self, kind: str, message: str, line: int) -> DefectFound:
        cta = "" if not any(self.cta) and self.ordinal == 0 else f" [CTA {self.cta}]"
        steps = (*self.trace, (line, f"{kind}: {message}"[:300]))
        return DefectFound(Defect(kind, message + cta, line, tuple(steps)))

    def describe(self, t: int, clock: int) -> str:
        """The access thread `t` made at `clock` (for race messages)."""
        log = self.log[t]
        i = bisect.bisect_right([c for c, _, _ in log], clock) - 1
        if i >= 0 and log[i][0] == clock:
            return f"{log[i][2]} (line {log[i][1]})"
        return self.names[t] if t >= 0 else "the kernel prologue"

    def slot(self, barrier: str, index: int, op: Any) -> int:
        key = (barrier, index)
        if key not in self.slot_ids:
            bar = self.kernel.barrier(barrier)
            raise self.defect(OOB, f"line {op.span.line}: barrier index {barrier}[{index}] is "
                              f"outside its {bar.stages if bar else 0} stage(s)", op.span.line)
        return self.slot_ids[key]

    def stage_of(self, ref: Any, vars_: dict, op: Any) -> int:
        stage = self.eval(ref.stage, vars_, op) if ref.stage is not None else 0
        start = self.smem.stage_start(ref.name, stage)
        if start is None:
            raise self.defect(OOB, f"line {op.span.line}: stage {stage} of `{ref.name}` is "
                              f"outside its {self.kernel.buffer(ref.name).stages} stage(s)",
                              op.span.line)
        return start

    # ---- the run ------------------------------------------------------------------------

    def _fetch(self, w: Warp) -> None:
        """The warp's next op; a wait's slot and parity are resolved once, here."""
        try:
            w.cur = next(w.program)
        except StopIteration:
            w.cur = None
            w.done = True
            return
        op, vars_ = w.cur
        if isinstance(op, LWait):
            w.wait_slot = self.slot(op.barrier, self.eval(op.index, vars_, op), op)
            w.wait_parity = self.eval(op.parity, vars_, op) % 2

    def can_run(self, w: Warp) -> bool:
        if w.done:
            return False
        op = w.cur[0]  # type: ignore[index]
        if w.named_wait is not None:
            nid, inst = w.named_wait
            return self.named_table(nid)[nid].bar.instance > inst
        if isinstance(op, LWait):
            s = self.slots[w.wait_slot]
            if s.manual and (s.mb is None or not self._init_known(s, w)):
                return True  # executing it reports the misuse
            return s.mb.passes(w.wait_parity)  # type: ignore[union-attr]
        if isinstance(op, LGroupWait):
            return w.groups[op.group].ready(op.pending)
        return True

    def _warpgroup(self, p: Pending) -> WarpgroupIssue | None:
        """The warpgroup a wgmma group belongs to (None: mma_async on mma.sync)."""
        if p.kind != "wgmma" or p.op.wgmma is None:
            return None
        return self.warpgroups.get(warpgroup_of(p.warp.role.warp_start + p.warp.rwarp))

    def completable(self) -> list[Pending]:
        out = []
        heads: set[tuple[int, str]] = set()
        for p in self.pending:
            if p.kind == "copy":
                out.append(p)
            elif (p.warp.index, p.kind) not in heads:  # groups finish in commit order
                heads.add((p.warp.index, p.kind))
                wg = self._warpgroup(p)
                if wg is None or wg.complete(p.clock):  # every warp has issued it
                    out.append(p)
        return out

    def run(self) -> int:
        while True:
            runnable = [w.index for w in self.warps if self.can_run(w)]
            events = self.completable()
            if not runnable and not events:
                break
            self.events += 1
            if self.events > self.max_events:
                raise EventBound(f"more than {self.max_events} events in CTA {self.cta}")
            kind, k = self.strategy.pick(runnable, len(events))
            if kind == "warp":
                self.step(self.warps[k])
            else:
                self.finish(events[k])
        if any(not w.done for w in self.warps):
            self.deadlock()
        self.at_exit()
        return self.events

    # ---- warp steps ---------------------------------------------------------------------

    def step(self, w: Warp) -> None:
        op, vars_ = w.cur  # type: ignore[misc]
        w.tick()
        where = self.where(w, op, vars_)
        line = op.span.line
        if w.named_wait is not None:
            nid, inst = w.named_wait
            w.acquire(self.named_table(nid)[nid].done[inst])
            w.converge()
            w.named_wait = None
            self.note(line, f"{where}: passes {self._named_name(nid)} (instance {inst})")
        elif isinstance(op, LWait):
            self.wait(w, op, vars_, where)
        elif isinstance(op, LArrive):
            self.arrive(w, op, vars_, where)
        elif isinstance(op, LCopy):
            if w.rwarp == _issuer(op):
                self.copy(w, op, vars_, where)
        elif isinstance(op, LNamedSync):
            if self.named_arrive(w, op, where):
                return  # waits at bar.sync: the op is not done yet
        elif isinstance(op, LFence):
            self.fence(w, op, where)
        elif isinstance(op, LInit):
            if w.rwarp == _issuer(op):
                self.init(w, op, vars_, where)
        elif isinstance(op, LGroupWait):
            self.group_wait(w, op, where)
        elif isinstance(op, LCompute):
            self.compute(w, op, vars_, where)
        self._fetch(w)

    def wait(self, w: Warp, op: LWait, vars_: dict, where: str) -> None:
        s = self.slots[w.wait_slot]
        self.check_init(s, w, "wait", op)
        parity = w.wait_parity
        phase = s.mb.observed  # type: ignore[union-attr]
        if phase in s.done:
            w.acquire(s.done[phase])
        s.uses += 1
        self.note(op.span.line, f"{where}: wait {s.name} parity {parity} passes "
                                f"(phase {phase} complete)")

    def arrive(self, w: Warp, op: LArrive, vars_: dict, where: str) -> None:
        if op.per == "role" and w.rwarp != _issuer(op):
            return
        n = WARP if op.per == "thread" else 1  # this warp's arrivals
        target = self if op.cta is None else self.peer(self.eval(op.cta, vars_, op), op)
        sid = target.slot(op.barrier, self.eval(op.index, vars_, op), op)
        s = target.slots[sid]
        lanes = op.per == "thread"
        target.check_init(s, w, "arrive", op, lane0_only=not lanes)
        tx = self.eval(op.tx, vars_, op) if op.expects else 0
        vc = w.both() if lanes else w.vz
        what = f"arrive x{n}" + (f" expect_tx {tx * n} B" if tx else "")
        self.note(op.span.line, f"{where}: {what} on {s.name} (phase {s.mb.phase}, "  # type: ignore[union-attr]
                                f"{s.mb.pending} pending)")  # type: ignore[union-attr]
        for _ in range(n):
            target.contribute(s, vc, op, arrive=True, tx=tx)
        s.uses += 1

    def contribute(self, s: Slot, vc: np.ndarray, op: Any, arrive: bool, tx: int) -> None:
        mb = s.mb
        assert mb is not None
        np.maximum(s.acc, vc, out=s.acc)
        try:
            done = mb.arrive(tx) if arrive else mb.complete_tx(tx)
        except OverArrival as exc:
            raise self.defect(OVER_ARRIVAL, f"line {op.span.line}: arrival on {s.name}: {exc}",
                              op.span.line) from None
        except BarrierError as exc:
            raise self.defect(BARRIER, f"line {op.span.line}: {s.name}: {exc}",
                              op.span.line) from None
        if done:
            s.done[mb.phase - 1] = s.acc.copy()
            s.acc[:] = 0
            self.note(op.span.line, f"{s.name} completes phase {mb.phase - 1}")

    def check_init(self, s: Slot, w: Warp, what: str, op: Any, lane0_only: bool = False
                   ) -> None:
        """A manually initialised barrier is used only after its init is ordered before
        the use (PTX ISA, mbarrier.init; fence.mbarrier_init for the async proxy)."""
        if not s.manual:
            return
        line = op.span.line
        if s.mb is None:
            raise self.defect(UNINIT, f"line {line}: {w.name} uses {s.name} ({what}) before "
                              "any mbarrier.init of it", line)
        if what == "bulk copy":
            if not s.fence_clock or w.vz[s.init_by] < s.fence_clock:
                raise self.defect(RACE, f"line {line}: {w.name} issues a bulk copy completing "
                                  f"on {s.name}, but no fence.mbarrier_init after its init "
                                  "is ordered before the copy: the async proxy may see the "
                                  "barrier uninitialised", line)
        elif not self._init_known(s, w, lane0_only):
            raise self.defect(RACE, f"line {line}: {w.name} uses {s.name} ({what}) but its "
                              "mbarrier.init is not ordered before the use (no fence and "
                              "CTA barrier between them)", line)

    def _init_known(self, s: Slot, w: Warp, lane0_only: bool = False) -> bool:
        """Is the init ordered before this use (by lane 0 only, or by every lane)?"""
        if not s.manual:
            return True
        if s.mb is None:
            return False
        known = w.vz[s.init_by] if lane0_only else min(w.vz[s.init_by], w.vr[s.init_by])
        return known >= s.init_clock

    def copy(self, w: Warp, op: LCopy, vars_: dict, where: str) -> None:
        if op.multicast is None:
            self._copy_into(self, w, op, vars_, where)
            return
        mask = self.eval(op.multicast, vars_, op)
        if not 0 < mask < 1 << 16:
            raise self.defect(OOB, f"line {op.span.line}: multicast mask {mask} is not a "
                              "non-empty 16-bit CTA mask", op.span.line)
        for rank in range(16):  # one copy lands in each destination CTA
            if mask >> rank & 1:
                self._copy_into(self.peer(rank, op), w, op, vars_, where)

    def _copy_into(self, dest: Machine, w: Warp, op: LCopy, vars_: dict, where: str) -> None:
        sid = dest.slot(op.barrier, self.eval(op.barrier_index, vars_, op), op)
        s = dest.slots[sid]
        dest.check_init(s, w, "bulk copy", op, lane0_only=True)
        stage = self.eval(op.stage, vars_, op)
        if self.smem.stage_start(op.buffer, stage) is None:
            raise self.defect(OOB, f"line {op.span.line}: stage {stage} of `{op.buffer}` is "
                              f"outside its {self.kernel.buffer(op.buffer).stages} stage(s)",
                              op.span.line)
        agent = self.copy_agent[(w.role.name, s.name, dest.rank if dest.cluster else 0)]
        self.agent_clock[agent] += 1
        vc = w.both()
        vc[agent] = self.agent_clock[agent]
        self.pending.append(Pending("copy", w, op, vars_, vc, agent, vc[agent], sid,
                                    op.span.line, dest if dest is not self else None))
        into = f" of CTA rank {dest.rank}" if dest is not self else ""
        self.note(op.span.line, f"{where}: bulk copy {op.tensor} -> {op.buffer} stage {stage}"
                                f"{into} issued ({op.bytes} B on {s.name}{into})")

    def _named_name(self, nid: int) -> str:
        if nid == CLUSTER_BARRIER:
            return "the cluster barrier (barrier.cluster)"
        return "the CTA barrier (bar.sync 0)" if nid == 0 else f"named barrier {nid}"

    def named_table(self, nid: int) -> dict[int, Named]:
        """The named barriers of this CTA; the cluster barrier is the cluster's."""
        if nid == CLUSTER_BARRIER:
            if self.cluster is None:
                raise NotSimulated("lm.sync_cluster() outside a cluster run")
            return self.cluster.named
        return self.named

    def peer(self, rank: int, op: Any) -> Machine:
        """The machine of cluster rank `rank`, which must not have exited yet: a write
        into the shared memory of a CTA that has exited is undefined (CUDA programming
        guide, "Distributed Shared Memory")."""
        if self.cluster is None:
            if rank != 0:
                raise self.defect(OOB, f"line {op.span.line}: CTA rank {rank} of a launch "
                                  "without a cluster", op.span.line)
            return self
        if not 0 <= rank < self.cluster.size:
            raise self.defect(OOB, f"line {op.span.line}: CTA rank {rank} outside the "
                              f"cluster of {self.cluster.size}", op.span.line)
        target = self.cluster.machines[rank]
        if target is not self and all(w.done for w in target.warps):
            raise self.defect(INFLIGHT, f"line {op.span.line}: a remote write into CTA rank "
                              f"{rank} lands after that CTA has exited (no lm.sync_cluster() "
                              "before its end)", op.span.line)
        return target

    def named_arrive(self, w: Warp, op: LNamedSync, where: str) -> bool:
        """Arrive at a named barrier; True when the warp now waits (bar.sync)."""
        table = self.named_table(op.id)
        nb = table.get(op.id)
        if nb is None:
            try:
                nb = table[op.id] = Named(NamedBarrier(op.threads),
                                               np.zeros(self.width, dtype=np.int64))
            except BarrierError as exc:
                raise NotSimulated(str(exc)) from None
        elif nb.bar.threads != op.threads:
            raise self.defect(BARRIER, f"line {op.span.line}: {w.name} uses "
                              f"{self._named_name(op.id)} with {op.threads} threads, another "
                              f"user declared {nb.bar.threads} (undefined, PTX ISA bar.sync)",
                              op.span.line)
        inst = nb.bar.instance
        np.maximum(nb.acc, w.both(), out=nb.acc)
        done, left = nb.bar.arrive(WARP)
        name = self._named_name(op.id)
        if done:
            nb.done[inst] = nb.acc.copy()
            nb.acc[:] = w.both() if left else 0
            self.note(op.span.line, f"{where}: {name} completes (instance {inst})")
        else:
            self.note(op.span.line, f"{where}: {'waits at' if op.wait else 'arrives at'} "
                                    f"{name} ({nb.bar.arrived}/{nb.bar.threads} threads)")
        if op.wait:
            w.named_wait = (op.id, inst)
            return True
        return False

    def fence(self, w: Warp, op: LFence, where: str) -> None:
        if op.scope == "proxy_async":
            self.smem.fence(w.z, w.clock)
            self.smem.fence(w.r, w.clock)
            # the warp's own MMA groups it has retired: on the mma.sync path their operand
            # reads are the warp's `ldmatrix` loads (generic), simulated on the group's
            # clock; the fence covers every group up to the last retired one
            for kind in w.groups:
                agent = self.group_agent.get((w.index, kind))
                if agent is not None and w.vz[agent] > 0:
                    self.smem.fence(agent, int(w.vz[agent]), covers_own_clock=True)
            self.note(op.span.line, f"{where}: fence.proxy.async")
        elif op.scope == "warp":
            w.converge()
            self.note(op.span.line, f"{where}: __syncwarp"
                                    + (f" (inserted for {op.derived})" if op.derived else ""))
        else:
            for s in self.slots:
                if s.manual and s.mb is not None and s.init_by in (w.z, w.r):
                    s.fence_clock = w.clock
            self.note(op.span.line, f"{where}: fence.mbarrier_init")

    def init(self, w: Warp, op: LInit, vars_: dict, where: str) -> None:
        sid = self.slot(op.barrier, self.eval(op.index, vars_, op), op)
        s = self.slots[sid]
        if not s.manual or s.mb is not None:
            state = "initialised by the kernel prologue" if not s.manual else \
                "already initialised and not invalidated"
            raise self.defect(BARRIER, f"line {op.span.line}: {w.name} re-initialises "
                              f"{s.name}, which is {state} (undefined, PTX ISA mbarrier.init)",
                              op.span.line)
        try:
            s.mb = MBarrier(op.count)
        except BarrierError as exc:
            raise NotSimulated(f"mbarrier {s.name}: {exc}") from None
        s.init_by, s.init_clock = w.z, w.clock
        self.note(op.span.line, f"{where}: mbarrier.init {s.name} count {op.count}")

    def group_wait(self, w: Warp, op: LGroupWait, where: str) -> None:
        groups = w.groups[op.group]
        retired = groups.wait(op.pending)
        agent = self.group_agent.get((w.index, op.group))
        if agent is not None:
            w.vz[agent] = max(w.vz[agent], retired)
            w.vr[agent] = max(w.vr[agent], retired)
        w.inflight[op.group] = [g for g in w.inflight[op.group] if g[0] > retired]
        if op.group == "wgmma":
            w.converge()  # wgmma.wait_group is .sync.aligned
            wg = self.warpgroups.get(warpgroup_of(w.role.warp_start + w.rwarp)) \
                if op.wgmma else None
            for m in wg.members if wg is not None else ():
                # the retired operations were the warpgroup's: their operand reads on
                # behalf of every warp are complete (axiom A13)
                other = self.group_agent.get((m, "wgmma"))
                if other is not None:
                    w.vz[other] = max(w.vz[other], retired)
                    w.vr[other] = max(w.vr[other], retired)
        self.note(op.span.line, f"{where}: {op.source} pending={op.pending}: {retired} "
                                "group(s) retired")

    # ---- compute ------------------------------------------------------------------------

    def compute(self, w: Warp, op: LCompute, vars_: dict, where: str) -> None:
        prim = self.primitives.get(op.primitive)
        if prim is None or prim.simulate is None:
            raise NotSimulated(f"primitive `{op.primitive}` has no numpy semantics "
                               "(`simulate`)")
        if op.group == "bulk" and w.rwarp != _issuer(op):
            return
        self.register_hazard(w, op)
        if op.group is not None:
            groups = w.groups[op.group]
            ordinal = groups.commit()
            agent = self.group_agent[(w.index, op.group)]
            vc = w.both()
            vc[agent] = ordinal
            frags = frozenset(a.name for a in op.writes if a.space == "reg")
            w.inflight[op.group].append((ordinal, frags))
            self.pending.append(Pending(op.group, w, op, vars_, vc, agent, ordinal,
                                        line=op.span.line))
            if op.group == "wgmma":
                w.converge()
                if op.wgmma is not None:
                    self.warpgroups[warpgroup_of(w.role.warp_start + w.rwarp)].issue(w.index)
            self.note(op.span.line, f"{where}: {op.primitive} issued (group {ordinal})")
            return
        text = f"{where}: {op.primitive}"
        for value in op.args.values():  # a sub-tile outside its fragment: out of bounds
            self.window(value, vars_, op)
        self.smem_accesses(w, op, vars_, text)
        sim = OpSim(self, w, op, vars_)
        try:
            prim.simulate(op, sim)
        except ValueError:
            # numpy cannot combine the operands: their shapes disagree, and the kernel
            # indexes one tile with the coordinates of another, past the smaller one
            shapes = {name: sim.shape(name) for name, v in op.args.items()
                      if getattr(v, "kind", None) in ("smem", "fragment")}
            if len(set(shapes.values())) < 2:
                raise
            listed = ", ".join(f"`{op.args[n].name}` {r} x {c}" for n, (r, c) in shapes.items())
            raise self.defect(OOB, f"line {op.span.line}: `{op.primitive}` combines tiles "
                                   f"of different shapes ({listed}): the kernel reads or "
                                   "writes past the smaller one", op.span.line) from None
        if any(a.collective for a in op.reads):
            w.converge()
        self.note(op.span.line, text)

    def register_hazard(self, w: Warp, op: LCompute) -> None:
        """A fragment an unretired asynchronous group writes is touched by the warp (a
        later group on the same accumulator is ordered by the hardware)."""
        busy = {f for g in w.inflight.values() for _, fs in g for f in fs}
        if not busy:
            return
        chained = op.group == "wgmma"
        for a in (*op.reads, *op.writes):
            if a.space == "reg" and a.name in busy and not chained:
                raise self.defect(RACE, f"line {op.span.line}: {w.name} touches fragment "
                                  f"{a.name} ({op.primitive}) while an mma_async group "
                                  "writing it is in flight: no mma_wait retired it",
                                  op.span.line)

    def smem_accesses(self, w: Warp, op: LCompute, vars_: dict, text: str) -> None:
        """Check and record the warp's shared-memory reads, then writes, of `op`."""
        for write, accesses in ((False, op.reads), (True, op.writes)):
            for i, a in enumerate(accesses):
                if a.space != "smem":
                    continue
                stage = self.eval(a.stage, vars_, op) if a.stage is not None else 0
                start = self.smem.stage_start(a.name, stage)
                if start is None:
                    raise self.defect(OOB, f"line {op.span.line}: stage {stage} of `{a.name}` "
                                      f"is outside its {self.kernel.buffer(a.name).stages} "
                                      "stage(s)", op.span.line)
                share = self.placement.smem(w.role.name, op.path, i, write, a, w.rwarp,
                                            self.origin(a, vars_, op))
                nbytes = self.kernel.buffer(a.name).stage_bytes
                what = f"{text} {'writes' if write else 'reads'} {a.name} stage {stage}"
                for t, vc, idx in ((w.z, w.vz, share.lane0), (w.r, w.vr, share.lanes)):
                    if isinstance(idx, np.ndarray) and len(idx) == 0:
                        continue
                    g = self.smem.granules(start, nbytes, idx)
                    self.access(t, vc, g, write, False, what, op.span.line)

    def access(self, t: int, vc: np.ndarray, g: np.ndarray, write: bool, async_: bool,
               what: str, line: int) -> None:
        conflict = self.smem.check(t, vc, g, write, async_)
        self.log[t].append((int(vc[t]), line, what))
        if conflict is None:
            return
        where = self.smem.where(conflict.granule)
        if conflict.kind == UNINIT:
            raise self.defect(UNINIT, f"line {line}: {what}: {where} was never written",
                              line)
        other = self.describe(conflict.other, conflict.clock)
        if conflict.kind == "proxy-war":
            theirs = "write" if conflict.write else "read"
            raise self.defect(RACE, f"line {line}: {what} overwrites {where} through the "
                              f"async proxy after a generic {theirs} of it by {other}, with "
                              "no fence.proxy.async in that thread between its "
                              f"{theirs} and the release that ordered the copy's issue "
                              "(PTX ISA, memory consistency model: proxies)", line)
        if conflict.kind == "proxy":
            raise self.defect(RACE, f"line {line}: {what} through the async proxy after the "
                              f"generic write {other} of {where} with no fence.proxy.async "
                              "in the writer between the write and the hand-off", line)
        mine = "write" if write else "read"
        theirs = "write" if conflict.write else "read"
        raise self.defect(RACE, f"line {line}: {what}: this {mine} of {where} is unordered "
                          f"with the {theirs} {other} by {self.names[conflict.other]}", line)

    # ---- the asynchronous proxy ---------------------------------------------------------

    def finish(self, p: Pending) -> None:
        wg = self._warpgroup(p)
        if wg is not None:  # one operation of the warpgroup: every warp's part finishes
            for q in [q for q in self.pending if q.kind == "wgmma" and q.clock == p.clock
                      and q.warp.index in wg.members and q is not p]:
                self._finish(q)
        self._finish(p)

    def _finish(self, p: Pending) -> None:
        self.pending.remove(p)
        w = p.warp
        dm: Machine = self
        if p.kind == "copy":
            op: LCopy = p.op
            if p.dest is not None:
                dm = self.peer(p.dest.rank, op)  # the destination has not exited
            stage = self.eval(op.stage, p.vars, op)
            start = dm.smem.stage_start(op.buffer, stage)
            g = dm.smem.granules(start, self.kernel.buffer(op.buffer).stage_bytes, None)
            what = f"the bulk copy {op.tensor} -> {op.buffer} stage {stage} (line {op.span.line})"
            dm.access(p.agent, p.vc, g, True, True, what, op.span.line)
            self.primitives["load"].simulate(op, OpSim(self, w, op, p.vars, engine=True,
                                                       dest=dm))
            s = dm.slots[p.slot]
            if s.mb is None:
                raise self.defect(UNINIT, f"line {op.span.line}: the bulk copy completes on "
                                  f"{s.name}, which is not initialised", op.span.line)
            self.note(op.span.line, f"{what} lands ({op.bytes} B complete_tx on {s.name})")
            dm.contribute(s, p.vc, op, arrive=False, tx=op.bytes)
        else:
            op2: LCompute = p.op
            w.groups[p.kind].finish()
            text = f"{op2.primitive} group {p.clock} of {w.name}"
            for i, a in enumerate(op2.reads):
                if a.space != "smem":
                    continue
                stage = self.eval(a.stage, p.vars, op2) if a.stage is not None else 0
                start = self.smem.stage_start(a.name, stage)
                if start is None:
                    raise self.defect(OOB, f"line {op2.span.line}: stage {stage} of "
                                      f"`{a.name}` is outside its stages", op2.span.line)
                nbytes = self.kernel.buffer(a.name).stage_bytes
                share = self.placement.smem(w.role.name, op2.path, i, False, a, w.rwarp,
                                            self.origin(a, p.vars, op2))
                g = self.smem.granules(start, nbytes, None if share.engine else share.warp)
                self.access(p.agent, p.vc, g, False, a.proxy == "async",
                            f"{text} reads {a.name} stage {stage}", op2.span.line)
            engine = p.kind == "bulk"
            self.primitives[op2.primitive].simulate(op2, OpSim(self, w, op2, p.vars,
                                                                engine=engine))
            self.note(op2.span.line, f"{text} finishes")
        dm.completed.append((p.agent, int(p.clock), self._what(p), p.line))

    def _what(self, p: Pending) -> str:
        if p.kind == "copy":
            return f"the bulk copy into {p.op.buffer} issued by {p.warp.name}"
        return f"{p.op.primitive} group {p.clock} of {p.warp.name}"

    # ---- data ---------------------------------------------------------------------------

    def share(self, w: Warp, op: LCompute, name: str, write: bool,
              vars_: dict | None = None) -> np.ndarray:
        accesses = op.writes if write else op.reads
        for i, a in enumerate(accesses):
            if a.name == name and a.space == "smem":
                return self.placement.smem(w.role.name, op.path, i, write, a, w.rwarp,
                                           self.origin(a, vars_ or {}, op)).elements
        raise NotSimulated(f"line {op.span.line}: `{op.primitive}` touches `{name}` outside "
                           "its declared effects")

    def origin(self, access: Any, vars_: dict, op: Any) -> tuple[int, int] | None:
        """The origin of the fragment window an access's spread follows (a sub-tile)."""
        return tile_origin(access, lambda e: self.eval(e, vars_, op))

    def window(self, value: Any, vars_: dict, op: Any) -> tuple[slice, slice] | None:
        """The rows and columns of a fragment sub-tile operand (`acc[:, a:b]`), checked
        against the fragment's extents; None for a whole fragment."""
        tile = getattr(value, "tile", None)
        if tile is None:
            return None
        rows, cols = self.frags.shapes[value.name]
        r0, c0 = self.eval(tile.row0, vars_, op), self.eval(tile.col0, vars_, op)
        if r0 < 0 or c0 < 0 or r0 + tile.rows > rows or c0 + tile.cols > cols:
            raise self.defect(OOB, f"line {op.span.line}: sub-tile [{r0}:{r0 + tile.rows}, "
                              f"{c0}:{c0 + tile.cols}] of fragment {value.name} is outside "
                              f"its {rows} x {cols} elements", op.span.line)
        return slice(r0, r0 + tile.rows), slice(c0, c0 + tile.cols)

    def read_fragment(self, w: Warp, name: str, op: Any,
                      window: tuple[slice, slice] | None = None) -> np.ndarray:
        elements = self.placement.fragment(name, w.rwarp)
        if window is not None:  # only the sub-tile's elements are read
            inside = np.zeros_like(elements)
            inside[window] = elements[window]
            elements = inside
        values, problem = self.frags.read(w.role.name, name, elements)
        if problem:
            raise self.defect(UNINIT, f"line {op.span.line}: {w.name}: {problem}",
                              op.span.line)
        return values if window is None else values[window]

    def _view(self, tensor: str) -> tuple[int, int]:
        p = self.kernel.param(tensor)
        if p is None:
            raise NotSimulated(f"tensor {tensor} is not a kernel parameter")
        env = Env(sizes=self.sizes)
        return evaluate(p.rows, env), evaluate(p.cols, env)

    def read_global(self, tensor: str, view: tuple[int, int], r0: int, c0: int, rows: int,
                    cols: int, pad: bool, op: Any) -> np.ndarray:
        fill = None
        if pad and self.kernel.zero_bytes:
            dtype = self.kernel.tensors[tensor][0]
            lo = self.kernel.zero_offset
            from cakegov.ir.dtypes import dtype_bytes
            from cakegov.sim.memory import decode
            n = min(self.kernel.zero_bytes, cols * dtype_bytes(dtype))
            fill = decode(dtype, self.smem.data[lo:lo + n])
        values, problem = self.gmem.read(tensor, view, r0, c0, rows, cols, pad, fill)
        if problem:
            raise self.defect(OOB, f"line {op.span.line}: {problem}", op.span.line)
        return values

    def write_global(self, tensor: str, row: int, col: int, values: np.ndarray,
                     elements: np.ndarray, guard: bool, op: Any) -> None:
        problem = self.gmem.write(tensor, self._view(tensor), row, col, values, elements,
                                  guard, self.ordinal, self.cta_name)
        if problem:
            kind = problem.split(":", 1)[0]
            raise self.defect(kind, f"line {op.span.line}: {problem.split(': ', 1)[1]}",
                              op.span.line)

    # ---- the end ------------------------------------------------------------------------

    def deadlock(self) -> None:
        parts = []
        line = 0
        for w in self.warps:
            if w.done:
                continue
            op, vars_ = w.cur  # type: ignore[misc]
            line = line or op.span.line
            where = f"{self.where(w, op, vars_)} at line {op.span.line}"
            if w.named_wait is not None:
                nid, inst = w.named_wait
                bar = self.named_table(nid)[nid].bar
                parts.append(f"{where} waits at {self._named_name(nid)} (instance {inst}, "
                             f"{bar.arrived} of {bar.threads} threads arrived)")
            elif isinstance(op, LWait):
                s = self.slots[self.slot(op.barrier, self.eval(op.index, vars_, op), op)]
                mb = s.mb
                parity = self.eval(op.parity, vars_, op) % 2
                parts.append(f"{where} waits on {s.name} parity {parity} (the barrier is in "
                             f"phase {mb.phase} with {mb.pending} arrival(s) and {mb.tx} tx "  # type: ignore[union-attr]
                             "byte(s) outstanding)")
            elif isinstance(op, LGroupWait):
                g = w.groups[op.group]
                parts.append(f"{where} waits for {op.group} groups (pending={op.pending}, "
                             f"{g.committed - g.finished} unfinished)")
            else:
                parts.append(f"{where} is blocked")
        shown = parts[:6] + ([f"and {len(parts) - 6} more warps"] if len(parts) > 6 else [])
        for w in self.warps:
            if not w.done:
                op, vars_ = w.cur  # type: ignore[misc]
                self.note(op.span.line, f"{self.where(w, op, vars_)}: blocks forever")
        raise self.defect(DEADLOCK, "every warp is blocked and no copy is pending: "
                          + "; ".join(shown), line)

    def at_exit(self) -> None:
        """The CTA exits: asynchronous work no warp waited for may still be in flight."""
        for w in self.warps:
            for kind, groups in w.groups.items():
                if groups.committed > groups.retired:
                    line = w.inflight[kind][0][0] if w.inflight[kind] else 0
                    spell = "lm.mma_wait" if kind == "wgmma" else "lm.store_wait"
                    raise self.defect(INFLIGHT, f"{w.name} ends with "
                                      f"{groups.committed - groups.retired} {kind} group(s) "
                                      f"not retired: no {spell}(pending=0) before the kernel "
                                      "exits", self._group_line(w, kind) or line)
        known = np.zeros(self.width, dtype=np.int64)
        for w in self.warps:
            np.maximum(known, w.both(), out=known)
        for agent, clock, what, line in self.completed:
            if known[agent] < clock:
                raise self.defect(INFLIGHT, f"line {line}: {what} is waited for by no warp: "
                                  "the CTA can exit while it is still in flight", line)

    def _group_line(self, w: Warp, kind: str) -> int:
        for op in _ops(w.role.body):
            if isinstance(op, LCompute) and op.group == kind:
                return op.span.line
        return 0


def _ops(ops: tuple[LOp, ...]) -> Iterator[LOp]:
    for op in ops:
        if isinstance(op, LFor):
            yield from _ops(op.body)
        else:
            yield op


def _has(ops: tuple[LOp, ...], kind: type) -> bool:
    return any(isinstance(op, kind) for op in _ops(ops))


def _group_kinds(ops: tuple[LOp, ...]) -> set[str]:
    return {op.group for op in _ops(ops) if isinstance(op, LCompute) and op.group}
