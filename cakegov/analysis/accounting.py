"""Static accounting of the mbarrier protocol: per barrier slot and phase, who arrives how
often, how many transaction bytes are armed and how many the copies deliver; per wait,
which phase it must observe and whether its parity says so.

The accounting reads the unrolled events of the protocol runs (cakegov/analysis/unroll.py)
and never explores interleavings; the count and parity rules (P001-P007) judge from it
and take their witnesses from the exploration.

Which phase an event belongs to. A slot index of ring form `E % m` (what the lowering
derives for pipelines, and what raw schedules write as `full[k % S]`) names the ring
iteration `E`; the event then belongs to phase `E // m` of its slot: the `i`-th use of a
slot is its phase `i`. This is what lets several roles contribute to one phase
(two consumer warpgroups releasing iteration `k`) or to alternate phases (ping-pong
consumers), and a lagging release (`release(k - 1)`) land on the phase it frees. For any
other index (a constant slot such as `cbar[0]`) an event belongs to the role's visit
ordinal on that slot: a visit is a run of the role's arrivals and copies on the slot not
separated by a wait of that role.

Which phase a wait must observe. A wait on a full-side barrier (consumer: data has
landed) at ring iteration `E` observes phase `E // m`, parity `(E // m) % 2`; a wait on
an empty-side barrier (producer: the stage is free again) observes phase `E // m - 1`,
parity `(E // m + 1) % 2`, so the first pass over the ring finds the stage free
(phase -1 is the initial state) and a producer that skips its first pass starts at
parity 0. Without ring form: the `i`-th wait of the role on the slot observes phase `i`
(full side) or `i - 1` (empty side, unless the role already produced into that stage
index before its first wait: it skipped the first pass).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

from cakegov.analysis.explore import Anomaly
from cakegov.analysis.protocol import ProtocolResult, Run
from cakegov.analysis.unroll import Event, Slot
from cakegov.analysis.witness import find, witness_evidence
from cakegov.ir.expr import BinOp, Const, Env, EvalError, Expr, evaluate, render
from cakegov.ir.nodes import Decl, Schedule
from cakegov.lower.kernel import LArrive, LCopy, LFor, LOp, LoweredKernel, LWait

Side = Literal["full", "empty"]


@dataclass
class PhaseTally:
    """What one phase of one barrier slot receives."""

    slot: Slot
    phase: int
    arrivals: dict[str, int] = field(default_factory=dict)  # role -> arrivals
    arrives: list[Event] = field(default_factory=list)
    arms: list[Event] = field(default_factory=list)  # arrivals that add transaction bytes
    armed: int = 0
    copies: list[Event] = field(default_factory=list)
    delivered: int = 0

    @property
    def total(self) -> int:
        """Arrivals of every role in this phase."""
        return sum(self.arrivals.values())

    @property
    def arm_count(self) -> int:
        """How many threads arm transaction bytes (a `per="warp"` arm: one per warp)."""
        return sum(e.arrivals for e in self.arms)

    @property
    def label(self) -> str:
        return f"{self.slot[0]}[{self.slot[1]}] phase {self.phase}"


@dataclass(frozen=True)
class WaitCheck:
    """One executed wait: the phase it must observe and the parity it uses."""

    event: Event
    side: Side
    expected_phase: int
    ring: bool  # expected phase from the ring iteration (else from the role's wait order)
    run: int = 0  # index of the protocol run

    @property
    def expected_parity(self) -> int:
        return self.expected_phase % 2

    @property
    def ok(self) -> bool:
        return self.event.parity == self.expected_parity


@dataclass
class RunAccounting:
    """The accounting of one protocol run (one set of workload sizes)."""

    sizes: dict[str, int]
    phases: dict[Slot, dict[int, PhaseTally]] = field(default_factory=dict)
    waits: list[WaitCheck] = field(default_factory=list)
    # slot -> arriving role -> for each of its visits, the slot of its last wait before it
    gates: dict[Slot, dict[str, list[Slot | None]]] = field(default_factory=dict)
    ordinal: set[Slot] = field(default_factory=set)  # slots with arrivals not of ring form

    def tally(self, slot: Slot, phase: int) -> PhaseTally:
        return self.phases.setdefault(slot, {}).setdefault(phase, PhaseTally(slot, phase))


@dataclass
class Accounting:
    """Static accounting of every protocol run of one kernel."""

    kernel: LoweredKernel
    sides: dict[str, Side]
    runs: list[RunAccounting]

    def tallies(self, barrier: str | None = None) -> Iterator[PhaseTally]:
        """Every phase tally, in run, slot and phase order (optionally of one barrier)."""
        for run in self.runs:
            for slot in sorted(run.phases):
                if barrier is not None and slot[0] != barrier:
                    continue
                for phase in sorted(run.phases[slot]):
                    yield run.phases[slot][phase]

    def waits_by_path(self) -> dict[str, list[WaitCheck]]:
        """Every executed wait, grouped by the statement it comes from."""
        out: dict[str, list[WaitCheck]] = {}
        for run in self.runs:
            for check in run.waits:
                out.setdefault(check.event.path, []).append(check)
        return out

    def count(self, barrier: str) -> int | None:
        bar = self.kernel.barrier(barrier)
        return bar.count if bar is not None else None


# ---- building -------------------------------------------------------------------------


def _ops(kernel: LoweredKernel) -> dict[tuple[str, str], LOp]:
    """Barrier ops by (IR path, event kind)."""
    out: dict[tuple[str, str], LOp] = {}

    def visit(ops: tuple[LOp, ...]) -> None:
        for op in ops:
            if isinstance(op, LFor):
                visit(op.body)
            elif isinstance(op, LWait):
                out[(op.path, "wait")] = op
            elif isinstance(op, LArrive):
                out[(op.path, "arrive")] = op
            elif isinstance(op, LCopy):
                out[(op.path, "copy")] = op

    for role in kernel.roles:
        visit(role.body)
    return out


def ring_form(index: Expr) -> tuple[Expr, int] | None:
    """`(E, m)` when a slot index reads `E % m`: `E` is the ring iteration."""
    if isinstance(index, BinOp) and index.op == "%" and isinstance(index.rhs, Const) \
            and index.rhs.value > 0:
        return index.lhs, index.rhs.value
    return None


def _ring_phase(op: LOp | None, ev: Event, sizes: dict[str, int]) -> int | None:
    """Phase of the event's slot from the ring iteration of its index, if of ring form."""
    index = op.barrier_index if isinstance(op, LCopy) else getattr(op, "index", None)
    form = ring_form(index) if index is not None else None
    if form is None:
        return None
    env = Env(sizes=sizes, vars=dict(ev.iters), blocks={0: 0, 1: 0, 2: 0})
    try:
        return evaluate(form[0], env) // form[1]
    except EvalError:
        return None


