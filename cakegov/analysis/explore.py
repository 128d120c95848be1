"""Explores every interleaving the barriers allow and reports deadlocks, races, proxy
violations, parity anomalies, barrier-initialisation order, unfinished asynchronous groups
and reads of shared memory nothing wrote, each with the shortest witness trace.

Model (DESIGN.md, "Semantics"): an mbarrier slot is (completed phases, pending arrivals,
transaction bytes); a phase completes when both reach zero. `wait(parity=p)` passes when
the slot's current phase parity differs from `p` and observes the latest completed phase.
Bulk copies write their stage at issue time for race purposes and complete at any later
moment, subtracting their bytes. Happens-before is tracked with vector clocks: program
order per role, arrivals (and completing copies) joined into the phase they complete,
joined into every role whose wait observes it; named barriers join all participants.

Asynchronous groups (`mma_async`: wgmma, `store_async`: bulk) access memory on their own
lane `<group>:<role>`: the n-th group of a role accesses at clock n of that lane, and the
role's clock learns the lane only when a group wait (`mma_wait`, `store_wait`) retires the
group. A release before that wait does not carry the access, so a later write by whoever
observes the release races with it; a group still in flight when its role ends is an
`async-pending` anomaly. Generic-proxy writes are marked with the clock of the writer's
first later `fence.proxy.async`; an async-proxy read they happen before must also happen
after that fence (`proxy`). A shared-memory read with no write to its location before it
in the trace is `uninit`. Barriers declared `init="manual"` move from uninitialised to
initialised (`init`), fenced (`fence_barrier_init` by the initialising role) and published
(the next `sync_cta`); a use in any other state, or a second `init`, is `init-order`.

Search is breadth-first, so the first witness found for an anomaly is a shortest one.
Partial-order reduction: local steps (compute, fences, copy issue, barrier init, group
waits) commute with the steps of other roles up to the checks (which use vector clocks
and per-slot states, not the order), so they run eagerly in a fixed order; the search
branches only on synchronisation steps and copy completions. Bounds on states and time
make the result `incomplete`, never clean."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

from cakegov.analysis.unroll import Event, Location, Slot, Unrolled
from cakegov.lower.kernel import LoweredKernel

VC = tuple[tuple[str, int], ...]
_LOCAL = frozenset({"compute", "fence", "copy", "init", "retire"})
_GROUP_WAIT = {"wgmma": "lm.mma_wait", "bulk": "lm.store_wait"}

# Initialisation states of a barrier slot declared init="manual".
UNINITIALISED, INITIALISED, FENCED, PUBLISHED = 0, 1, 2, 3
INIT_STATES = ("uninitialised", "initialised but not fenced", "fenced but not published by "
               "a CTA sync", "published")


def _slots(ev: Event, with_copies: bool = False) -> frozenset:
    """The barrier slots or named barriers a step touches (a copy's completion touches
    its slot, which counts for the issuing role's future, not for the issue itself; a
    barrier init resets its slot, which also only counts for the future)."""
    if ev.kind in ("wait", "arrive") and ev.slot is not None:
        return frozenset((ev.slot,))
    if ev.kind in ("copy", "init") and with_copies and ev.slot is not None:
        return frozenset((ev.slot,))
    if ev.kind == "named" and ev.named is not None:
        return frozenset((("named", ev.named[0]),))
    return frozenset()


def _vc_get(vc: VC, lane: str) -> int:
    for k, v in vc:
        if k == lane:
            return v
    return 0


def _vc_join(a: VC, b: VC) -> VC:
    if not b:
        return a
    if not a:
        return b
    merged = dict(a)
    for k, v in b:
        if v > merged.get(k, 0):
            merged[k] = v
    return tuple(sorted(merged.items()))


def _vc_tick(vc: VC, lane: str) -> VC:
    merged = dict(vc)
    merged[lane] = merged.get(lane, 0) + 1
    return tuple(sorted(merged.items()))


def describe(ev: Event) -> str:
    """A witness step for a local event: what it accesses."""
    def locs(items) -> str:
        return ", ".join(f"{n}[{s}]" if space == "smem" else n for (space, n, s), _ in items)

    if ev.kind == "copy":
        return f"bulk copy into {locs(ev.writes)} issued"
    parts = [ev.primitive or ev.kind]
    if ev.group:
        parts.append("issued")
    if ev.reads:
        parts.append(f"reads {locs(ev.reads)}")
    if ev.writes:
        parts.append(f"writes {locs(ev.writes)}")
    return " ".join(parts)


def group_lane(group: str, role: str) -> str:
    """The vector-clock lane of a role's asynchronous groups of one kind."""
    return f"{group}:{role}"


