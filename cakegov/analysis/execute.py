"""Execute a Program once, in a canonical order, and decide from that one execution what
*every* execution the barriers allow would do.

Why one execution suffices (docs/checker.md, "Why one execution decides"). Threads run
deterministic programs; the only freedom is the order of their steps and when copies land.
Along the canonical execution we record, for every wait, the phase it observed; for every
arrival and copy, the phase it landed in; for every named-barrier arrival, its instance.
These choices define a dependency graph (program order; contributions -> phase completion
-> the waits that observe it) whose vector clocks are computed as we go. If, for every
wait observing phase g of a slot, phase g-1 is forced to complete before the waiter
reaches it and the waiter is forced to reach it before phase g+1 can complete; and every
arrival and copy of phase f is forced after phase f-1 has completed (likewise for named
barrier instances), then every execution makes the same choices (induction over any
execution's prefix), so every execution has the same happens-before relation and the same
termination. A violated condition is an anomaly in its own right, with a witness built
from the dependency graph. Races, reads of unwritten memory, proxy hand-offs without a
fence and unfinished asynchronous work are then properties of the one happens-before
relation, checked with vector clocks at every access.

Lanes of the vector clocks, per model thread (one role, its warps in lockstep): `E` (the
elected thread), `W0` (lane 0 of every warp), `Tm` (every thread, memory ordering) and
`Ts` (every thread, progress); plus one lane per asynchronous group kind of the thread
(wgmma, bulk) and one per (issuing thread, barrier slot) stream of bulk copies. A thread
also keeps epochs: the clock up to which every thread of the role knows every other
(`ke`, `kw0`, `ktm`, `kts`: one per own lane) and every lane of each warp knows its warp
(`lane`, `s_lane`). A barrier over the whole role, `__syncwarp()`,
warp-collective instructions and observed phases that carry the role's own lanes raise
them. Which of the role's threads a release carries, and so what its waiters learn,
follows from who performs it (`Event.who`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from cakegov.analysis.footprint import LANES, SAME, WARPS, Footprints
from cakegov.analysis.program import Event, Mem, Program
from cakegov.analysis.semantics import (
    WARPGROUP_WARPS,
    AsyncGroups,
    BarrierError,
    MBarrier,
    NamedBarrier,
    OverArrival,
    WarpgroupIssue,
    needs_proxy_fence,
    proxy_fenced,
    warpgroup_of,
)

E, W0, TM, TS = 0, 1, 2, 3
GROUPS = ("wgmma", "bulk")
# Anomalies one execution records (each with its witness, whose ancestry walk is the
# costly part). The corpus has at most 12 per execution; a schedule issuing a hundred
# copies into one stage per iteration has ~10,000 pairwise races, and the verdict needs
# only the first: the rest add nothing but time.
MAX_ANOMALIES = 64


@dataclass(slots=True)
class Step:
    """One step of the canonical execution, for witnesses."""

    thread: int  # -1: a copy completing
    clock: int  # the thread's clock after the step (copies: the copy ordinal)
    line: int
    said: str  # what happened; `text` prefixes where it happened when `ev` is given
    lane: int = -1  # the vector-clock lane the step is stamped on
    ev: Event | None = None

    @property
    def text(self) -> str:
        """`said`, after `ev.where()` when the step names its event: built only for the
        steps a witness shows (the trace of a long run has millions, and formatting
        where each happened was a tenth of the analysis)."""
        return f"{self.ev.where()}: {self.said}" if self.ev is not None else self.said


@dataclass
class Anomaly:
    """Something no execution may do, found with its witness trace."""

    kind: str
    message: str
    events: tuple[Event, ...]  # first: where it shows
    resource: str = ""
    details: dict = field(default_factory=dict)
    witness: tuple[tuple[int, str], ...] = ()  # (source line, step)

    @property
    def key(self) -> tuple:
        return (self.kind, self.resource, tuple(e.path for e in self.events))


@dataclass
class Outcome:
    """The result of executing one Program."""

    program: Program
    anomalies: list[Anomaly]
    steps: int
    complete: bool = True
    reason: str = ""
    observed: dict[tuple[int, int], int] = field(default_factory=dict)  # (thread, seq)
    work: int = 0  # earlier accesses compared with a new one (the race checks' cost)


@dataclass(slots=True, eq=False)
class _Rec:
    """An access in a region's history."""

    thread: int
    lane: int
    clock: int
    mem: Mem
    event: Event
    async_: bool  # performed by the asynchronous proxy (copy, group)
    fenced: int = 0  # generic write: the writer's clock at its first later proxy fence


@dataclass
class _Slot:
    mb: MBarrier
    acc: list[int]
    contrib: list[Event]
    done: dict[int, list[int]] = field(default_factory=dict)  # phase -> completion VC
    done_by: dict[int, tuple[Event, ...]] = field(default_factory=dict)
    watch: dict[int, list[tuple[int, int, Event]]] = field(default_factory=dict)
    init: int = 0  # manual init: 0 none, 1 initialised, 2 fenced
    init_thread: int = -1
    init_clock: int = 0
    fence_clock: int = 0


@dataclass
class _Named:
    # the state machine; its thread count is the one the current bar.sync/bar.arrive names
    # (PTX ISA, bar: the count is an operand of each instruction)
    state: NamedBarrier = field(default_factory=lambda: NamedBarrier(threads=1))
    acc: list[int] = field(default_factory=list)
    waiters: list[tuple[int, int]] = field(default_factory=list)  # (thread, clock)
    members: list[Event] = field(default_factory=list)
    done: dict[int, list[int]] = field(default_factory=dict)


class _Thread:
    __slots__ = ("base", "c", "col_all", "col_first", "done", "events", "groups", "info",
                 "issued", "ke", "know", "ktm", "kts", "kw0", "lane", "pc", "reach",
                 "s_lane", "warps", "wg_retired", "wgs")

    def __init__(self, info, base: int, width: int):
        self.info = info
        self.events = info.events
        self.warps = info.warps
        self.base = base
        self.pc = 0
        self.c = 0
        self.know = [0] * width
        # every thread of the role knows the role's E, W0, Tm, Ts lanes up to these ...
        self.ke = self.kw0 = self.ktm = self.kts = 0
        # ... and every lane of each warp knows its own warp's lanes up to these
        self.lane = self.s_lane = 0
        self.groups = {g: AsyncGroups() for g in GROUPS}  # committed and retired, per kind
        self.reach = 0
        self.done = False
        # warpgroup-collective wgmma groups (axiom A13): the clock of each group's issue,
        # the warpgroups the thread's warps belong to, and what a retire taught it of the
        # other model threads of those warpgroups: thread -> (their progress, their groups
        # retired), as known by all of its warps (`col_all`, each warp of its own
        # warpgroup) and by its first warp (`col_first`, the elected thread's)
        self.issued: list[int] = []
        self.wgs: tuple[int, ...] = ()
        self.col_all: dict[int, tuple[int, int]] = {}
        self.col_first: dict[int, tuple[int, int]] = {}
        # a model thread spanning several warpgroups: the wgmma groups each warp knows its
        # own warpgroup has completed (not the others': every thread knows only what a
        # barrier over the role then tells it)
        self.wg_retired = 0