def barrier_sides(kernel: LoweredKernel, run: Run | None) -> dict[str, Side]:
    """Full side (waiters read data the arrivals or copies publish) or empty side
    (waiters write a stage the arrivals free). Pipelines say so; a raw barrier is full when
    copies complete on it or transaction bytes are armed on it, else by what its waiters
    do first with shared memory after the wait (a write: empty side)."""
    sides: dict[str, Side] = {}
    data = {op.barrier for op in _ops(kernel).values()
            if isinstance(op, LCopy) or (isinstance(op, LArrive) and op.tx_bytes)}
    votes: dict[str, int] = {}
    if run is not None:
        for events in run.unrolled.roles.values():
            pending: list[str] = []
            for ev in events:
                if ev.kind == "wait" and ev.slot is not None:
                    pending.append(ev.slot[0])
                    continue
                if not pending:
                    continue
                if ev.kind == "copy" or (ev.kind == "compute" and ev.writes and not ev.reads):
                    vote = -1
                elif ev.kind == "compute" and ev.reads:
                    vote = 1
                else:
                    continue
                for name in pending:
                    votes[name] = votes.get(name, 0) + vote
                pending = []
    for bar in kernel.barriers:
        if bar.origin == "pipeline_full":
            sides[bar.name] = "full"
        elif bar.origin == "pipeline_empty":
            sides[bar.name] = "empty"
        elif bar.name in data:
            sides[bar.name] = "full"
        else:
            sides[bar.name] = "empty" if votes.get(bar.name, 0) < 0 else "full"
    return sides