@dataclass(frozen=True)
class Access:
    """One memory access in the shadow state. `fenced`: for a generic write, the writer's
    clock at its first later proxy fence (0: none yet). `origin`: for an asynchronous
    access, the issuing role's clock at issue."""

    lane: str
    clock: int
    # (lane, clock, write) identify the access; comparing whole events would make every
    # state hash walk them
    event: Event = field(compare=False)
    write: bool
    proxy: str
    fenced: int = 0
    origin: int = 0


@dataclass(frozen=True)
class Anomaly:
    """Something the exploration observed, with the trace that leads to it."""

    kind: str  # deadlock | race | proxy | aliasing | stale-wait | overflow | named |
    #            leftover | uninit | init-order | async-pending
    message: str
    events: tuple[Event, ...]  # the events the anomaly is about (first: where to point)
    witness: tuple[tuple[int, str], ...]  # (source line, step) from the initial state
    resource: str = ""
    details: dict = field(default_factory=dict, compare=False, hash=False)


@dataclass
class Exploration:
    anomalies: list[Anomaly]
    states: int
    complete: bool
    reason: str = ""
    elapsed: float = 0.0


@dataclass(frozen=True)
class _Bar:
    phase: int
    pending: int
    tx: int
    acc: VC  # join of the current phase's arrivals
    done: VC  # VC of the latest completed phase


@dataclass(frozen=True)
class _State:
    pcs: tuple[int, ...]
    bars: tuple[tuple[Slot, _Bar], ...]
    inflight: tuple[tuple[str, int, VC], ...]  # copies issued, not complete: role, seq, vc
    vcs: tuple[VC, ...]
    named: tuple[tuple[int, int, tuple[str, ...], VC], ...]  # id, arrived, waiters, acc
    shadow: tuple[tuple[Location, tuple[Access, ...]], ...]
    observed: tuple[tuple[tuple[str, Slot], int], ...]  # role, slot -> last phase seen
    inits: tuple[tuple[Slot, tuple[int, int]], ...] = ()  # manual slot -> (state, role)
    firsts: tuple[tuple[Location, tuple[str, int]], ...] = ()  # first write: lane, clock


def _groups(events: tuple[Event, ...]) -> tuple[dict[int, int], dict[int, int],
                                                 dict[str, int]]:
    """Per event seq: the ordinal of each async group op and the number of groups retired
    by each group wait (its lane's new clock); and the total issued per group."""
    ordinal: dict[int, int] = {}
    retire: dict[int, int] = {}
    issued: dict[str, int] = {}
    for ev in events:
        if ev.kind == "compute" and ev.group:
            issued[ev.group] = issued.get(ev.group, 0) + 1
            ordinal[ev.seq] = issued[ev.group]
        elif ev.kind == "retire":
            retire[ev.seq] = max(0, issued.get(ev.group, 0) - ev.pending)
    return ordinal, retire, issued


