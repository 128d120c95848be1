"""Static flow accounting over unrolled role programs: who publishes a shared-memory
location, who reads it, through which barrier slots it is signalled and handed back, and
how often. Rules P008 (missing acquire or wait), P009 (release count), P011 (elected
arrive), P015 (named-barrier uses) and P016 (wait-for cycles) share it.

Vocabulary (one unrolled run, cakegov/analysis/unroll.py):
- a *location* is one stage of a shared-memory buffer, `(buffer, stage)`;
- a *key* is something a role waits on or arrives on: an mbarrier slot `(name, index)`
  or a named barrier `("@named", id)` (a `bar.sync` is both a wait and an arrive);
- the *signal keys* of a location are the slots its bulk copies complete on, the first
  key a generic writer arrives on after writing it, and, transitively, the first key a
  writer arrives on after waiting on a signal key (a loader that waits for its own copy
  and then arrives at a named barrier forwards the signal);
- a writer *publishes* a location with each bulk copy, or with a generic write followed
  by an arrive; its *hand-back keys* are the waits it performs between two publishes of
  the location (not on the copy's own barrier; on an mbarrier with one slot per stage,
  only the slot of the location's stage) plus, for a pipeline buffer, `ring.empty[s]`.

The accounting is exact on the unrolled events: it counts events, never interleavings,
so it is independent of the exploration's bounds."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from cakegov.analysis.unroll import Event, Unrolled
from cakegov.ir.nodes import PipelineDecl, Schedule
from cakegov.lower.kernel import LArrive, LCopy, LFor, LNamedSync, LoweredKernel

Loc = tuple[str, int]  # (buffer, stage)
Key = tuple[str, int]  # (barrier, index) or ("@named", id)
NAMED = "@named"


def wait_key(ev: Event) -> Key | None:
    """What `ev` waits on, if it is a wait (mbarrier wait or `bar.sync`)."""
    if ev.kind == "wait" and ev.slot is not None:
        return ev.slot
    if ev.kind == "named" and ev.named is not None and ev.named[2]:
        return (NAMED, ev.named[0])
    return None


def arrive_key(ev: Event) -> Key | None:
    """What `ev` arrives on, if it is an arrive (mbarrier arrive, `bar.sync`, `bar.arrive`)."""
    if ev.kind == "arrive" and ev.slot is not None:
        return ev.slot
    if ev.kind == "named" and ev.named is not None:
        return (NAMED, ev.named[0])
    return None


def key_text(key: Key) -> str:
    return f"named barrier {key[1]}" if key[0] == NAMED else f"{key[0]}[{key[1]}]"


def smem_locs(accesses: Iterable[tuple[tuple[str, str, int], str]]) -> list[Loc]:
    return [(loc[1], loc[2]) for loc, _ in accesses if loc[0] == "smem"]


def iteration(ev: Event) -> str:
    """`k=4` for an event in a loop, `` otherwise."""
    return ", ".join(f"{k}={v}" for k, v in ev.iters)


def at_iter(ev: Event) -> str:
    text = iteration(ev)
    return f" at {text}" if text else ""


@dataclass(frozen=True)
class Access:
    role: str
    index: int
    event: Event
    write: bool
    copy: bool = False


@dataclass(frozen=True)
class Gap:
    """A write without a preceding empty wait (`acquire`) or a read without a preceding
    full wait (`wait`)."""

    kind: str  # "acquire" | "wait"
    role: str  # the role that writes (acquire) or reads (wait)
    other: str  # the reader (acquire) or the writer (wait)
    loc: Loc
    event: Event  # the unordered write (acquire) or read (wait)
    partner: Event | None  # the earlier read being overwritten / the write being read
    generation: int  # publishes before the write (acquire) / hand-backs before the read
    keys: tuple[Key, ...] = ()  # the keys a wait would have had to be on


@dataclass(frozen=True)
class Imbalance:
    """A hand-back key released more or less often than the generations consumed."""

    role: str
    key: Key
    locs: tuple[Loc, ...]
    consumed: tuple[Event, ...]  # the waits that began each consumed generation
    releases: tuple[Event, ...]
    writer: str

    @property
    def missing(self) -> bool:
        return len(self.releases) < len(self.consumed)

    @property
    def culprit(self) -> Event:
        """The extra release, or the wait of the first generation never released."""
        if self.missing:
            return self.consumed[len(self.releases)]
        for n, rel in enumerate(self.releases):
            before = sum(1 for c in self.consumed if c.seq < rel.seq)
            if n + 1 > before:
                return rel
        return self.releases[-1]


@dataclass(frozen=True)
class ElectedArrive:
    """An arrive by one elected lane after generic shared-memory writes by many threads
    with no warp or role synchronisation in between."""

    role: str
    arrive: Event
    writes: tuple[Event, ...]
    readers: tuple[str, ...]
    needs: str  # "syncwarp" | "named"


@dataclass(frozen=True)
class NamedMismatch:
    """Participants of one named barrier reach it different numbers of times."""

    id: int
    counts: dict[str, int]
    surplus: Event | None  # the first use of the busiest role that nobody matches
    surplus_role: str


@dataclass
class Flow:
    """Accounting facts of one unrolled run."""

    kernel: LoweredKernel
    unrolled: Unrolled
    pipelines: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.roles = {r.name: self.unrolled.roles.get(r.name, ()) for r in self.kernel.roles}
        self.warps = {r.name: r.warps for r in self.kernel.roles}
        self.accesses: dict[Loc, list[Access]] = {}
        for role, events in self.roles.items():
            for i, ev in enumerate(events):
                for loc in smem_locs(ev.reads):
                    self.accesses.setdefault(loc, []).append(Access(role, i, ev, False))
                for loc in smem_locs(ev.writes):
                    self.accesses.setdefault(loc, []).append(
                        Access(role, i, ev, True, copy=ev.kind == "copy"))
        # barriers that signal data (copies complete on them, or a ring's full side):
        # never a hand-back, whoever waits on them
        self.fill_barriers = {ev.slot[0] for events in self.roles.values() for ev in events
                              if ev.kind == "copy" and ev.slot is not None}
        self.fill_barriers |= {f"{p}.full" for p in self.pipelines}
        self._signal: dict[Loc, frozenset[Key]] = {}
        self._handback: dict[Loc, frozenset[Key]] = {}
        self._gaps: list[Gap] | None = None

    # ---- basic facts -----------------------------------------------------------------

    def writes(self, loc: Loc) -> list[Access]:
        return [a for a in self.accesses.get(loc, ()) if a.write]

    def reads(self, loc: Loc) -> list[Access]:
        return [a for a in self.accesses.get(loc, ()) if not a.write]

    def readers(self, loc: Loc, besides: str) -> list[str]:
        return sorted({a.role for a in self.reads(loc) if a.role != besides})

    def next_arrive(self, role: str, after: int) -> Key | None:
        for ev in self.roles[role][after + 1:]:
            key = arrive_key(ev)
            if key is not None:
                return key
        return None

    def stages_of(self, name: str) -> int | None:
        bar = self.kernel.barrier(name)
        return bar.stages if bar is not None else None

    def copy_barriers(self, loc: Loc) -> set[str]:
        return {a.event.slot[0] for a in self.writes(loc) if a.copy and a.event.slot}

    def pipeline_of(self, buffer: str) -> str | None:
        return next((p for p, bufs in self.pipelines.items() if buffer in bufs), None)

    # ---- signal and hand-back keys ---------------------------------------------------

    def signal(self, loc: Loc) -> frozenset[Key]:
        """Keys whose observation makes the current contents of `loc` visible."""
        if loc in self._signal:
            return self._signal[loc]
        keys: set[Key] = set()
        for a in self.writes(loc):
            if a.copy and a.event.slot is not None:
                keys.add(a.event.slot)
            elif not a.copy:
                nxt = self.next_arrive(a.role, a.index)
                if nxt is not None:
                    keys.add(nxt)
        ring = self.pipeline_of(loc[0])
        if ring is not None:
            keys.add((f"{ring}.full", loc[1]))
        changed = True
        forwarders = {a.role for a in self.writes(loc)}
        while changed:
            changed = False
            for role in forwarders:
                for i, ev in enumerate(self.roles[role]):
                    if wait_key(ev) in keys:
                        nxt = self.next_arrive(role, i)
                        if nxt is not None and nxt not in keys:
                            keys.add(nxt)
                            changed = True
        self._signal[loc] = frozenset(keys)
        return self._signal[loc]

    def handback_wait(self, ev: Event, loc: Loc) -> Key | None:
        """The key of `ev` if it is a wait that can hand `loc` back to its writer."""
        key = wait_key(ev)
        if key is None:
            return None
        if key[0] == NAMED:
            return key
        if key[0] in self.copy_barriers(loc) or key[0] in self.fill_barriers:
            return None
        buf = self.kernel.buffer(loc[0])
        stages = self.stages_of(key[0])
        if buf is not None and stages == buf.stages and stages > 1 and key[1] != loc[1]:
            return None
        return key

    def publishes(self, role: str, loc: Loc) -> list[Access]:
        """The writes of `loc` by `role` that publish it (a copy, or a generic write
        followed by an arrive before the role's next write of it)."""
        mine = [a for a in self.writes(loc) if a.role == role]
        out = []
        for n, a in enumerate(mine):
            if a.copy:
                out.append(a)
                continue
            end = mine[n + 1].index if n + 1 < len(mine) else len(self.roles[role])
            if any(arrive_key(ev) is not None for ev in self.roles[role][a.index + 1:end]):
                out.append(a)
        return out

    def gaps(self) -> list[Gap]:
        """Every write without a hand-back wait since the previous publish, and every read
        with fewer signal waits than the generations it has handed back plus one."""
        if self._gaps is not None:
            return self._gaps
        out: list[Gap] = []
        for loc in sorted(self.accesses):
            out.extend(self._producer_gaps(loc))
        for loc in sorted(self.accesses):
            out.extend(self._consumer_gaps(loc))
        self._gaps = out
        return out

    def handback(self, loc: Loc) -> frozenset[Key]:
        """Keys on which the writers of `loc` wait for it to be handed back."""
        if loc not in self._handback:
            self.gaps()
        return self._handback.get(loc, frozenset())

    def _producer_gaps(self, loc: Loc) -> list[Gap]:
        keys: set[Key] = set()
        ring = self.pipeline_of(loc[0])
        if ring is not None:
            keys.add((f"{ring}.empty", loc[1]))
        out: list[Gap] = []
        writers = sorted({a.role for a in self.writes(loc)})
        for role in writers:
            readers = self.readers(loc, role)
            pubs = self.publishes(role, loc)
            for a in self.writes(loc):
                if a.role != role or not readers:
                    continue
                before = [p for p in pubs if p.index < a.index]
                if not before:
                    continue
                window = self.roles[role][before[-1].index + 1:a.index]
                found = [k for ev in window if (k := self.handback_wait(ev, loc))]
                keys.update(found)
                if not found:
                    out.append(Gap("acquire", role, readers[0], loc, a.event,
                                   self._overwritten_read(loc, readers[0], len(before)),
                                   len(before)))
        self._handback[loc] = frozenset(keys)
        return out

    def _overwritten_read(self, loc: Loc, reader: str, generation: int) -> Event | None:
        """The reader's first read of generation `generation - 1` of `loc`."""
        signal = self.signal(loc)
        waits = 0
        first = None
        for ev in self.roles[reader]:
            if wait_key(ev) in signal:
                waits += 1
            if loc in smem_locs(ev.reads):
                first = first or ev
                if waits >= generation:
                    return ev
        return first

    def _consumer_gaps(self, loc: Loc) -> list[Gap]:
        out: list[Gap] = []
        signal = self.signal(loc)
        handback = {k for k in self.handback(loc) if k[0] != NAMED}
        for reader in sorted({a.role for a in self.reads(loc)}):
            writes = [a for a in self.writes(loc) if a.copy or a.role != reader]
            if not writes:
                continue
            waits = backs = 0
            for ev in self.roles[reader]:
                if wait_key(ev) in signal:
                    waits += 1
                if loc in smem_locs(ev.reads) and waits < backs + 1:
                    writer = writes[min(backs, len(writes) - 1)]
                    out.append(Gap("wait", reader, writer.role, loc, ev, writer.event, backs,
                                   tuple(sorted(k for k in signal if k[0] != NAMED))))
                    break
                if arrive_key(ev) in handback and backs < waits:
                    backs += 1  # a generation can be handed back only once it was taken
        return out

    # ---- release accounting ----------------------------------------------------------

    def imbalances(self) -> list[Imbalance]:
        """Per reader role and mbarrier hand-back slot: releases vs generations consumed."""
        self.gaps()
        guarded: dict[Key, list[Loc]] = {}
        for loc, keys in self._handback.items():
            for key in keys:
                if key[0] != NAMED:
                    guarded.setdefault(key, []).append(loc)
        arrivers: dict[Key, set[str]] = {}
        for role, events in self.roles.items():
            for ev in events:
                if ev.kind == "arrive" and ev.slot is not None:
                    arrivers.setdefault(ev.slot, set()).add(role)
        out: list[Imbalance] = []
        for key in sorted(guarded):
            locs = sorted(guarded[key])
            writer = next((a.role for loc in locs for a in self.writes(loc)), "")
            readers = sorted({r for loc in locs for r in self.readers(loc, writer)})
            if arrivers.get(key, set()) - set(readers):
                continue  # someone else arrives on it: not a hand-back of these readers
            for reader in readers:
                consumed = max((self._consumed(reader, loc, key) for loc in locs), key=len,
                               default=())
                releases = tuple(ev for ev in self.roles[reader] if arrive_key(ev) == key
                                 and ev.kind == "arrive")
                if consumed and len(releases) != len(consumed):
                    out.append(Imbalance(reader, key, tuple(locs), consumed, releases,
                                         writer))
        return out

    def _consumed(self, reader: str, loc: Loc, key: Key) -> tuple[Event, ...]:
        """The reader's waits on signal keys of `loc` that take a generation of it: the
        wait is followed, before the next such wait, by a read of `loc` or by its hand-back
        on `key` (a consumer may release a generation it took without reading it)."""
        signal = self.signal(loc)
        out: list[Event] = []
        pending: Event | None = None
        for ev in self.roles[reader]:
            if wait_key(ev) in signal:
                pending = ev
            elif pending is not None and (loc in smem_locs(ev.reads) or
                                          arrive_key(ev) == key):
                out.append(pending)
                pending = None
        return tuple(out)

    # ---- elected arrives -------------------------------------------------------------

    def elected_arrives(self) -> list[ElectedArrive]:
        read_by: dict[Loc, set[str]] = {}
        for loc, accs in self.accesses.items():
            read_by[loc] = {a.role for a in accs if not a.write}
        waited = {wait_key(ev) for events in self.roles.values() for ev in events}
        waiters = {k: {r for r, evs in self.roles.items() for ev in evs if wait_key(ev) == k}
                   for k in waited if k is not None}
        out: list[ElectedArrive] = []
        for role, events in self.roles.items():
            since_warp: list[Event] = []
            since_role: list[Event] = []
            for ev in events:
                if ev.kind == "fence" and ev.scope == "warp":
                    since_warp = []
                elif wait_key(ev) is not None and ev.kind == "named":
                    since_warp, since_role = [], []
                elif ev.kind == "compute":
                    locs = [loc for loc, proxy in ev.writes
                            if loc[0] == "smem" and proxy == "generic"
                            and read_by.get((loc[1], loc[2]), set()) - {role}]
                    if locs:
                        since_warp.append(ev)
                        since_role.append(ev)
                elif ev.kind == "arrive" and ev.per in ("warp", "role") and ev.slot:
                    whole = ev.per == "warp" or self.warps.get(role, 1) == 1
                    dirty = since_warp if whole else since_role
                    others = waiters.get(ev.slot, set()) - {role}
                    if dirty and others:
                        readers = sorted({r for w in dirty for loc in smem_locs(w.writes)
                                          for r in read_by.get(loc, set())} - {role})
                        out.append(ElectedArrive(role, ev, tuple(dirty), tuple(readers),
                                                 "syncwarp" if whole else "named"))
                    since_warp, since_role = [], []
        return out

    # ---- named barriers --------------------------------------------------------------

    def named_mismatches(self, participants: Mapping[int, Iterable[str]]
                         ) -> list[NamedMismatch]:
        """Named barriers whose participants (roles that use them in their program) reach
        them different numbers of times in this run."""
        out: list[NamedMismatch] = []
        for bar_id, roles in sorted(participants.items()):
            uses = {r: [ev for ev in self.roles.get(r, ()) if ev.kind == "named"
                        and ev.named is not None and ev.named[0] == bar_id]
                    for r in roles}
            counts = {r: len(v) for r, v in uses.items()}
            if len(set(counts.values())) <= 1:
                continue
            low = min(counts.values())
            busiest = max(counts, key=lambda r: (counts[r], -list(counts).index(r)))
            out.append(NamedMismatch(bar_id, counts, uses[busiest][low], busiest))
        return out


_CACHE: dict[tuple, tuple[Unrolled, Flow]] = {}


def pipelines_of(schedule: Schedule) -> dict[str, tuple[str, ...]]:
    """Buffers of every pipeline of a schedule, by pipeline name."""
    return {d.name: tuple(d.buffers) for d in schedule.resources
            if isinstance(d, PipelineDecl)}


def flow_of(kernel: LoweredKernel, unrolled: Unrolled,
            pipelines: Mapping[str, tuple[str, ...]] | None = None) -> Flow:
    """The (cached) Flow of one unrolled run."""
    pipes = dict(pipelines or {})
    key = (id(unrolled), id(kernel), tuple(sorted(pipes.items())))
    hit = _CACHE.get(key)
    if hit is not None and hit[0] is unrolled and hit[1].kernel is kernel:
        return hit[1]
    flow = Flow(kernel, unrolled, pipes)
    if len(_CACHE) > 16:
        _CACHE.clear()
    _CACHE[key] = (unrolled, flow)
    return flow


def structurally_rejected(findings: Iterable) -> bool:
    """A blocking finding of a hardware or resource rule exists: the lowered protocol may
    not mean what the schedule says (a buffer with fewer stages than its ring, ...), so the
    flow rules leave the schedule to that finding."""
    return any(f.severity == "blocking" and not f.code.startswith("P") for f in findings)


def runs_longest_first(protocol) -> list:
    """The runs of a ProtocolResult, the one with the most events first."""
    return sorted(protocol.runs, key=lambda r: -sum(len(e) for e in r.unrolled.roles.values()))


def named_participants(kernel: LoweredKernel) -> dict[int, list[str]]:
    """Roles whose program uses each named barrier id (`bar.sync` 0 is every role)."""
    out: dict[int, list[str]] = {}

    def visit(ops, role: str) -> None:
        for op in ops:
            if isinstance(op, LFor):
                visit(op.body, role)
            elif isinstance(op, LNamedSync):
                users = out.setdefault(op.id, [])
                if role not in users:
                    users.append(role)

    for role in kernel.roles:
        visit(role.body, role.name)
    if 0 in out:
        out[0] = [r.name for r in kernel.roles]
    return out


# ---- what-if: a missing acquire's arming restored ---------------------------------------


def _arm_before_copies(ops: tuple, full: str, tx: int) -> tuple:
    """`ops` with an arrive.expect_tx of `tx` bytes on `full` before the first copy that
    completes on it in every body that does not arm it itself."""
    out: list = []
    armed = any(isinstance(op, LArrive) and op.barrier == full and op.tx_bytes for op in ops)
    for op in ops:
        if isinstance(op, LFor):
            out.append(op.model_copy(update={"body": _arm_before_copies(op.body, full, tx)}))
            continue
        if isinstance(op, LCopy) and op.barrier == full and not armed:
            out.append(LArrive(path=op.path, span=op.span, barrier=full,
                               index=op.barrier_index, arrivals=1, tx_bytes=tx, per="role",
                               source="pipeline_acquire"))
            armed = True
        out.append(op)
    return tuple(out)


def armed_variant(kernel: LoweredKernel, role: str, ring: str) -> LoweredKernel | None:
    """The kernel with the transaction arming that `ring.acquire` would have issued put
    back into `role`, so that an exploration shows the race a missing acquire opens (the
    real kernel also never completes the full phase: it deadlocks first)."""
    full = kernel.barrier(f"{ring}.full")
    if full is None or not full.tx_bytes:
        return None
    roles = tuple(r.model_copy(update={"body": _arm_before_copies(r.body, full.name,
                                                                  full.tx_bytes)})
                  if r.name == role else r for r in kernel.roles)
    return kernel.model_copy(update={"roles": roles})