def _account_run(kernel: LoweredKernel, run: Run, sides: dict[str, Side],
                 ops: dict[tuple[str, str], LOp], index: int = 0) -> RunAccounting:
    acc = RunAccounting(sizes=dict(run.sizes))
    for role, events in run.unrolled.roles.items():
        last_wait: tuple[int, Slot | None] = (-1, None)
        mark: dict[Slot, int] = {}
        visits: dict[Slot, int] = {}
        waits: dict[Slot, int] = {}
        base: dict[Slot, int] = {}
        produced: set[int] = set()  # stage indices the role arrived or copied on
        for ev in events:
            if ev.slot is None or ev.kind not in ("wait", "arrive", "copy"):
                continue
            op = ops.get((ev.path, ev.kind))
            ring = _ring_phase(op, ev, run.sizes)
            side = sides.get(ev.slot[0], "full")
            if ev.kind == "wait":
                if ev.slot not in base:
                    skipped = side == "full" or ev.slot[1] in produced
                    base[ev.slot] = 0 if skipped else -1
                nth = waits.get(ev.slot, 0)
                waits[ev.slot] = nth + 1
                if ring is not None:
                    expected = ring - (1 if side == "empty" else 0)
                else:
                    expected = base[ev.slot] + nth
                acc.waits.append(WaitCheck(ev, side, expected, ring is not None, index))
                last_wait = (ev.seq, ev.slot)
                continue
            if mark.get(ev.slot) != last_wait[0]:
                visits[ev.slot] = visits.get(ev.slot, 0) + 1
                acc.gates.setdefault(ev.slot, {}).setdefault(role, []).append(last_wait[1])
            mark[ev.slot] = last_wait[0]
            produced.add(ev.slot[1])
            phase = ring if ring is not None else visits[ev.slot] - 1
            if ring is None:
                acc.ordinal.add(ev.slot)
            tally = acc.tally(ev.slot, phase)
            if ev.kind == "copy":
                tally.copies.append(ev)
                tally.delivered += ev.bytes
            else:
                tally.arrives.append(ev)
                tally.arrivals[role] = tally.arrivals.get(role, 0) + ev.arrivals
                if ev.tx:
                    tally.arms.append(ev)
                    tally.armed += ev.tx
    return acc


def account(result: ProtocolResult) -> Accounting:
    """The accounting of every run of a protocol analysis."""
    kernel = result.kernel
    ops = _ops(kernel)
    sides = barrier_sides(kernel, result.runs[-1] if result.runs else None)
    runs = [_account_run(kernel, run, sides, ops, i) for i, run in enumerate(result.runs)]
    return Accounting(kernel=kernel, sides=sides, runs=runs)


_CACHE: OrderedDict[int, tuple[ProtocolResult, Accounting]] = OrderedDict()


def accounting_of(result: ProtocolResult) -> Accounting:
    """`account(result)`, computed once per protocol result (the P rules share it)."""
    hit = _CACHE.get(id(result))
    if hit is not None and hit[0] is result:
        return hit[1]
    value = account(result)
    _CACHE[id(result)] = (result, value)  # holding `result` keeps its id unique
    while len(_CACHE) > 8:
        _CACHE.popitem(last=False)
    return value


# ---- reading --------------------------------------------------------------------------


def multi_armed(tally: PhaseTally) -> bool:
    """Transaction bytes armed by more than one thread in a phase whose bytes do not
    balance (several arms that split the bytes between them are legal)."""
    return tally.arm_count > 1 and tally.armed != tally.delivered