class Explorer:
    """Breadth-first exploration of one unrolled kernel."""

    def __init__(self, kernel: LoweredKernel, unrolled: Unrolled, max_states: int = 50_000,
                 max_seconds: float = 2.0):
        self.kernel = kernel
        self.unrolled = unrolled
        self.roles = [r.name for r in kernel.roles]
        self.events = [unrolled.roles[r] for r in self.roles]
        self.threads = {r.name: r.warps * 32 for r in kernel.roles}
        self.counts = {b.name: b.count for b in kernel.barriers}
        self.manual = frozenset(b.name for b in kernel.barriers if b.init == "manual")
        self.groups = [_groups(evs) for evs in self.events]
        self.written = frozenset(loc for evs in self.events for ev in evs
                                 for loc, _ in ev.writes)
        self.max_states = max_states
        self.max_seconds = max_seconds
        self.anomalies: dict[tuple, Anomaly] = {}
        # future[i][pc]: every slot role i may still touch from event pc on
        self.future: list[list[frozenset]] = []
        for events in self.events:
            suffix: list[frozenset] = [frozenset()] * (len(events) + 1)
            for pc in range(len(events) - 1, -1, -1):
                suffix[pc] = suffix[pc + 1] | _slots(events[pc], with_copies=True)
            self.future.append(suffix)

    # ---- helpers ---------------------------------------------------------------------

    def bar(self, state: _State, slot: Slot) -> _Bar:
        for s, b in state.bars:
            if s == slot:
                return b
        return self.fresh(slot)

    def fresh(self, slot: Slot) -> _Bar:
        return _Bar(phase=0, pending=self.counts.get(slot[0], 1), tx=0, acc=(), done=())

    @staticmethod
    def set_bar(bars: tuple, slot: Slot, value: _Bar) -> tuple:
        out = dict(bars)
        out[slot] = value
        return tuple(sorted(out.items()))

    def record(self, key: tuple, anomaly: Anomaly) -> None:
        self.anomalies.setdefault(key, anomaly)

    def trace(self, parents: dict, state: _State, last: tuple[int, str] | None = None
              ) -> tuple[tuple[int, str], ...]:
        steps: list[tuple[int, str]] = []
        cur: _State | None = state
        while cur is not None and parents.get(cur) is not None:
            prev, label = parents[cur]
            if label:
                steps.append(label)
            cur = prev
        steps.reverse()
        if last:
            steps.append(last)
        return tuple(steps)

    # ---- barrier initialisation ------------------------------------------------------

    def init_state(self, state: _State, slot: Slot) -> tuple[int, int]:
        """(state, initialising role index) of a slot; prologue-initialised: published."""
        if slot[0] not in self.manual:
            return (PUBLISHED, -1)
        for s, v in state.inits:
            if s == slot:
                return v
        return (UNINITIALISED, -1)

    def check_use(self, state: _State, ev: Event, parents: dict, what: str) -> None:
        """A wait, arrive or copy on a manually initialised slot must come after its
        init, the initialising role's fence and a CTA sync."""
        assert ev.slot is not None
        if ev.slot[0] not in self.manual:
            return
        status, _ = self.init_state(state, ev.slot)
        if status == PUBLISHED:
            return
        key = ("init-order", ev.path, ev.slot)
        if key in self.anomalies:
            return
        name = f"{ev.slot[0]}[{ev.slot[1]}]"
        self.record(key, Anomaly(
            kind="init-order",
            message=(f"{ev.role} uses {name} ({what}, {ev.where()}) while it is "
                     f"{INIT_STATES[status]}"),
            events=(ev,), witness=self.trace(parents, state, (ev.line, f"{ev.where()}: "
                                                              f"{what} on {name}")),
            resource=ev.slot[0],
            details={"slot": ev.slot, "state": INIT_STATES[status], "status": status}))

    # ---- memory ----------------------------------------------------------------------

    def access(self, shadow: dict, firsts: dict, loc: Location, acc: Access, vc: VC,
               trace_fn) -> None:
        """Check one access against the location's history, then record it. `firsts`
        holds each location's first write: when the writes to a location are ordered
        among themselves (else they race), a read follows some write in happens-before
        exactly when it follows the first one."""
        history = list(shadow.get(loc, ()))
        for prev in history:
            if prev.event.role == acc.event.role and prev.lane == acc.lane:
                continue
            if not (prev.write or acc.write):
                continue
            if _vc_get(vc, prev.lane) >= prev.clock:
                continue
            self.race(loc, prev, acc, vc, trace_fn)
        if not acc.write and loc[0] == "smem":
            first = firsts.get(loc)
            if first is None or _vc_get(vc, first[0]) < first[1]:
                self.uninit(loc, acc, trace_fn)
        if acc.write and loc not in firsts:
            firsts[loc] = (acc.lane, acc.clock)
        if not acc.write and acc.proxy == "async":
            for prev in history:
                if not (prev.write and prev.proxy == "generic"):
                    continue
                if _vc_get(vc, prev.lane) < prev.clock:
                    continue  # unordered: a race, reported above
                if prev.fenced and _vc_get(vc, prev.lane) >= prev.fenced:
                    continue
                key = ("proxy", loc, prev.event.path, acc.event.path)
                if key in self.anomalies:
                    continue
                self.record(key, Anomaly(
                    kind="proxy",
                    message=(f"{acc.event.role} reads {loc[1]} stage {loc[2]} through the "
                             f"async proxy ({acc.event.primitive}, {acc.event.where()}) "
                             f"after generic writes by {prev.event.role} "
                             f"({prev.event.where()}) with no fence.proxy.async between "
                             "the write and the hand-off"),
                    events=(acc.event, prev.event), witness=trace_fn(), resource=loc[1],
                    details={"stage": loc[2], "writer": prev.event.path,
                             "reader": acc.event.path,
                             "fenced_late": bool(prev.fenced)}))
        if acc.write:
            history = [acc]
        else:
            history = [h for h in history if h.write or h.lane != acc.lane] + [acc]
        shadow[loc] = tuple(history)

    def race(self, loc: Location, prev: Access, acc: Access, vc: VC, trace_fn) -> None:
        first, second = prev.event, acc.event
        key = ("race", loc, frozenset((first.path, second.path)))
        if key in self.anomalies:
            return
        kind = "write" if acc.write else "read"
        pkind = "write" if prev.write else "read"
        where = f"{loc[1]} stage {loc[2]}" if loc[0] == "smem" else f"fragment {loc[1]}"
        via = ""
        if first.group:
            via = (f" through {first.primitive}, which no "
                   f"{_GROUP_WAIT.get(first.group, 'group wait')} had retired")
        self.record(key, Anomaly(
            kind="race",
            message=(f"{second.role} {kind}s {where} ({second.where()}) unordered with the "
                     f"{pkind} by {first.role} ({first.where()}){via}"),
            events=(second, first), witness=trace_fn(), resource=loc[1],
            details={"stage": loc[2], "space": loc[0], "first": first.path,
                     "second": second.path, "first_kind": pkind, "second_kind": kind,
                     "first_group": first.group,
                     # ordered after the async op's issue but not its completion
                     "issue_ordered": bool(first.group)
                     and _vc_get(vc, first.role) >= prev.origin}))

    def uninit(self, loc: Location, acc: Access, trace_fn) -> None:
        key = ("uninit", acc.event.path, loc)
        if key in self.anomalies:
            return
        ev = acc.event
        self.record(key, Anomaly(
            kind="uninit",
            message=(f"{ev.role} reads {loc[1]} stage {loc[2]} ({ev.where()}) but no write "
                     "to that stage happens before the read"),
            events=(ev,), witness=trace_fn(), resource=loc[1],
            details={"stage": loc[2], "never_written": loc not in self.written}))

    # ---- transitions -----------------------------------------------------------------

    def successors(self, state: _State, parents: dict):
        """Yield (label, next_state) for the steps of a persistent set of threads.

        Partial-order reduction: a local step (compute, fence, copy issue, barrier init,
        group wait) is taken alone. Otherwise the threads are the roles and one copy
        engine per barrier slot with copies in flight (completing in issue order: their
        relative order only matters through the slot's transaction count). Two steps are
        dependent when they touch the same barrier slot or named barrier. From each thread
        with an enabled step, the set is closed under "its next step touches a slot that
        another thread may still touch" (the roles' remaining events are known); the
        smallest such set is persistent, and only its enabled steps are explored."""
        for i in range(len(self.roles)):
            pc = state.pcs[i]
            if pc < len(self.events[i]) and self.events[i][pc].kind in _LOCAL:
                nxt = self.step(state, i, self.events[i][pc], parents)
                if nxt is not None:
                    yield nxt
                    return
        first: dict[Slot, tuple] = {}
        for entry in state.inflight:
            ev = self.events[self.roles.index(entry[0])][entry[1]]
            assert ev.slot is not None
            if ev.slot not in first or (entry[0], entry[1]) < first[ev.slot][1][:2]:
                first[ev.slot] = (ev, entry)
        threads: list[tuple[frozenset, frozenset, tuple | None]] = []  # next, future, step
        for i in range(len(self.roles)):
            pc = state.pcs[i]
            if pc >= len(self.events[i]):
                continue
            ev = self.events[i][pc]
            threads.append((_slots(ev), self.future[i][pc], self.step(state, i, ev, parents)))
        for slot, (ev, entry) in first.items():
            key = frozenset((slot,))
            threads.append((key, key, self.complete_copy(state, ev, entry)))
        best: set[int] | None = None
        for seed, (_, _, step) in enumerate(threads):
            if step is None:
                continue
            members, frontier = {seed}, [seed]
            while frontier:
                touched = threads[frontier.pop()][0]
                for other, (_, future, _) in enumerate(threads):
                    if other not in members and touched & future:
                        members.add(other)
                        frontier.append(other)
            if best is None or len(members) < len(best):
                best = members
                if len(best) == 1:
                    break
        for index in sorted(best or ()):
            step = threads[index][2]
            if step is not None:
                yield step

    def advance(self, state: _State, i: int, **changes) -> _State:
        pcs = list(state.pcs)
        pcs[i] += 1
        return _State(**{**state.__dict__, "pcs": tuple(pcs), **changes})

    def arrive(self, bars: tuple, slot: Slot, n: int, tx: int, vc: VC, ev: Event | None,
               state: _State, parents: dict) -> tuple:
        b = self.bar(_State(**{**state.__dict__, "bars": bars}), slot)
        tx_total = b.tx + tx
        pending = b.pending - n
        acc = _vc_join(b.acc, vc)
        if pending < 0 and ev is not None and ("overflow", slot, ev.path) not in self.anomalies:
            self.record(("overflow", slot, ev.path), Anomaly(
                kind="overflow",
                message=(f"{ev.role} arrives on {slot[0]}[{slot[1]}] more often than its "
                         f"count {self.counts.get(slot[0])} allows in one phase"),
                events=(ev,), witness=self.trace(parents, state, (ev.line, ev.where())),
                resource=slot[0], details={"slot": slot}))
        if pending < 0:
            pending = 0
        if pending == 0 and tx_total == 0:
            b = _Bar(phase=b.phase + 1, pending=self.counts.get(slot[0], 1), tx=0, acc=(),
                     done=acc)
        else:
            b = _Bar(phase=b.phase, pending=pending, tx=tx_total, acc=acc, done=b.done)
        return self.set_bar(bars, slot, b)

    def step(self, state: _State, i: int, ev: Event, parents: dict):
        if ev.kind == "wait":
            return self.wait(state, i, ev, parents)
        if ev.kind == "named":
            return self.named(state, i, ev, parents)
        role = self.roles[i]
        vc = _vc_tick(state.vcs[i], role)
        vcs = list(state.vcs)

        def label(text: str, ev: Event = ev) -> tuple[int, str]:
            return (ev.line, f"{ev.where()}: {text}")

        if ev.kind == "arrive":
            assert ev.slot is not None
            self.check_use(state, ev, parents, "arrive")
            bars = self.arrive(state.bars, ev.slot, ev.arrivals, ev.tx, vc, ev, state,
                               parents)
            vcs[i] = vc
            what = f"arrive x{ev.arrivals}" + (f" expect_tx {ev.tx} B" if ev.tx else "")
            return (label(f"{what} on {ev.slot[0]}[{ev.slot[1]}]"),
                    self.advance(state, i, bars=bars, vcs=tuple(vcs)))
        return self.local(state, i, ev, vc, parents, label)

    def wait(self, state: _State, i: int, ev: Event, parents: dict):
        role = self.roles[i]
        assert ev.slot is not None
        b = self.bar(state, ev.slot)
        if b.phase % 2 == ev.parity:
            return None  # blocked: the phase with this parity has not completed
        vc = _vc_tick(state.vcs[i], role)
        vcs = list(state.vcs)

        def label(text: str) -> tuple[int, str]:
            return (ev.line, f"{ev.where()}: {text}")

        self.check_use(state, ev, parents, "wait")
        seen = b.phase - 1
        observed = dict(state.observed)
        key = (role, ev.slot)
        last = observed.get(key)
        expected = (last + 1) if last is not None else (0 if ev.parity == 0 else -1)
        if seen > expected and (seen - expected) % 2 == 0 and seen >= 0 and \
                ("aliasing", ev.path, ev.slot) not in self.anomalies:
            self.record(("aliasing", ev.path, ev.slot), Anomaly(
                kind="aliasing",
                message=(f"{role} waits on {ev.slot[0]}[{ev.slot[1]}] with parity "
                         f"{ev.parity} while {seen - expected} phases behind: the wait "
                         "cannot tell phase "
                         f"{expected} from phase {seen} ({ev.where()})"),
                events=(ev,), witness=self.trace(parents, state, label("wait passes")),
                resource=ev.slot[0], details={"expected": expected, "seen": seen}))
        if last is not None and seen <= last and ev.parity == (last % 2) and \
                ("stale", ev.path, ev.slot) not in self.anomalies:
            self.record(("stale", ev.path, ev.slot), Anomaly(
                kind="stale-wait",
                message=(f"{role}'s wait on {ev.slot[0]}[{ev.slot[1]}] with parity "
                         f"{ev.parity} passes on phase {seen}, which it already "
                         f"observed ({ev.where()})"),
                events=(ev,), witness=self.trace(parents, state, label("wait passes")),
                resource=ev.slot[0], details={"seen": seen}))
        observed[key] = max(seen, last if last is not None else -1)
        vcs[i] = _vc_join(vc, b.done)
        nxt = self.advance(state, i, vcs=tuple(vcs),
                           observed=tuple(sorted(observed.items())))
        return (label(f"wait {ev.slot[0]}[{ev.slot[1]}] parity {ev.parity} passes "
                      f"(phase {seen} done)"), nxt)

    def named(self, state: _State, i: int, ev: Event, parents: dict):
        role = self.roles[i]
        assert ev.named is not None
        nid, threads, waits = ev.named
        named = {n: (arr, w, acc) for n, arr, w, acc in state.named}
        arrived, waiters, acc = named.get(nid, (0, (), ()))
        if role in waiters:
            return None  # still blocked at bar.sync
        vc = _vc_tick(state.vcs[i], role)
        vcs = list(state.vcs)
        what = "CTA barrier (bar.sync 0)" if ev.cta_sync else f"named barrier {nid}"

        def label(text: str) -> tuple[int, str]:
            return (ev.line, f"{ev.where()}: {text}")

        arrived += self.threads[role]
        acc = _vc_join(acc, vc)
        if arrived > threads:
            self.record(("named-over", nid, ev.path), Anomaly(
                kind="named",
                message=(f"{what} receives {arrived} threads but was "
                         f"declared for {threads} ({ev.where()})"),
                events=(ev,), witness=self.trace(parents, state, label("named arrive")),
                resource=str(nid)))
        if arrived >= threads:
            # release every waiter (they advance past their sync) and this role
            pcs = list(state.pcs)
            for w in waiters:
                j = self.roles.index(w)
                pcs[j] += 1
                vcs[j] = _vc_join(vcs[j], acc)
            pcs[i] += 1
            vcs[i] = _vc_join(vc, acc)
            named.pop(nid, None)
            inits = state.inits
            if ev.cta_sync and inits:  # publishes every fenced barrier initialisation
                inits = tuple((s, (PUBLISHED, r) if st == FENCED else (st, r))
                              for s, (st, r) in inits)
            nxt = _State(**{**state.__dict__, "pcs": tuple(pcs), "vcs": tuple(vcs),
                            "named": tuple(sorted((n, *v) for n, v in named.items())),
                            "inits": inits})
            return (label(f"{what} completes"), nxt)
        vcs[i] = vc
        if waits:
            named[nid] = (arrived, (*waiters, role), acc)
            nxt = _State(**{**state.__dict__, "vcs": tuple(vcs),
                            "named": tuple(sorted((n, *v) for n, v in named.items()))})
            return (label(f"waits at {what} ({arrived}/{threads})"), nxt)
        named[nid] = (arrived, waiters, acc)
        return (label(f"arrives at {what} ({arrived}/{threads})"),
                self.advance(state, i, vcs=tuple(vcs),
                             named=tuple(sorted((n, *v) for n, v in named.items()))))

    def local(self, state: _State, i: int, ev: Event, vc: VC, parents: dict, label):
        """Compute, fence, copy issue, barrier init, group wait: no blocking, no choice."""
        role = self.roles[i]
        vcs = list(state.vcs)
        shadow = dict(state.shadow)
        firsts = dict(state.firsts)
        inflight = state.inflight
        changes: dict = {}

        def trace_fn(ev=ev, state=state):
            return self.trace(parents, state, (ev.line, f"{ev.where()}: {describe(ev)}"))

        text = describe(ev)
        if ev.kind == "fence":
            if ev.scope == "proxy_async":
                clock = _vc_get(vc, role)
                for loc, hist in shadow.items():
                    if any(h.write and h.lane == role and not h.fenced for h in hist):
                        shadow[loc] = tuple(
                            Access(h.lane, h.clock, h.event, h.write, h.proxy, clock,
                                   h.origin)
                            if h.write and h.lane == role and not h.fenced else h
                            for h in hist)
            elif ev.scope == "mbarrier_init" and state.inits:
                changes["inits"] = tuple((s, (FENCED, r) if st == INITIALISED and r == i
                                          else (st, r)) for s, (st, r) in state.inits)
            text = {"proxy_async": "fence.proxy.async", "warp": "syncwarp",
                    "mbarrier_init": "fence.mbarrier_init"}.get(ev.scope, "fence")
        elif ev.kind == "init":
            changes["bars"], changes["inits"] = self.init(state, i, ev, parents, label)
            assert ev.slot is not None
            text = f"mbarrier.init {ev.slot[0]}[{ev.slot[1]}] count {ev.count}"
        elif ev.kind == "retire":
            lane = group_lane(ev.group, role)
            retired = self.groups[i][1][ev.seq]
            vc = _vc_join(vc, ((lane, retired),))
            text = f"{ev.source or 'group wait'} pending={ev.pending}: {retired} group(s) done"
        elif ev.kind == "copy":
            assert ev.slot is not None
            self.check_use(state, ev, parents, "bulk copy")
            lane = f"copy:{role}:{ev.seq}"
            cvc = _vc_tick(vc, lane)
            for loc, proxy in ev.writes:
                self.access(shadow, firsts, loc, Access(lane, 1, ev, True, proxy), cvc,
                            trace_fn)
            inflight = tuple(sorted((*inflight, (role, ev.seq, cvc))))
        elif ev.group:
            lane = group_lane(ev.group, role)
            ordinal = self.groups[i][0][ev.seq]
            origin = _vc_get(vc, role)
            for loc, proxy in ev.reads:
                self.access(shadow, firsts, loc, Access(lane, ordinal, ev, False, proxy,
                                                        origin=origin), vc, trace_fn)
            for loc, proxy in ev.writes:
                self.access(shadow, firsts, loc, Access(lane, ordinal, ev, True, proxy,
                                                        origin=origin), vc, trace_fn)
            text = f"{describe(ev)} (group {ordinal})"
        else:
            clock = _vc_get(vc, role)
            for loc, proxy in ev.reads:
                self.access(shadow, firsts, loc, Access(role, clock, ev, False, proxy), vc,
                            trace_fn)
            for loc, proxy in ev.writes:
                self.access(shadow, firsts, loc, Access(role, clock, ev, True, proxy), vc,
                            trace_fn)
        vcs[i] = vc
        return (label(text),
                self.advance(state, i, vcs=tuple(vcs), shadow=tuple(sorted(shadow.items())),
                             firsts=tuple(sorted(firsts.items())) if len(firsts) !=
                             len(state.firsts) else state.firsts,
                             inflight=inflight, **changes))

    def init(self, state: _State, i: int, ev: Event, parents: dict, label):
        """mbarrier.init: a fresh phase 0 with the declared count, state initialised."""
        assert ev.slot is not None
        status, _ = self.init_state(state, ev.slot)
        name = f"{ev.slot[0]}[{ev.slot[1]}]"
        if status != UNINITIALISED:
            self.record(("init-order", ev.path, ev.slot), Anomaly(
                kind="init-order",
                message=(f"{ev.role} initialises {name} again ({ev.where()}) while it is "
                         f"{INIT_STATES[status]}: re-initialising a barrier in use is "
                         "undefined"),
                events=(ev,), witness=self.trace(parents, state, label(f"init {name}")),
                resource=ev.slot[0],
                details={"slot": ev.slot, "state": INIT_STATES[status], "status": status,
                         "reinit": True}))
        bars = self.set_bar(state.bars, ev.slot, self.fresh(ev.slot))
        inits = dict(state.inits)
        inits[ev.slot] = (INITIALISED, i)
        return bars, tuple(sorted(inits.items()))

    def complete_copy(self, state: _State, ev: Event, entry: tuple):
        assert ev.slot is not None
        bars = self.arrive(state.bars, ev.slot, 0, -ev.bytes, entry[2], None, state, {})
        inflight = tuple(x for x in state.inflight if x != entry)
        return ((ev.line, f"copy from {ev.where()} completes {ev.bytes} B on "
                 f"{ev.slot[0]}[{ev.slot[1]}]"),
                _State(**{**state.__dict__, "bars": bars, "inflight": inflight}))

    # ---- search ----------------------------------------------------------------------

    def run(self) -> Exploration:
        start = time.perf_counter()
        n = len(self.roles)
        init = _State(pcs=(0,) * n, bars=(), inflight=(), vcs=((),) * n, named=(),
                      shadow=(), observed=())
        parents: dict[_State, tuple[_State, str] | None] = {init: None}
        queue = deque([init])
        complete = True
        reason = ""
        while queue:
            if len(parents) > self.max_states:
                complete, reason = False, f"state bound {self.max_states} reached"
                break
            if time.perf_counter() - start > self.max_seconds:
                complete, reason = False, f"time bound {self.max_seconds:g} s reached"
                break
            state = queue.popleft()
            succ = list(self.successors(state, parents))
            if not succ:
                self.terminal(state, parents)
            for label, nxt in succ:
                if nxt not in parents:
                    parents[nxt] = (state, label)
                    queue.append(nxt)
        return Exploration(anomalies=list(self.anomalies.values()), states=len(parents),
                           complete=complete, reason=reason,
                           elapsed=time.perf_counter() - start)

    def terminal(self, state: _State, parents: dict) -> None:
        blocked = []
        for i in range(len(self.roles)):
            pc = state.pcs[i]
            if pc < len(self.events[i]):
                blocked.append(self.events[i][pc])
        if blocked:
            parts = []
            for ev in blocked:
                if ev.kind == "wait" and ev.slot is not None:
                    b = self.bar(state, ev.slot)
                    parts.append(
                        f"{ev.role} waits on {ev.slot[0]}[{ev.slot[1]}] parity {ev.parity} "
                        f"({ev.where()}); the barrier is in phase {b.phase} with "
                        f"{b.pending} arrival(s) and {b.tx} tx byte(s) outstanding")
                elif ev.cta_sync:
                    parts.append(f"{ev.role} waits at the CTA barrier sync_cta "
                                 f"({ev.where()}), which not every role reaches")
                else:
                    parts.append(f"{ev.role} blocks at {ev.kind} ({ev.where()})")
            key = ("deadlock", tuple(e.path for e in blocked))
            self.record(key, Anomaly(
                kind="deadlock", message="deadlock: " + "; ".join(parts),
                events=tuple(blocked), witness=self.trace(parents, state),
                resource=blocked[0].slot[0] if blocked[0].slot else "",
                details={"slots": [e.slot for e in blocked if e.slot],
                         "bars": {f"{s[0]}[{s[1]}]": (b.phase, b.pending, b.tx)
                                  for s, b in state.bars}}))
            return
        for slot, b in state.bars:
            if b.tx != 0 or b.pending != self.counts.get(slot[0], 1):
                key = ("leftover", slot)
                self.record(key, Anomaly(
                    kind="leftover",
                    message=(f"kernel exits with {slot[0]}[{slot[1]}] mid-phase: "
                             f"{b.pending} arrival(s) and {b.tx} tx byte(s) outstanding"),
                    events=(), witness=self.trace(parents, state), resource=slot[0],
                    details={"slot": slot, "pending": b.pending, "tx": b.tx}))
        self.pending_groups(state, parents)

    def pending_groups(self, state: _State, parents: dict) -> None:
        """Asynchronous groups still in flight when their role ends."""
        for i, role in enumerate(self.roles):
            ordinal, _, issued = self.groups[i]
            for group, total in issued.items():
                retired = _vc_get(state.vcs[i], group_lane(group, role))
                if retired >= total:
                    continue
                late = tuple(ev for ev in self.events[i] if ev.group == group
                             and ev.kind == "compute" and ordinal[ev.seq] > retired)
                smem = [loc for loc, _ in late[0].reads if loc[0] == "smem"]
                self.record(("async-pending", role, group), Anomaly(
                    kind="async-pending",
                    message=(f"{role} ends with {total - retired} {late[0].primitive} "
                             f"group(s) still in flight (first: {late[0].where()}): no "
                             f"{_GROUP_WAIT.get(group, 'group wait')}(pending=0) "
                             "retires them before the kernel exits"),
                    events=late, witness=self.trace(parents, state),
                    resource=smem[0][1] if smem else "",
                    details={"group": group, "issued": total, "retired": retired}))


def explore(kernel: LoweredKernel, unrolled: Unrolled, max_states: int = 50_000,
            max_seconds: float = 2.0) -> Exploration:
    return Explorer(kernel, unrolled, max_states, max_seconds).run()