def _join(a: list[int], b: list[int]) -> None:
    for i, v in enumerate(b):
        if v > a[i]:
            a[i] = v


def _leq(a: list[int], b: list[int]) -> bool:
    return all(x <= y for x, y in zip(a, b, strict=True))


class Executor:
    """The canonical execution of one Program and its checks."""

    def __init__(self, program: Program, footprints: Footprints, max_steps: int = 400_000):
        self.p = program
        self.fp = footprints
        self.max_steps = max_steps
        n = len(program.threads)
        self.group_lane = {(i, g): 4 * n + 2 * i + k for i in range(n)
                           for k, g in enumerate(GROUPS)}
        lanes = 6 * n
        self.copy_lane: dict[tuple[int, int], int] = {}
        for t in program.threads:
            for ev in t.events:
                if ev.kind == "copy" and (t.index, ev.slot) not in self.copy_lane:
                    self.copy_lane[(t.index, ev.slot)] = lanes
                    lanes += 1
        self.width = lanes
        self.t = [_Thread(info, 4 * i, lanes) for i, info in enumerate(program.threads)]
        self.warpgroups: dict[tuple[int, str, int], WarpgroupIssue] = {}
        self._warpgroups()
        self.slots = [_Slot(MBarrier(max(1, c)), [0] * lanes, []) for c in program.slot_count]
        self.named: dict[tuple[int, int], _Named] = {}
        self.remote: list[tuple[Event, int, int]] = []  # remote arrive, its lane, clock
        self.history: dict[int, list[_Rec]] = {}
        self.work = 0
        self.written: dict[int, int] = {}  # region -> bytes any write has touched
        self.copies: list[tuple[Event, int, list[int]]] = []  # in flight: ev, ordinal, vc
        self.copy_ordinal: dict[tuple[int, int], int] = {}
        self.copy_done: list[tuple[Event, int, int]] = []  # (event, lane, ordinal)
        self.trace: list[Step] = []
        self.anomalies: dict[tuple, Anomaly] = {}
        self.observed: dict[tuple[int, int], int] = {}

    def _warpgroups(self) -> None:
        """The warpgroups of the kernel's wgmma roles, each with the model threads whose
        warps it holds (a role split by `with lm.warps(...)` has several per warpgroup)."""
        starts = {r.name: r.warp_start for r in self.p.kernel.roles}
        for i, t in enumerate(self.t):
            info = t.info
            if not any(ev.warpgroup for ev in info.events):
                continue
            warps = info.members or tuple(range(info.warps))
            t.wgs = tuple(sorted({warpgroup_of(starts[info.role] + w) for w in warps}))
            for g in t.wgs:
                wg = self.warpgroups.setdefault((info.cta, info.role, g), WarpgroupIssue())
                wg.members[i] = 0

    def _whole_warpgroup(self, t: _Thread) -> bool:
        """Are the model thread's warps exactly one warpgroup (so a retire tells every one
        of its threads how far all the others got)?"""
        return len(t.wgs) == 1 and t.warps == WARPGROUP_WARPS

    # ---- knowledge ------------------------------------------------------------------

    def own(self, t: _Thread, who: str) -> tuple[int, int, int, int]:
        """The role's own lanes (E, W0, Tm, Ts) as the threads `who` know them."""
        c = t.c
        if who == "T":
            return (c, c, c, c)
        lanes_m, lanes_s = max(t.lane, t.ktm), max(t.s_lane, t.kts)
        if who == "W0" or t.warps == 1:  # lane 0 of every warp knows its warp's lanes
            return (c, c, lanes_m, lanes_s)
        return (c, t.kw0, t.ktm, t.kts)

    def view(self, t: _Thread, who: str = "T") -> list[int]:
        """What the threads `who` of `t` know of every lane: the vector clock of a
        release they make."""
        v = list(t.know)
        b = t.base
        v[b + E], v[b + W0], v[b + TM], v[b + TS] = self.own(t, who)
        if t.wg_retired and who != "E":  # each warp knows its own warpgroup's groups
            glane = self.group_lane[(t.info.index, "wgmma")]
            v[glane] = max(v[glane], t.wg_retired)
        for j, (ts, retired) in (t.col_first if who == "E" else t.col_all).items():
            lane = self.t[j].base + TS
            v[lane] = max(v[lane], ts)
            glane = self.group_lane[(j, "wgmma")]
            v[glane] = max(v[glane], retired)
        return v

    def weakest(self, t: _Thread) -> list[int]:
        """What the least informed thread of the role knows (for progress checks): of its
        own role, only what every thread is known to know."""
        v = list(t.know)
        b = t.base
        if t.warps == 1:
            v[b + E] = max(t.ke, t.s_lane)
            v[b + W0] = max(t.kw0, t.s_lane)
            v[b + TM] = max(t.ktm, t.lane)
            v[b + TS] = max(t.kts, t.s_lane)
        else:
            v[b + E], v[b + W0], v[b + TM], v[b + TS] = t.ke, t.kw0, t.ktm, t.kts
        return v

    def acquire(self, i: int, vc: list[int]) -> None:
        """Every thread of `i` observes a release carrying `vc`, which may also carry
        the progress of `i`'s own threads."""
        t = self.t[i]
        _join(t.know, vc)
        b = t.base
        t.ke = max(t.ke, vc[b + E])
        t.kw0 = max(t.kw0, vc[b + W0])
        t.ktm = max(t.ktm, vc[b + TM])
        t.kts = max(t.kts, vc[b + TS])
        t.lane = max(t.lane, t.ktm)
        t.s_lane = max(t.s_lane, t.kts)
        for g in GROUPS:
            lane = self.group_lane[(i, g)]
            groups = t.groups[g]  # the role learns what another lane saw retired
            if vc[lane] > groups.retired:
                groups.retired = min(vc[lane], groups.committed)

    def sync_role(self, t: _Thread) -> None:
        """Every thread of the role met every other (a barrier over the whole role)."""
        t.ke = t.kw0 = t.ktm = t.kts = t.lane = t.s_lane = t.c
        if t.wg_retired:
            lane = self.group_lane[(t.info.index, "wgmma")]
            t.know[lane] = max(t.know[lane], t.wg_retired)

    # ---- anomalies ------------------------------------------------------------------

    def record(self, kind: str, message: str, events: tuple[Event, ...], resource: str = "",
               witness: Callable[[], list[Step]] | None = None, **details) -> None:
        """Record an anomaly once. `witness` computes its steps and runs only for an
        anomaly that is recorded: a witness walks the whole trace, and a defect met at
        every step of a long execution (a lapped phase, a premature arrival) would
        otherwise walk it thousands of times for anomalies already recorded or over
        MAX_ANOMALIES (a persistent cluster GEMM with one extra remote arrive: 90 s)."""
        anomaly = Anomaly(kind, message, events, resource, details)
        if anomaly.key in self.anomalies or len(self.anomalies) >= MAX_ANOMALIES:
            return
        steps = witness() if witness is not None else self.ancestry(events)
        if events and (not steps or steps[-1].line != events[0].line):
            ev = events[0]  # end where the anomaly shows
            steps = [*steps, Step(ev.thread, 0, ev.line, f"{ev.where()}: {kind}: "
                                                         f"{message.split(': ')[-1][:160]}")]
        anomaly.witness = tuple((s.line, s.text) for s in steps)
        self.anomalies[anomaly.key] = anomaly

    def ancestry(self, events: tuple[Event, ...], vc: list[int] | None = None,
                 extra: list[Step] | None = None) -> list[Step]:
        """The steps of the canonical execution the events depend on (their ancestors in
        the dependency graph), in execution order, then `extra`."""
        target = list(vc) if vc is not None else [0] * self.width
        for ev in events:
            t = self.t[ev.thread]
            for k in range(4):
                target[t.base + k] = max(target[t.base + k], t.c)
            _join(target, t.know)
        out = []
        for s in self.trace:
            if s.thread < 0:
                if target[s.lane] >= s.clock or s.lane < 0:
                    out.append(s)
                continue
            b = self.t[s.thread].base
            if max(target[b:b + 4]) >= s.clock:
                out.append(s)
        return out[-80:] + (extra or [])

    def step_text(self, ev: Event, text: str) -> None:
        t = self.t[ev.thread]
        self.trace.append(Step(ev.thread, t.c, ev.line, text, ev=ev))

    # ---- memory ---------------------------------------------------------------------

    def _ordered(self, t: _Thread, i: int, ev: Event, m: Mem, rec: _Rec,
                 issuer_who: str, async_lane: int) -> bool:
        """Is the earlier access `rec` ordered before access `m` of thread `i`?"""
        if rec.async_:
            if async_lane == rec.lane and rec.thread == i and rec.event.group:
                return True  # one group stream: the hardware orders its operations
            know = t.know[rec.lane] if rec.lane >= 0 else 0
            if rec.thread == i and rec.event.group == "wgmma":  # its warps' own groups
                know = max(know, t.wg_retired)
            return know >= rec.clock
        if rec.thread != i:
            return t.know[rec.lane] >= rec.clock
        if m.space == "reg":  # each thread's own registers: program order orders them
            return True
        # the same role: which of its threads touched the common bytes
        if m.who == "engine":
            return self._own_known(t, rec.mem.who, issuer_who) >= rec.clock
        cross = self.fp.crossing(rec.mem.fp, m.fp, m.shift - rec.mem.shift,
                                 t.info.role_threads)
        if cross == SAME:
            return True
        if cross == LANES:
            return rec.mem.who == "W0" or max(t.lane, t.ktm) >= rec.clock
        assert cross == WARPS
        if rec.mem.who == "W0":
            return max(t.kw0, t.ktm) >= rec.clock
        return t.ktm >= rec.clock

    @staticmethod
    def _own_known(t: _Thread, stamped: str, by: str) -> int:
        """How far the threads `by` of a role know what the role's threads `stamped` did
        (the elected thread E is lane 0 of warp 0, so E is in W0, which is in T)."""
        if stamped == "E" and by == "E":
            return t.c
        if t.warps == 1:
            if stamped in ("E", "W0") and by in ("E", "W0"):
                return t.c
            return max(t.lane, t.ktm)
        if stamped == "T":
            return t.ktm
        return max(t.kw0, t.ktm)

    def access(self, i: int, ev: Event, m: Mem, lane: int, clock: int,
               async_: bool, issuer_who: str = "E") -> None:
        t = self.t[i]
        hist = self.history.setdefault(m.region, [])
        self.work += len(hist)
        mask = m.mask
        covered = 0
        keep: list[_Rec] = []
        for rec in hist:
            overlap = rec.mem.mask & mask
            if not overlap or (m.space == "reg" and rec.thread != i):
                # registers belong to their thread: the model threads of a split role hold
                # different warps' copies of a fragment
                keep.append(rec)
                continue
            ordered = self._ordered(t, i, ev, m, rec, issuer_who, lane if async_ else -2)
            if (rec.mem.write or m.write) and not ordered:
                self.race(rec, ev, m, i)
            if rec.mem.write and ordered:
                covered |= rec.mem.mask
                if not m.write and m.proxy == "async" and rec.mem.proxy == "generic":
                    self.check_fence(t, i, rec, ev, m)
            # (an MMA group on the mma.sync path reads through the generic proxy too)
            if m.write and ordered and \
                    needs_proxy_fence(rec.mem.proxy, rec.mem.write, m.proxy, m.write):
                self.check_refill_fence(t, rec, ev, m)
            superseded = m.write and ordered and (rec.mem.mask & ~mask) == 0
            same_reader = (not m.write and not rec.mem.write and rec.thread == i
                           and rec.lane == lane and rec.mem.mask == mask)
            if not (superseded or same_reader):
                keep.append(rec)
        if not m.write and m.space == "smem" and (mask & ~covered):
            unordered = any(r.mem.write and r.mem.mask & mask & ~covered for r in hist)
            if not unordered:
                self.uninit(ev, m, never=(self.written.get(m.region, 0) & mask) != mask)
        if m.write:
            self.written[m.region] = self.written.get(m.region, 0) | mask
        keep.append(_Rec(i, lane, clock, m, ev, async_))
        self.history[m.region] = keep

    def race(self, rec: _Rec, ev: Event, m: Mem, i: int) -> None:
        # record() keeps an anomaly once, by Anomaly.key: a defect that overlaps two
        # phases races at every access of a long run, so the message is not built for a
        # key already recorded (a third of a persistent cluster GEMM's diagnosis went there)
        if len(self.anomalies) >= MAX_ANOMALIES or \
                ("race", m.name, (ev.path, rec.event.path)) in self.anomalies:
            return
        first, second = rec.event, ev
        kind = "write" if m.write else "read"
        pkind = "write" if rec.mem.write else "read"
        via = ""
        if rec.event.group:
            via = (f" through {rec.event.primitive}, which no "
                   f"{'lm.mma_wait' if rec.event.group == 'wgmma' else 'lm.store_wait'} "
                   "had retired")
        elif rec.event.kind == "copy":
            via = " (a bulk copy still in flight)"
        same = rec.thread == i
        who = "other threads of the same role" if same else first.role
        self.record(
            "race",
            f"{second.role} {kind}s {m.where()} ({second.where()}) unordered with the "
            f"{pkind} by {who} ({first.where()}){via}",
            (second, first), m.name,
            stage=m.stage, space=m.space, first_kind=pkind, second_kind=kind,
            first_async=rec.async_, second_async=m.who == "engine",
            intra_role=same, first_who=rec.mem.who, second_who=m.who)

    def check_fence(self, t: _Thread, i: int, rec: _Rec, ev: Event, m: Mem) -> None:
        """A generic write read through the async proxy: the writer must have fenced
        the write (fence.proxy.async) before the hand-off that orders the read."""
        w = rec.thread
        if rec.fenced and ((w == i and rec.fenced < t.c) or (w != i and
                           t.know[self.t[w].base + TM] >= rec.fenced)):
            return
        self.record(
            "proxy",
            f"{ev.role} reads {m.where()} through the async proxy ({ev.primitive or ev.kind}, "
            f"{ev.where()}) after generic writes by {rec.event.role} ({rec.event.where()}) "
            "with no fence.proxy.async between the write and the hand-off",
            (ev, rec.event), m.name, stage=m.stage, fenced_late=bool(rec.fenced))

    def check_refill_fence(self, t: _Thread, rec: _Rec, ev: Event, m: Mem) -> None:
        """An async-proxy write (a copy refilling a stage) after another thread's generic
        read or write of the same bytes, ordered by a hand-off: that thread must have
        fenced (fence.proxy.async) after its access and before the hand-off (axiom A19,
        `proxy_fenced` of cakegov/analysis/semantics.py). The write's thread knows the
        other's fence when its knowledge of the other's lanes reaches the fence."""
        w = self.t[rec.thread]
        lane = {"E": E, "W0": W0}.get(rec.mem.who, TM)  # the lanes that accessed
        # the copy's own thread: a fence before the copy (program order, and the role sync
        # the lowering puts before every copy, order every lane's fence before the issue)
        known = t.c - 1 if w is t else t.know[w.base + lane]
        # a group's access is stamped with its ordinal, not a thread clock: a fence marks
        # it only once the group has retired, so any fence clock is after it
        access = 0 if rec.async_ else rec.clock
        if proxy_fenced([rec.fenced] if rec.fenced else [], access, known):
            return
        kind = "write" if rec.mem.write else "read"
        self.record(
            "proxy",
            f"{ev.role} overwrites {m.where()} through the async proxy ({ev.primitive or ev.kind}"
            f", {ev.where()}) after generic {kind}s by {rec.event.role} ({rec.event.where()}) "
            f"with no fence.proxy.async in {rec.event.role} between its {kind} and the "
            "hand-off",
            (ev, rec.event), m.name, stage=m.stage, fenced_late=bool(rec.fenced),
            refill=True, generic_kind=kind)

    def uninit(self, ev: Event, m: Mem, never: bool) -> None:
        self.record("uninit",
                    f"{ev.role} reads {m.where()} ({ev.where()}) but no write to it happens "
                    "before the read", (ev,), m.name, stage=m.stage, never_written=never)

    def proxy_fence(self, i: int) -> None:
        """fence.proxy.async by every thread of `i`: its earlier generic writes are now
        ordered before later async-proxy accesses."""
        t = self.t[i]
        for hist in self.history.values():
            for rec in hist:  # generic writes (A9) and generic reads or writes (A19)
                if rec.thread != i or rec.fenced:
                    continue
                if not rec.async_ and (rec.mem.write or rec.mem.proxy == "generic"):
                    rec.fenced = t.c
                elif rec.async_ and rec.mem.proxy == "generic" and rec.event.group and \
                        rec.clock <= t.groups[rec.event.group].retired:
                    rec.fenced = t.c  # the retired groups' generic (mma.sync) reads

    # ---- barriers -------------------------------------------------------------------

    def contribute(self, slot_id: int, ev: Event, vc: list[int], n: int, tx: int,
                   sched: list[int], what: str) -> None:
        """`n` arrivals (each adding `tx` bytes), or a copy's completion (n = 0) on a
        slot, with the checks that they land in a forced phase."""
        s = self.slots[slot_id]
        phase = s.mb.phase
        if phase >= 1 and phase - 1 in s.done and not _leq(s.done[phase - 1], sched):
            self.record(
                "premature",
                f"{what} ({ev.where()}) is not ordered after phase {phase - 1} of "
                f"{self.p.slot_name(slot_id)} completes: in some execution it lands in that "
                "phase instead of phase "
                f"{phase}, which then completes with the wrong arrivals",
                (ev,), self.p.slots[slot_id][0], slot=slot_id, phase=phase, unforced=True,
                witness=lambda: self.ancestry((ev,), extra=[Step(-1, 0, ev.line,
                                                         f"{ev.where()}: {what} can land "
                                                         f"in phase {phase - 1}")]))
        try:
            if n == 0:
                completed = [s.mb.complete_tx(tx)]
                _join(s.acc, vc)
                s.contrib.append(ev)
            else:
                completed = []
                # The n arrivals are n threads' (one per warp, say). When they span two
                # phases, which of them complete the first is up to scheduling, so no
                # phase may rely on what any one of them did since the role last synced:
                # each carries what the role's least informed thread knows.
                split = s.mb.pending < n
                if split:
                    vc = self.weakest(self.t[ev.thread])
                for k in range(n):
                    _join(s.acc, vc)
                    s.contrib.append(ev)
                    done = s.mb.arrive(tx)
                    completed.append(done)
                    if done and k < n - 1:
                        self.record(
                            "over-arrival",
                            f"{ev.role} makes {n} arrivals on {self.p.slot_name(slot_id)} "
                            f"at once ({ev.where()}) but the phase completes after {k + 1}: "
                            f"the other {n - k - 1} land in the next phase, in an order no "
                            "barrier fixes",
                            (ev,), self.p.slots[slot_id][0], slot=slot_id,
                            count=s.mb.count, arrivals=n, used=k + 1, unforced=True)
                        self.complete(slot_id)
                if completed and completed[-1]:
                    self.complete(slot_id)
                return
        except OverArrival as exc:
            self.record("over-arrival", f"{ev.role} arrives on {self.p.slot_name(slot_id)} "
                        f"({ev.where()}): {exc}", (ev,), self.p.slots[slot_id][0],
                        slot=slot_id, count=s.mb.count, arrivals=n)
            return
        except BarrierError as exc:
            self.record("tx-range", f"{self.p.slot_name(slot_id)}: {exc} ({ev.where()})",
                        (ev,), self.p.slots[slot_id][0], slot=slot_id)
            return
        if completed and completed[-1]:
            self.complete(slot_id)

    def complete(self, slot_id: int) -> None:
        s = self.slots[slot_id]
        phase = s.mb.phase - 1
        s.done[phase] = list(s.acc)
        s.done_by[phase] = tuple(s.contrib)
        s.acc = [0] * self.width
        s.contrib = []
        self.trace.append(Step(-1, 0, s.done_by[phase][-1].line if s.done_by[phase] else 0,
                               f"{self.p.slot_name(slot_id)} completes phase {phase}",
                               lane=-1))
        # waiters that observed the phase before must have been forced to reach their
        # wait before this one could complete: a late waiter sees this phase's parity
        # differ no more, blocks, and observes the next phase instead
        for (i, reach, ev) in s.watch.pop(phase - 1, []):
            t = self.t[i]
            if s.done[phase][t.base + TS] >= reach:
                continue
            self.lapped(slot_id, phase, i, reach, ev)

    def lapped(self, slot_id: int, phase: int, i: int, reach: int, ev: Event) -> None:
        s = self.slots[slot_id]
        name = self.p.slot_name(slot_id)
        blockers = s.done_by.get(phase, ())

        def witness() -> list[Step]:
            steps = self.ancestry(blockers[-1:], s.done[phase]) if blockers else []
            steps = [st for st in steps if st.thread != i or st.clock < reach]
            steps.append(Step(i, reach, ev.line, f"{ev.where()}: a thread of {ev.role} "
                                                 f"reaches the wait on {name} parity "
                                                 f"{ev.parity} only now, after phase "
                                                 f"{phase} completed"))
            return steps

        fresh = " (the state of the fresh barrier)" if phase < 1 else ""
        self.record(
            "lapped",
            f"phase {phase} of {name} can complete before every thread of {ev.role} "
            f"reaches its wait with parity {ev.parity} ({ev.where()}), which observes "
            f"phase {phase - 1}{fresh}: a late thread then "
            f"sees parity {ev.parity} again and waits for phase {phase + 1} (or passes on "
            "it), not the phase it needs",
            (ev,), self.p.slots[slot_id][0], witness=witness, slot=slot_id, phase=phase - 1,
            lapped_by=phase)

    # ---- execution ------------------------------------------------------------------

    def runnable(self, i: int) -> bool:
        t = self.t[i]
        if t.pc >= len(t.events):
            return False
        ev = t.events[t.pc]
        if ev.kind == "wait":
            s = self.slots[ev.slot]
            return s.mb.passes(ev.parity)
        return True

    def run(self, order: tuple[int, ...] | None = None, eager: bool = False,
            priority: bool = False) -> Outcome:
        """Run every thread as far as it can, in `order` (default: thread index), landing
        copies when no thread can move or, `eager`, as soon as they are issued. With
        `priority`, `order` is a strict priority: after every step the first thread of
        `order` that can move moves, so a later thread runs only while all before it are
        blocked. Each choice is one execution the barriers allow."""
        steps = 0
        complete = True
        reason = ""
        threads = tuple(range(len(self.t))) if order is None else order
        while True:
            progressed = False
            while eager and self.copies:
                if steps >= self.max_steps:
                    return self.finish(steps, False, f"step bound {self.max_steps}")
                self.land_copy()
                steps += 1
            for i in threads:
                while self.t[i].pc < len(self.t[i].events):
                    if steps >= self.max_steps:
                        return self.finish(steps, False, f"step bound {self.max_steps}")
                    if not self.step(i):
                        break
                    steps += 1
                    progressed = True
                    if priority:
                        break
                if priority and progressed:
                    break
            if progressed:
                continue
            if self.copies:
                self.land_copy()
                steps += 1
                continue
            break
        if any(t.pc < len(t.events) for t in self.t):
            self.deadlock()
        else:
            self.at_exit()
        return self.finish(steps, complete, reason)

    def finish(self, steps: int, complete: bool, reason: str) -> Outcome:
        return Outcome(self.p, list(self.anomalies.values()), steps, complete, reason,
                       self.observed, self.work)

    def step(self, i: int) -> bool:
        """Execute thread i's next event if it can; False when it blocks."""
        t = self.t[i]
        ev = t.events[t.pc]
        kind = ev.kind
        if kind == "wait":
            return self.wait(i, t, ev)
        if kind == "named":
            return self.named_barrier(i, t, ev)
        if kind == "retire" and ev.warpgroup and not self.warpgroup_ready(t, ev):
            return False  # the group is not complete until every warp has issued it
        t.c += 1
        t.pc += 1
        if kind == "arrive":
            self.check_init(i, ev, "arrive")
            vc = sched = self.view(t, ev.who)
            what = f"arrive x{ev.n}" + (f" expect_tx {ev.tx * ev.n} B" if ev.tx else "")
            self.step_text(ev, f"{what} on {self.p.slot_name(ev.slot)}")
            self.trace[-1].lane = t.base + (TM if ev.who == "T" else W0 if ev.who == "W0"
                                            else E)
            if ev.peer >= 0:  # a write into a peer CTA's shared memory (mapa)
                self.remote.append((ev, self.trace[-1].lane, t.c))
            self.contribute(ev.slot, ev, vc, ev.n, ev.tx, sched, what)
        elif kind == "copy":
            self.check_init(i, ev, "bulk copy")
            key = (i, ev.slot)
            ordinal = self.copy_ordinal.get(key, 0) + 1
            self.copy_ordinal[key] = ordinal
            lane = self.copy_lane[key]
            for m in ev.mem:
                self.access(i, ev, m, lane, ordinal, True, "E")
            vc = self.view(t, "E")
            vc[lane] = ordinal
            self.copies.append((ev, ordinal, vc))
            self.step_text(ev, f"bulk copy into {ev.mem[0].where()} issued "
                               f"({ev.nbytes:,} B on {self.p.slot_name(ev.slot)})")
        elif kind == "compute":
            self.compute(i, t, ev)
        elif kind == "fence":
            if ev.scope == "proxy_async":
                self.proxy_fence(i)
                self.step_text(ev, "fence.proxy.async")
            elif ev.scope == "warp":
                t.lane = t.s_lane = t.c
                if t.warps == 1:
                    self.sync_role(t)
                self.step_text(ev, "__syncwarp" + (f" (inserted for {ev.derived})"
                                                   if ev.derived else ""))
            else:
                for s in self.slots:
                    if s.init == 1 and s.init_thread == i:
                        s.init, s.fence_clock = 2, t.c
                self.step_text(ev, "fence.mbarrier_init")
        elif kind == "init":
            self.init(i, t, ev)
        elif kind == "retire":
            if ev.collective:
                t.s_lane = t.c
            lane = self.group_lane[(i, ev.group)]
            retired = t.groups[ev.group].wait(ev.pending)
            if ev.warpgroup and len(t.wgs) > 1:  # axiom A13: each warp, its own warpgroup
                t.wg_retired = max(t.wg_retired, retired)
            else:
                t.know[lane] = max(t.know[lane], retired)
            if ev.warpgroup:
                self.warpgroup_retire(i, t, retired)
            self.step_text(ev, f"{ev.source} pending={ev.pending}: "
                               f"{retired} group(s) done")
        return True

    def warpgroup_ready(self, t: _Thread, ev: Event) -> bool:
        """Axiom A13: a wait that retires wgmma group r passes only once every model thread
        of the waiter's warpgroups has issued group r (their warps take part in it)."""
        retired = t.groups["wgmma"].committed - max(0, ev.pending)
        return all(self.warpgroups[(t.info.cta, t.info.role, g)].complete(retired)
                   for g in t.wgs)

    def warpgroup_retire(self, i: int, t: _Thread, retired: int) -> None:
        """What retiring wgmma group `retired` teaches the threads of `i` (axiom A13): each
        warp learns that every warp of its own warpgroup reached the issue of the group
        (progress, not their other memory accesses) and that the group's operand reads on
        their behalf are complete."""
        if retired <= 0:
            return
        if self._whole_warpgroup(t):  # one warpgroup: every thread learns every other
            t.kts = max(t.kts, t.issued[retired - 1])
        starts = {r.name: r.warp_start for r in self.p.kernel.roles}
        mine = t.info.members or tuple(range(t.info.warps))
        first = warpgroup_of(starts[t.info.role] + mine[0])
        for g in t.wgs:
            wg = self.warpgroups[(t.info.cta, t.info.role, g)]
            for j in wg.members:
                if j == i:
                    continue
                other = self.t[j]
                known = (other.issued[retired - 1], retired)
                if set(other.wgs) <= set(t.wgs):
                    _learn(t.col_all, j, known)
                if set(other.wgs) == {first}:
                    _learn(t.col_first, j, known)

    def compute(self, i: int, t: _Thread, ev: Event) -> None:
        if ev.group:
            ordinal = t.groups[ev.group].commit()
            if ev.group == "wgmma":
                t.issued.append(t.c)
                for g in t.wgs:
                    self.warpgroups[(t.info.cta, t.info.role, g)].issue(i)
            lane = self.group_lane[(i, ev.group)]
            for m in ev.mem:
                if m.who == "engine" or m.space == "reg":
                    self.access(i, ev, m, lane, ordinal, True, "T")
                else:
                    self.access(i, ev, m, self.lane_of(t, m.who), t.c, False)
            self.step_text(ev, f"{ev.primitive} issued (group {ordinal})" + _locs(ev))
            return
        if ev.collective:  # every lane of each warp executes it together
            t.s_lane = t.c
            if t.warps == 1:
                t.ke = t.kw0 = t.kts = max(t.kts, t.c)
        for m in ev.mem:
            self.access(i, ev, m, self.lane_of(t, m.who), t.c, False)
        self.step_text(ev, (ev.primitive or "compute") + _locs(ev))

    def lane_of(self, t: _Thread, who: str) -> int:
        return t.base + {"E": E, "W0": W0, "T": TM}.get(who, TM)

    def wait(self, i: int, t: _Thread, ev: Event) -> bool:
        s = self.slots[ev.slot]
        if t.reach != t.pc + 1:  # first time at this wait: the threads reach it
            t.c += 1
            t.reach = t.pc + 1
            self.check_init(i, ev, "wait")
        if not s.mb.passes(ev.parity):
            return False
        reach = t.c
        phase = s.mb.observed
        self.observed[(i, ev.seq)] = phase
        name = self.p.slot_name(ev.slot)
        if phase - 1 in s.done and not _leq(s.done[phase - 1], self.weakest(t)):
            extra = [Step(i, reach, ev.line, f"{ev.where()}: a thread of {ev.role} reaches "
                                             f"the wait before phase {phase - 1} completes "
                                             f"and passes on phase {phase - 2}")]
            self.record(
                "early-pass",
                f"{ev.role} waits on {name} with parity {ev.parity} for phase {phase} "
                f"({ev.where()}), but reaching the wait is not ordered after phase "
                f"{phase - 1} completes: a thread that gets there earlier passes on phase "
                f"{phase - 2}, which has the same parity",
                (ev,), self.p.slots[ev.slot][0],
                witness=lambda: self.ancestry((), self.weakest(t), extra=extra),
                slot=ev.slot, phase=phase)
        s.watch.setdefault(phase, []).append((i, reach, ev))
        if phase in s.done:
            self.acquire(i, s.done[phase])
        t.pc += 1
        t.reach = 0
        self.step_text(ev, f"wait {name} parity {ev.parity} passes (phase {phase} done)")
        return True

    def named_barrier(self, i: int, t: _Thread, ev: Event) -> bool:
        nid, declared, waits = ev.named
        bar = self.named.setdefault(_named_key(ev), _Named(acc=[0] * self.width))
        if any(w == i for w, _ in bar.waiters):
            return False  # blocked at bar.sync until the instance completes
        t.c += 1
        vc = self.view(t, "T")
        instance = bar.state.instance
        if instance >= 1 and instance - 1 in bar.done and \
                not _leq(bar.done[instance - 1], self.weakest(t)):
            self.record(
                "named-premature",
                f"{ev.role} arrives at named barrier {nid} ({ev.where()}) without being "
                f"ordered after instance {instance - 1} completes: its threads can be "
                "counted in that instance instead",
                (ev,), str(nid), id=nid)
        room = declared - bar.state.arrived
        if ev.n > room:
            self.record(
                "named-split",
                f"{ev.role} brings {ev.n} threads to named barrier {nid} ({ev.where()}) "
                f"declared for {declared} with {room} place(s) left: the role's warps are "
                "split across two instances of the barrier",
                (ev,), str(nid), id=nid, threads=ev.n, declared=declared, room=room)
        _join(bar.acc, vc)
        bar.members.append(ev)
        what = "CTA barrier (bar.sync 0)" if nid == 0 else "cluster barrier (sync_cluster)" \
            if nid < 0 else f"named barrier {nid}"
        if ev.derived:
            what += f", role sync inserted for {ev.derived}"
        bar.state.threads = declared
        completed, _ = bar.state.arrive(ev.n)  # threads over the room start the next one
        if completed:
            done = list(bar.acc)
            bar.done[bar.state.instance - 1] = done
            released = [w for w, _ in bar.waiters] + ([i] if waits else [])
            bar.waiters, bar.acc, bar.members = [], [0] * self.width, []
            for w in released:
                self.acquire(w, done)
                self.sync_role(self.t[w])  # every thread of the role took part
                self.t[w].pc += 1
            if not waits:
                t.pc += 1
            self.step_text(ev, f"{what} completes")
            return True
        self.step_text(ev, f"{'waits at' if waits else 'arrives at'} {what} "
                           f"({bar.state.arrived}/{declared})")
        if waits:
            bar.waiters.append((i, t.c))
            return False
        t.pc += 1
        return True

    def land_copy(self) -> None:
        ev, ordinal, vc = self.copies.pop(0)
        lane = self.copy_lane[(ev.thread, ev.slot)]
        self.trace.append(Step(-1, ordinal, ev.line,
                               f"copy from {ev.where()} completes {ev.nbytes:,} B on "
                               f"{self.p.slot_name(ev.slot)}", lane=lane))
        self.copy_done.append((ev, lane, ordinal))
        sched = vc
        self.contribute(ev.slot, ev, vc, 0, ev.nbytes, sched, "the bulk copy")

    def init(self, i: int, t: _Thread, ev: Event) -> None:
        s = self.slots[ev.slot]
        name = self.p.slot_name(ev.slot)
        if not self.p.slot_manual[ev.slot] or s.init:
            state = "initialised by the kernel prologue" if not self.p.slot_manual[ev.slot] \
                else "already initialised"
            self.record("init-order",
                        f"{ev.role} initialises {name} again ({ev.where()}) while it is "
                        f"{state}: re-initialising a barrier in use is undefined",
                        (ev,), self.p.slots[ev.slot][0], slot=ev.slot, reinit=True,
                        state=state)
        s.mb = MBarrier(max(1, ev.count))
        s.init, s.init_thread, s.init_clock = 1, i, t.c
        self.step_text(ev, f"mbarrier.init {name} count {ev.count}")

    def check_init(self, i: int, ev: Event, what: str) -> None:
        """A manually initialised barrier is used only after its `mbarrier.init`: a
        thread's wait or arrive must happen after the init (program order, or a barrier
        that orders it); a bulk copy completes on it through the async proxy, which also
        needs the initialising thread's `fence.mbarrier_init` before the copy is issued
        (PTX ISA, fence.mbarrier_init)."""
        if not self.p.slot_manual[ev.slot]:
            return
        s = self.slots[ev.slot]
        t = self.t[i]
        state = None
        if s.init == 0:
            state = "uninitialised"
        else:
            known = t.c if s.init_thread == i else \
                t.know[self.t[s.init_thread].base + E]
            if what == "bulk copy":
                if s.fence_clock == 0:
                    state = "initialised but not fenced for the async proxy"
                elif known < s.fence_clock:
                    state = "fenced, but the fence is not ordered before this use"
            elif known < s.init_clock:
                state = "initialised, but the init is not ordered before this use"
        if state is None:
            return
        name = self.p.slot_name(ev.slot)
        context = [0] * self.width
        if s.init:  # show the initialisation the use is not ordered after
            context[self.t[s.init_thread].base + E] = max(s.init_clock, s.fence_clock)
        self.record("init-order", f"{ev.role} uses {name} ({what}, {ev.where()}) while it is "
                    f"{state}", (ev,), self.p.slots[ev.slot][0], slot=ev.slot, state=state,
                    witness=lambda: self.ancestry((ev,), context))

    # ---- the end --------------------------------------------------------------------

    def deadlock(self) -> None:
        blocked = []
        parts = []
        for t in self.t:
            if t.pc >= len(t.events):
                continue
            ev = t.events[t.pc]
            blocked.append(ev)
            if ev.kind == "wait":
                mb = self.slots[ev.slot].mb
                parts.append(f"{ev.role} waits on {self.p.slot_name(ev.slot)} parity "
                             f"{ev.parity} ({ev.where()}); the barrier is in phase {mb.phase} "
                             f"with {mb.pending} arrival(s) and {mb.tx} tx byte(s) "
                             "outstanding")
            elif ev.kind == "named":
                nid = ev.named[0]
                bar = self.named.get(_named_key(ev))
                got = bar.state.arrived if bar else 0
                what = "the CTA barrier sync_cta" if nid == 0 else \
                    "the cluster barrier sync_cluster" if nid < 0 else f"named barrier {nid}"
                parts.append(f"{ev.role} waits at {what} ({ev.where()}) with {got} of "
                             f"{ev.named[1]} threads arrived")
            elif ev.kind == "retire" and ev.warpgroup:
                retired = t.groups["wgmma"].committed - max(0, ev.pending)
                late = sorted({self.t[j].info.part or self.t[j].info.role
                               for g in t.wgs
                               for j in self.warpgroups[(t.info.cta, t.info.role, g)]
                               .missing(retired)})
                parts.append(f"{ev.role} waits at {ev.source} ({ev.where()}) for wgmma group "
                             f"{retired}, which {', '.join(late)} of its warpgroup never "
                             "issue (a wgmma group completes only when every warp of the "
                             "warpgroup has issued it)")
        extra = []
        for ev in blocked:
            what = (f"wait {self.p.slot_name(ev.slot)} parity {ev.parity} blocks forever"
                    if ev.kind == "wait" else f"{ev.kind} blocks forever")
            extra.append(Step(ev.thread, 0, ev.line, f"{ev.where()}: {what}"))
        self.record("deadlock", "deadlock: " + "; ".join(parts), tuple(blocked),
                    self.p.slots[blocked[0].slot][0] if blocked[0].slot >= 0 else "",
                    witness=lambda: self.ancestry(tuple(blocked), extra=extra),
                    slots=[e.slot for e in blocked if e.slot >= 0],
                    bars={self.p.slot_name(k): (s.mb.phase, s.mb.pending, s.mb.tx)
                          for k, s in enumerate(self.slots) if s.mb.phase or s.contrib})

    def at_exit(self) -> None:
        final = [t.know for t in self.t]
        if self.p.cluster > 1:
            self.remote_exit()
        for ev, lane, ordinal in self.copy_done:
            if self.p.cluster > 1:
                if ev.peer >= 0:
                    continue  # remote_exit
                final = [t.know for t in self.t if t.info.cta == ev.cta]
            if any(k[lane] >= ordinal for k in final):
                continue
            self.record(
                "exit-inflight",
                f"the bulk copy into {ev.mem[0].where()} ({ev.where()}) is never waited "
                "for: no role observes the phase it completes, so the CTA can exit while the "
                "copy still writes its shared memory",
                (ev,), ev.mem[0].name, slot=ev.slot,
                witness=lambda ev=ev: self.ancestry((ev,), extra=[Step(-1, 0, ev.line,
                                                         "every role ends; the copy is "
                                                         "still in flight")]))
        self.groups_at_exit()

    def remote_exit(self) -> None:
        """A CTA exits only after every other CTA's write into its shared memory has
        landed: each remote arrive and each copy into a peer must be ordered before some
        thread of the destination CTA ends (CUDA programming guide, "Distributed Shared
        Memory": all distributed shared-memory operations must complete before a thread
        block exits; `lm.sync_cluster()` at the end of every role orders them)."""
        items = [(ev, lane, clock, ev.peer, "arrive") for ev, lane, clock in self.remote]
        items += [(ev, lane, ordinal, ev.peer, "copy") for ev, lane, ordinal in self.copy_done
                  if ev.peer >= 0]
        for ev, lane, clock, dest, what in items:
            final = [t.know for t in self.t if t.info.cta == dest]
            if any(k[lane] >= clock for k in final):
                continue
            thing = (f"arrive on {self.p.slot_name(ev.slot)}" if what == "arrive" else
                     f"multicast copy into {ev.mem[0].where()} of CTA {dest}")
            self.record(
                "exit-remote",
                f"the {thing} ({ev.where()}) is not ordered before CTA {dest} exits: no "
                f"thread of CTA {dest} waits for it or meets CTA {ev.cta} at a cluster "
                f"barrier afterwards, so CTA {dest} can exit (and its shared memory go to "
                "another CTA) while the remote write is still under way",
                (ev,), self.p.slots[ev.slot][0], slot=ev.slot, dest=dest, source_cta=ev.cta,
                what=what,
                witness=lambda ev=ev, dest=dest, what=what: self.ancestry(
                    (ev,), extra=[Step(-1, 0, ev.line, f"every role of CTA {dest} ends; the "
                                       f"remote {what} from CTA {ev.cta} is still under "
                                       "way")]))

    def groups_at_exit(self) -> None:
        for _i, t in enumerate(self.t):
            for g in GROUPS:
                groups = t.groups[g]
                left = groups.in_flight
                if left <= 0:
                    continue
                late = [ev for ev in t.events if ev.kind == "compute" and ev.group == g]
                first = late[groups.retired] if groups.retired < len(late) else late[-1]
                spelling = "lm.mma_wait" if g == "wgmma" else "lm.store_wait"
                smem = [m for m in first.mem if m.space == "smem"]
                self.record(
                    "async-pending",
                    f"{t.info.role} ends with {left} {first.primitive} group(s) still in "
                    f"flight (first: {first.where()}): no {spelling}(pending=0) retires "
                    "them before the kernel exits",
                    tuple(late[groups.retired:]) or (first,),
                    smem[0].name if smem else "", group=g, issued=groups.committed,
                    retired=groups.retired)