def repeated(tally: PhaseTally) -> bool:
    """A role arrives on the phase more than once (two statements, or one run twice)."""
    roles = [e.role for e in tally.arrives]
    return len(roles) != len(set(roles))


def describe_copies(tally: PhaseTally) -> str:
    """`a_s (8,192 B, line 20) + b_s (16,384 B, line 21)`, or `no copy`."""
    parts = []
    for ev in tally.copies:
        name = ev.writes[0][0][1] if ev.writes else "?"
        parts.append(f"{name} ({ev.bytes:,} B, line {ev.line})")
    return " + ".join(parts) if parts else "no copy"


def copy_buffers(tally: PhaseTally) -> list[str]:
    """Names of the buffers the phase's copies write, in issue order, without repeats."""
    out: list[str] = []
    for ev in tally.copies:
        for (_, name, _), _ in ev.writes:
            if name not in out:
                out.append(name)
    return out


def describe_arrivals(tally: PhaseTally) -> str:
    """`loader 1 (arrive_expect_tx, line 19) + math 4 (per warp, line 26)`."""
    parts = []
    for role, n in tally.arrivals.items():
        lines = sorted({e.line for e in tally.arrives if e.role == role})
        pers = sorted({e.per for e in tally.arrives if e.role == role})
        how = ", ".join(f"per {p}" for p in pers)
        where = ", ".join(str(x) for x in lines)
        parts.append(f"{role} {n} ({how}; line {where})")
    return " + ".join(parts) if parts else "none"


def witness_for(result: ProtocolResult, kinds: tuple[str, ...], *,
                resource: str | None = None, line: int | None = None) -> Anomaly | None:
    """The exploration anomaly that best shows a defect: of `kinds`, about `resource` or
    `line` if one is, else the first of `kinds` at all."""
    tries: list[dict] = []
    if resource is not None and line is not None:
        tries.append({"resource": resource, "line": line})
    if line is not None:
        tries.append({"line": line})
    if resource is not None:
        tries.append({"resource": resource})
    tries.append({})
    for kw in tries:
        hit = find(result.anomalies, kinds, **kw)
        if hit is not None:
            return hit
    return None


def barrier_decl(schedule: Schedule, barrier: str) -> Decl | None:
    """The declaration behind a lowered barrier: `lm.mbarrier(...)` for a raw one, the
    `lm.pipeline(...)` for `ring.full` / `ring.empty`."""
    decl = schedule.resource(barrier)
    if decl is None and "." in barrier:
        decl = schedule.resource(barrier.split(".", 1)[0])
    return decl


def stages_of(tallies: list[PhaseTally]) -> str:
    """`stage 0` or `stages 0-3` for the slots the tallies cover."""
    idx = sorted({t.slot[1] for t in tallies})
    if not idx:
        return ""
    if len(idx) == 1:
        return f"stage {idx[0]}"
    if idx == list(range(idx[0], idx[-1] + 1)):
        return f"stages {idx[0]}-{idx[-1]}"
    return "stages " + ", ".join(str(i) for i in idx)


# ---- counts ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CountMismatch:
    """A barrier whose every phase receives the same number of arrivals, not its count."""

    barrier: str
    side: Side
    count: int
    arrivals: int
    tallies: tuple[PhaseTally, ...]


def count_mismatches(acc: Accounting, side: Side) -> list[CountMismatch]:
    """Barriers of one side whose init count differs from the arrivals of every phase.
    Phases that disagree among themselves (a missing or extra release), phases a role
    arrives on more than once (a repeated release or commit) and phases armed more than
    once (double arming) are other defects and are left to their rules."""
    out: list[CountMismatch] = []
    for bar in acc.kernel.barriers:
        if acc.sides.get(bar.name) != side or bar.count < 1:
            continue
        tallies = [t for t in acc.tallies(bar.name) if t.total > 0]
        if not tallies or any(multi_armed(t) or repeated(t) for t in tallies):
            continue
        totals = {t.total for t in tallies}
        if len(totals) == 1 and bar.count not in totals:
            out.append(CountMismatch(bar.name, side, bar.count, totals.pop(), tuple(tallies)))
    return out


def explain_arrivals(tally: PhaseTally, kernel: LoweredKernel) -> str:
    """Who arrives in a phase and why that many: `loader arms expect_tx from one elected
    thread (line 19)`, `math arrives once per warp, 8 warps (line 26)`."""
    warps = {r.name: r.warps for r in kernel.roles}
    parts = []
    seen: set[tuple[str, str]] = set()
    for ev in tally.arrives:
        if (ev.role, ev.path) in seen:
            continue
        seen.add((ev.role, ev.path))
        n = warps.get(ev.role, 1)
        verb = "arms expect_tx" if ev.tx else "arrives"
        how = {"role": "from one elected thread", "warp": f"once per warp, {n} warps",
               "thread": f"from every thread, {n * 32} threads"}.get(ev.per, ev.per)
        parts.append(f"{ev.role} {verb} {how} (line {ev.line})")
    return "; ".join(parts)


_COUNT_EFFECT = {
    ("full", True): "no phase of `{b}` can complete, so every wait on it blocks forever "
                    "(deadlock)",
    ("full", False): "each phase of `{b}` completes after {c} of its {a} arrivals: a waiter "
                     "can pass before every producer has signalled (race) and the other "
                     "arrivals spill into the next phase",
    ("empty", True): "no phase of `{b}` can complete, so the producer blocks forever when it "
                     "comes back to a stage (deadlock)",
    ("empty", False): "each phase of `{b}` completes after {c} of its {a} releases: the "
                      "producer can overwrite a stage that other consumer warps are still "
                      "reading (race) and the other releases spill into the next phase",
}


def count_report(acc: Accounting, mismatch: CountMismatch, decl: Decl | None) -> dict:
    """Message, condition, hint and accounting evidence of a count mismatch."""
    m = mismatch
    first = m.tallies[0]
    pipeline = getattr(decl, "kind", None) == "pipeline"
    field_ = ("full_count" if m.side == "full" else "empty_count") if pipeline else "count"
    what = "full (producer -> consumer)" if m.side == "full" else \
        "empty (consumer -> producer)"
    effect = _COUNT_EFFECT[(m.side, m.count > m.arrivals)].format(
        b=m.barrier, c=m.count, a=m.arrivals)
    why = explain_arrivals(first, acc.kernel)
    derived = None
    if pipeline and decl is not None:
        derived = 1 if m.side == "full" else next(
            (r.warps for r in acc.kernel.roles if r.name == getattr(decl, "consumer", "")),
            None)
    if pipeline and derived == m.arrivals:
        hint = (f"remove `{field_}={m.count}`: the compiler derives {m.arrivals} (per "
                f"phase, {why})")
    else:
        hint = f"use `{field_}={m.arrivals}`: per phase, {why}"
    return {
        "message": (f"{what} barrier `{m.barrier}` is initialised with {field_}={m.count} but "
                    f"every phase receives {m.arrivals} arrival(s): {effect}"),
        "condition": (f"init count == arrivals per phase: {m.count} == {m.arrivals} "
                      f"({first.label}: {describe_arrivals(first)})"),
        "hint": hint,
        "roles": sorted(first.arrivals),
        "evidence": {
            "count": m.count,
            "arrivals_per_phase": m.arrivals,
            "phases": [{"slot": t.slot[1], "phase": t.phase, "arrivals": dict(t.arrivals)}
                       for t in m.tallies[:8]],
        },
    }


# ---- transaction bytes ----------------------------------------------------------------


@dataclass(frozen=True)
class TxMismatch:
    """An arm whose bytes differ from what the copies of its phase deliver."""

    arm: Event  # the arrive_expect_tx (or acquire) that arms the phase
    tally: PhaseTally  # the first phase where it does not balance
    phases: int  # how many phases it arms that do not balance