def _learn(table: dict[int, tuple[int, int]], j: int, known: tuple[int, int]) -> None:
    old = table.get(j, (0, 0))
    table[j] = (max(old[0], known[0]), max(old[1], known[1]))


def _named_key(ev: Event) -> tuple[int, int]:
    """Named barriers belong to one CTA; the cluster barrier to all CTAs of the cluster."""
    nid = ev.named[0] if ev.named else 0
    return (-1, nid) if nid < 0 else (ev.cta, nid)


def _locs(ev: Event) -> str:
    reads = [m.where() for m in ev.mem if not m.write]
    writes = [m.where() for m in ev.mem if m.write]
    out = ""
    if reads:
        out += f" reads {', '.join(reads)}"
    if writes:
        out += f" writes {', '.join(writes)}"
    return out


def execute(program: Program, footprints: Footprints, max_steps: int = 400_000,
            order: tuple[int, ...] | None = None, eager: bool = False,
            priority: bool = False) -> Outcome:
    return Executor(program, footprints, max_steps).run(order, eager, priority)


def unforced_only(outcome: Outcome) -> bool:
    """Whether every anomaly of `outcome` is an unforced phase attribution (an arrival
    that can land in another phase than the one it did): no defect by itself, only a sign
    that other executions may differ."""
    return bool(outcome.anomalies) and all(a.details.get("unforced")
                                           for a in outcome.anomalies)