def tx_mismatches(acc: Accounting) -> list[TxMismatch]:
    """Phases armed by one thread (or by several that split the bytes) whose armed bytes
    differ from the bytes of the copies completing on them, one entry per arming
    statement. Phases armed more than once with too many bytes are double arming."""
    found: dict[str, list[PhaseTally]] = {}
    for tally in acc.tallies():
        if not tally.arms or multi_armed(tally) or tally.armed == tally.delivered:
            continue
        found.setdefault(tally.arms[0].path, []).append(tally)
    return [TxMismatch(arm=t[0].arms[0], tally=t[0], phases=len(t)) for t in found.values()]


def double_arms(acc: Accounting) -> list[tuple[Event, PhaseTally]]:
    """Phases armed by more than one thread with more bytes than their copies deliver:
    the arming statement at fault (a `per="warp"` arm, else the second arm of the phase)
    and the first such phase, one entry per statement."""
    out: dict[str, tuple[Event, PhaseTally]] = {}
    for tally in acc.tallies():
        if not multi_armed(tally):
            continue
        per_warp = [e for e in tally.arms if e.per == "warp" and e.arrivals > 1]
        culprit = per_warp[0] if per_warp else sorted(tally.arms, key=lambda e: e.line)[1]
        out.setdefault(culprit.path, (culprit, tally))
    return list(out.values())


# ---- parities -------------------------------------------------------------------------


def wait_sites(kernel: LoweredKernel) -> dict[str, tuple[LWait, tuple[LFor, ...]]]:
    """Every wait op by IR path, with its enclosing loops (outermost first)."""
    out: dict[str, tuple[LWait, tuple[LFor, ...]]] = {}

    def visit(ops: tuple[LOp, ...], loops: tuple[LFor, ...]) -> None:
        for op in ops:
            if isinstance(op, LFor):
                visit(op.body, (*loops, op))
            elif isinstance(op, LWait):
                out.setdefault(op.path, (op, loops))

    for role in kernel.roles:
        visit(role.body, ())
    return out


def parity_fix(kernel: LoweredKernel, path: str, side: Side) -> str:
    """The parity expression a wait should use, in source spelling."""
    site = wait_sites(kernel).get(path)
    plus = " + 1" if side == "empty" else ""
    if site is not None:
        op, loops = site
        form = ring_form(op.index)
        if form is not None:
            return f"parity=({render(form[0])} // {form[1]}{plus}) % 2"
        if len(loops) == 1 and loops[0].step == 1 and isinstance(loops[0].start, Const):
            var, start = loops[0].var, loops[0].start.value
            ordinal = var if start == 0 else f"{var} - {start}"
            return f"parity=({ordinal}{plus}) % 2"
        if not loops:
            return f"parity={1 if side == 'empty' else 0}"
    first = "1" if side == "empty" else "0"
    return f"a parity that starts at {first} and flips on every wait of the role on the slot"


def wrong_parities(acc: Accounting) -> dict[str, list[WaitCheck]]:
    """Waits (by statement) whose parity differs from the phase they must observe at one
    or more of their executions, with every execution of the statement."""
    return {path: checks for path, checks in acc.waits_by_path().items()
            if any(not c.ok for c in checks)}


def sequence(checks: list[WaitCheck], slot: Slot) -> tuple[str, str, str]:
    """Iterations, expected parities and actual parities of the waits on one slot, in the
    run that executes most of them."""
    mine = [c for c in checks if c.event.slot == slot]
    runs = [c.run for c in mine]
    best = max(set(runs), key=runs.count, default=0)
    mine = [c for c in mine if c.run == best]
    its = ", ".join(_iters(c.event) for c in mine)
    return (its, ", ".join(str(c.expected_parity) for c in mine),
            ", ".join(str(c.event.parity) for c in mine))


def _iters(ev: Event) -> str:
    return ",".join(f"{k}={v}" for k, v in ev.iters) or "once"


# ---- aliasing -------------------------------------------------------------------------


@dataclass(frozen=True)
class PhaseGap:
    """A wait that must observe a phase two or more after the last one its role saw."""

    check: WaitCheck
    previous: int  # the last phase the role observed on the slot (-1: none)


@dataclass(frozen=True)
class PhaseLead:
    """A barrier slot with one parity bit whose arriving role refills it from several
    stages: as many of its phases can be outstanding at once."""

    slot: Slot
    role: str
    gates: tuple[Slot, ...]


def phase_gaps(acc: Accounting) -> dict[str, list[PhaseGap]]:
    """Correct-parity waits (by barrier) whose role skips phases of the slot: the waiter
    can be more than one phase behind when it waits."""
    wrong = set(wrong_parities(acc))
    out: dict[str, list[PhaseGap]] = {}
    for run in acc.runs:
        last: dict[tuple[str, Slot], int] = {}
        for check in run.waits:
            ev = check.event
            assert ev.slot is not None
            key = (ev.role, ev.slot)
            previous = last.get(key, -1)
            last[key] = max(previous, check.expected_phase)
            if ev.path in wrong or not check.ring:
                continue
            if check.expected_phase - previous >= 2:
                out.setdefault(ev.slot[0], []).append(PhaseGap(check, previous))
    return out


def phase_leads(acc: Accounting) -> dict[str, list[PhaseLead]]:
    """Waited-on slots of one parity bit (an index not of ring form) whose arriving role
    comes to them from waits on two or more slots of the opposite side (by barrier)."""
    out: dict[str, list[PhaseLead]] = {}
    for run in acc.runs:
        waited = {c.event.slot for c in run.waits}
        for slot in sorted(run.ordinal & waited):
            side = acc.sides.get(slot[0], "full")
            for role, gates in run.gates.get(slot, {}).items():
                opposite = sorted({g for g in gates if g is not None
                                   and acc.sides.get(g[0], "full") != side})
                if len(opposite) >= 2:
                    lead = PhaseLead(slot, role, tuple(opposite))
                    if lead not in out.get(slot[0], []):
                        out.setdefault(slot[0], []).append(lead)
    return out


def evidence_of(anomaly: Anomaly | None, **extra: object) -> dict:
    """Finding evidence: the anomaly's witness (for a deadlock, closed by the steps that
    block forever, so that it ends at the defect) and the accounting in `extra`."""
    if anomaly is None:
        return dict(extra)
    out = witness_evidence(anomaly, **extra)
    if anomaly.kind == "deadlock":
        for ev in anomaly.events:
            what = (f"wait {ev.slot[0]}[{ev.slot[1]}] parity {ev.parity} blocks forever"
                    if ev.kind == "wait" and ev.slot is not None else f"{ev.kind} blocks forever")
            text = f"{ev.where()}: {what}"
            out["witness"].append(text)
            out["witness_steps"].append({"line": ev.line, "text": text})
    return out


def plain(expr: Expr) -> str:
    """`render(expr)` without the outermost parentheses."""
    text = render(expr)
    return text[1:-1] if text.startswith("(") and text.endswith(")") else text


def count_findings(ctx, side: Side, too_low: tuple[str, ...]):
    """Findings for barriers of one side whose init count differs from the arrivals each
    phase receives, each with the witness of the matching anomaly (a count too high
    deadlocks; one too low completes phases early, with the consequences `too_low`)."""
    result = ctx.protocol
    if result is None or not result.runs:
        return
    acc = accounting_of(result)
    for mismatch in count_mismatches(acc, side):
        decl = barrier_decl(ctx.schedule, mismatch.barrier)
        report = count_report(acc, mismatch, decl)
        kinds = ("deadlock",) if mismatch.count > mismatch.arrivals else too_low
        anomaly = witness_for(result, kinds, resource=mismatch.barrier)
        yield ctx.finding(
            decl,
            report["message"],
            condition=report["condition"],
            hint=report["hint"],
            resource=mismatch.barrier,
            role=", ".join(report["roles"]) or None,
            stage=stages_of(list(mismatch.tallies)) or None,
            evidence=evidence_of(anomaly, **report["evidence"]),
        )
