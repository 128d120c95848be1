"""What protocol rules share to classify and explain the anomalies the analysis found.

A protocol rule never decides legality itself: the analysis (cakegov/analysis/protocol.py)
found an anomaly with its witness; the rule names its class by proposing the repair of
that class (a count, a parity, a missing wait, ...) and asking the engine to apply it and
re-check (`ctx.attempt`). The repair that removes the anomaly without bringing a new one
is the finding's fix, its root-cause line and its hint at once; every anomaly it removes
is explained by that one finding."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from cakegov.analysis.execute import Anomaly
from cakegov.analysis.program import Event, Program
from cakegov.analysis.witness import witness_evidence
from cakegov.ir.nodes import Call, Decl, For, PipelineDecl, Schedule, Stmt, Warps
from cakegov.ir.parse import walk_statements
from cakegov.plugin import Repair


@dataclass(frozen=True)
class Candidate:
    """One proposed fix: the repairs that make it and how to say it."""

    repairs: tuple[Repair, ...]
    description: str
    applicability: str = "machine"
    subject: str = ""  # what the fix is about (a barrier, a statement path), for the report
    value: object = None  # the value the fix sets, for the report


def program_of(ctx, anomaly: Anomaly) -> Program | None:
    run = ctx.protocol.run_of(anomaly) if ctx.protocol is not None else None
    return run.program if run is not None else None


def first_fix(ctx, target: Anomaly, candidates: Iterable[Candidate]):
    """The first candidate the engine confirms (cakegov/check/context.py, `attempt`), as
    (candidate, attempt), or None."""
    seen: set[tuple] = set()
    if ctx.repairs_spent():
        return None
    for cand in candidates:
        if cand.repairs in seen:
            continue
        seen.add(cand.repairs)
        attempt = ctx.attempt(cand.repairs, cand.description, target, cand.applicability)
        if attempt is not None:
            return cand, attempt
    return None


def evidence(anomaly: Anomaly, **extra) -> dict:
    return witness_evidence(anomaly, **extra)


def barrier_decl(schedule: Schedule, barrier: str) -> Decl | None:
    """`lm.mbarrier(...)` for a raw barrier, `lm.pipeline(...)` for `ring.full/empty`."""
    decl = schedule.resource(barrier)
    if decl is None and "." in barrier:
        decl = schedule.resource(barrier.split(".", 1)[0])
    return decl


def role_of(path: str) -> str:
    """The role a statement's IR path belongs to (`roles.<name>.body[...]`)."""
    parts = path.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "roles" else ""


def statements(schedule: Schedule, role: str | None = None
               ) -> Iterator[tuple[Stmt, tuple[For, ...], str]]:
    for r in schedule.roles:
        if role is not None and r.name != role:
            continue
        for stmt, loops in walk_statements(r.body):
            yield stmt, loops, r.name


def loops_around(schedule: Schedule, path: str) -> tuple[For, ...]:
    for stmt, loops, _ in statements(schedule):
        if stmt.path == path:
            return loops
    return ()


def last_statement(schedule: Schedule, role: str) -> Stmt | None:
    r = schedule.role(role)
    return r.body[-1] if r is not None and r.body else None


def calls(schedule: Schedule, primitives: tuple[str, ...], role: str | None = None
          ) -> list[Call]:
    return [s for s, _, _ in statements(schedule, role) if isinstance(s, Call)
            and s.primitive in primitives]


def barrier_of(call: Call) -> str | None:
    """The barrier a call names (its receiver or `barrier=`), as the lowering names it."""
    for key in ("bar", "barrier", "ring"):
        value = call.args.get(key)
        if value is None:
            continue
        name = getattr(value, "name", None)
        side = getattr(value, "pipeline_side", None)
        if key == "ring" or value.kind == "pipeline":
            return name
        return f"{name}.{side}" if side else name
    return None


def pipeline_of(schedule: Schedule, name: str) -> PipelineDecl | None:
    decl = schedule.resource(name.split(".", 1)[0])
    return decl if isinstance(decl, PipelineDecl) else None


def side(program: Program, barrier: str) -> str:
    """`full` when completing the barrier publishes data (copies complete on it, or its
    arrivers wrote what its waiters then read), `empty` when it hands storage back. Used
    only to name the class of a defect, never to decide one."""
    if barrier.endswith(".full"):
        return "full"
    if barrier.endswith(".empty"):
        return "empty"
    slots = {i for i, (name, _) in enumerate(program.slots) if name == barrier}
    for t in program.threads:
        for ev in t.events:
            if ev.kind == "copy" and ev.slot in slots:
                return "full"
    votes = 0
    for t in program.threads:
        pending = False
        for ev in t.events:
            if ev.kind == "wait" and ev.slot in slots:
                pending = True
            elif pending and ev.mem:
                smem = [m for m in ev.mem if m.space == "smem"]
                if smem:
                    votes += -1 if all(m.write for m in smem) or ev.kind == "copy" else 1
                    pending = False
    return "empty" if votes < 0 else "full"


def barriers_of(ctx, anomaly: Anomaly) -> list[str]:
    """The barriers an anomaly may be about: those a deadlock's blocked waits and the
    others they wait for, the barrier an anomaly names, else every barrier."""
    names = [b.name for b in ctx.protocol.kernel.barriers]
    program = program_of(ctx, anomaly)
    if anomaly.kind == "deadlock" and program is not None:
        return names  # any stuck phase can be the cause: the fix decides
    if anomaly.resource in names:
        return [anomaly.resource]
    return names


def slots_of(program: Program, barrier: str) -> set[int]:
    return {i for i, (name, _) in enumerate(program.slots) if name == barrier}


def multicast_into(program: Program, barrier: str) -> bool:
    """Do copies issued by another CTA of the cluster complete on `barrier` (a
    multicast)? cakegov/analysis/cluster.py"""
    if program.cluster <= 1:
        return False
    slots = slots_of(program, barrier)
    return any(ev.kind == "copy" and ev.slot in slots and (ev.peer >= 0 or ev.dests)
               for t in program.threads for ev in t.events)


def remote_arrivals(program: Program, barrier: str) -> int:
    """Arrivals per phase on one CTA's `barrier` that come from other CTAs of the cluster
    (`arrive(cta=...)`), counted on the slot that receives the most."""
    if program.cluster <= 1:
        return 0
    slots = slots_of(program, barrier)
    per: dict[int, set[tuple[str, int]]] = {}
    weight: dict[tuple[str, int], int] = {}
    for t in program.threads:
        for ev in t.events:
            if ev.kind == "arrive" and ev.slot in slots and ev.peer >= 0:
                per.setdefault(ev.slot, set()).add((ev.path, ev.cta))
                weight[(ev.path, ev.cta)] = ev.n
    return max((sum(weight[k] for k in v) for v in per.values()), default=0)


def events_of(program: Program, path: str) -> list[Event]:
    return [ev for t in program.threads for ev in t.events if ev.path == path]


def slot_stage(program: Program | None, anomaly: Anomaly) -> int | None:
    """The stage (slot index) an anomaly is about, as an integer."""
    if isinstance(anomaly.details.get("stage"), int):
        return anomaly.details["stage"]
    slot = anomaly.details.get("slot")
    if program is not None and isinstance(slot, int) and 0 <= slot < len(program.slots):
        return program.slots[slot][1]
    return None


def iteration(ev: Event) -> str:
    its = ", ".join(f"{k}={v}" for k, v in ev.iters)
    return f" at {its}" if its else ""


def unique(events: Iterable[Event]) -> list[Event]:
    seen: set[str] = set()
    out = []
    for ev in events:
        if ev.path not in seen:
            seen.add(ev.path)
            out.append(ev)
    return out


def structurally_rejected(findings) -> bool:
    """A blocking finding of a hardware or resource rule exists: the lowered protocol may
    not mean what the schedule says (a barrier over its stages, ...), so the protocol
    rules leave the schedule to that finding (one root cause, one finding)."""
    return any(f.severity == "blocking" and not f.code.startswith("P") for f in findings)


def classify(ctx, kinds: tuple[str, ...], candidates, report):
    """The common loop of a protocol rule: for every unexplained anomaly of `kinds`, the
    first of `candidates(ctx, anomaly)` the engine confirms becomes a finding through
    `report(ctx, anomaly, attempt)`; one finding explains every anomaly its fix removes."""
    if ctx.protocol is None or structurally_rejected(ctx.findings):
        return
    done: set[int] = set()
    for anomaly in ctx.unclaimed(kinds):
        if id(anomaly) in done:
            continue
        found = first_fix(ctx, anomaly, candidates(ctx, anomaly))
        if found is None:
            continue
        cand, attempt = found
        done.update(id(a) for a in attempt.removed)
        yield report(ctx, anomaly, attempt, cand)


# ---- barrier counts (P001, P002) -------------------------------------------------------

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


def _count_arg(decl: Decl, barrier: str) -> str:
    if isinstance(decl, PipelineDecl):
        return "full_count" if barrier.endswith(".full") else "empty_count"
    return "count"


def count_values(program: Program, barrier: str, anomaly: Anomaly) -> list[int]:
    """Arrival counts worth trying for `barrier`: what one phase receives from each
    arriving statement, from all of them together, and what a stuck phase received."""
    slots = slots_of(program, barrier)
    per_path: dict[str, int] = {}
    for t in program.threads:
        for ev in t.events:
            if ev.kind == "arrive" and ev.slot in slots:
                per_path[ev.path] = ev.n
    values = set(per_path.values()) | {sum(per_path.values())}
    by_role: dict[str, int] = {}
    for path, n in per_path.items():
        by_role[role_of(path)] = by_role.get(role_of(path), 0) + n
    values |= set(by_role.values())
    current = program.slot_count[min(slots)] if slots else 0
    for name, (_, pending, _) in anomaly.details.get("bars", {}).items():
        if name.split("[")[0] == barrier and current - pending > 0:
            values.add(current - pending)
    return sorted(v for v in values if v >= 1 and v != current)


def count_findings(ctx, side_name: str):
    """P001 / P002: a barrier of this side whose init count is not what its phases
    receive; the fix sets the count and the engine confirms it removes the anomaly."""
    kinds = ("deadlock", "race", "premature", "over-arrival", "early-pass", "lapped",
             "uninit", "exit-inflight")

    def candidates(ctx, anomaly):
        program = program_of(ctx, anomaly)
        if program is None:
            return
        for name in barriers_of(ctx, anomaly):
            bar = ctx.protocol.kernel.barrier(name)
            if side(program, bar.name) != side_name:
                continue
            decl = barrier_decl(ctx.schedule, bar.name)
            if decl is None:
                continue
            arg = _count_arg(decl, bar.name)
            for value in count_values(program, bar.name, anomaly):
                yield Candidate((Repair("set_arg", decl.path, arg, str(value)),),
                                f"use `{arg}={value}`: the arrivals each phase of "
                                f"`{bar.name}` receives", subject=bar.name, value=value)

    def report(ctx, anomaly, attempt, cand):
        value, barrier = cand.value, cand.subject
        program = program_of(ctx, anomaly)
        bar = ctx.protocol.kernel.barrier(barrier)
        decl = barrier_decl(ctx.schedule, barrier)
        arg = _count_arg(decl, barrier)
        effect = _COUNT_EFFECT[(side_name, bar.count > value)].format(
            b=barrier, c=bar.count, a=value)
        what = "full (producer -> consumer)" if side_name == "full" else \
            "empty (consumer -> producer)"
        roles = sorted({role_of(ev.path) for t in program.threads for ev in t.events
                        if ev.kind == "arrive" and ev.slot in slots_of(program, barrier)})
        remote = remote_arrivals(program, barrier)
        if remote:  # a count that ignores the cluster shape
            effect += (f"; {remote} of the {value} arrivals per phase come from the other "
                       f"CTAs of the cluster (`arrive(cta=...)`), so the count is the "
                       "consumers of every CTA that releases to this one, not of one CTA")
        return ctx.finding(
            decl,
            f"{what} barrier `{barrier}` is initialised with {arg}={bar.count} but every "
            f"phase receives {value} arrival(s): {effect}",
            condition=f"init count == arrivals per phase: {bar.count} == {value}",
            hint=attempt.fix.description, resource=barrier, role=", ".join(roles) or None,
            evidence=evidence(anomaly, count=bar.count, arrivals_per_phase=value),
            fix=attempt.fix, explains=attempt.removed)

    yield from classify(ctx, kinds, candidates, report)


# ---- statements an anomaly involves ---------------------------------------------------


def raw_waits(ctx, anomaly: Anomaly) -> list[Call]:
    """The schedule's own parity waits (`bar[i].wait(parity=...)`), those the anomaly
    involves first, then those of the roles it involves, then the others."""
    waits = calls(ctx.schedule, ("mbarrier_wait",))
    involved = [e.path for e in anomaly.events]
    roles = {e.role for e in anomaly.events}
    program = program_of(ctx, anomaly)
    before: list[str] = []
    if program is not None:
        for ev in anomaly.events:
            t = program.threads[ev.thread]
            prior = [e for e in t.events[:ev.seq] if e.kind == "wait"]
            before += [e.path for e in reversed(prior)][:2]

    def rank(call: Call) -> tuple[int, int]:
        if call.path in involved:
            return (0, involved.index(call.path))
        if call.path in before:
            return (1, before.index(call.path))
        return (2 if role_of(call.path) in roles else 3, call.span.line)

    return sorted(waits, key=rank)


def parity_is_constant(call: Call, value: int) -> bool:
    parity = call.args.get("parity")
    expr = getattr(parity, "expr", None)
    return getattr(expr, "kind", "") == "const" and getattr(expr, "value", None) == value


def parity_text(ctx, call: Call) -> str:
    """The wait's parity as the schedule writes it (`(k // S) % 2`, not the IR's
    `((k // 2) % 2)`), falling back to the IR's spelling."""
    from cakegov.ir.expr import render

    value = call.args.get("parity")
    written = ctx.spelling(value) if value is not None else None
    if written is not None:
        return written
    expr = getattr(value, "expr", None)
    return render(expr) if expr is not None else "?"


def siblings_after(schedule: Schedule, path: str) -> list[Stmt]:
    """The statements after `path` in the same body, in order."""
    def search(body: tuple[Stmt, ...]) -> list[Stmt] | None:
        for i, stmt in enumerate(body):
            if stmt.path == path:
                return list(body[i + 1:])
            if isinstance(stmt, For | Warps):
                found = search(stmt.body)
                if found is not None:
                    return found
        return None

    for role in schedule.roles:
        found = search(role.body)
        if found is not None:
            return found
    return []


def loop_head(schedule: Schedule, path: str) -> Stmt | None:
    """The first statement of the innermost loop body around statement `path`."""
    loops = loops_around(schedule, path)
    return loops[-1].body[0] if loops and loops[-1].body else None


def first_statement(schedule: Schedule, role: str) -> Stmt | None:
    r = schedule.role(role)
    return r.body[0] if r is not None and r.body else None


def free_named_id(ctx) -> int | None:
    """A named-barrier id no declaration and no role synchronisation uses."""
    from cakegov.lower.kernel import NAMED_BARRIER_IDS

    kernel = ctx.protocol.kernel
    used = {0} | {n.id for n in kernel.named_barriers}
    used |= {kernel.role_barrier(r.name) for r in kernel.roles} - {None}
    used |= {b.id for b in kernel.subset_barriers}
    for i in range(NAMED_BARRIER_IDS - 1, 0, -1):  # from the top: role ids grow upwards
        if i not in used:
            return i
    return None


def fresh_name(ctx, base: str) -> str:
    names = {d.name for d in ctx.schedule.resources} | {r.name for r in ctx.schedule.roles}
    name, n = base, 2
    while name in names:
        name, n = f"{base}{n}", n + 1
    return name


def role_sync_repairs(ctx, role: str, before: str, lanes_only: bool = False,
                      fence: bool = False) -> tuple[Repair, ...] | None:
    """Repairs that synchronise every thread of `role` before statement `before`:
    `lm.syncwarp()` for one warp (or when only lanes of one warp must be ordered), else a
    named barrier over the role, declared for it. With `fence`, every thread first
    executes `lm.fence_proxy()`: what the hand-off then releases includes the threads'
    generic accesses for an async-proxy write (a copy refilling the stage, axiom A19)."""
    r = ctx.schedule.role(role)
    if r is None:
        return None
    warps = r.warp_stop - r.warp_start
    first = (Repair("insert", before, text="lm.fence_proxy()"),) if fence else ()
    if warps == 1 or lanes_only:
        return (*first, Repair("insert", before, text="lm.syncwarp()"))
    block = block_of(ctx.schedule, before)
    if block is not None:  # a barrier over the role is reached by every warp: outside
        before = block.path
    ident = free_named_id(ctx)
    if ident is None:
        return None
    name = fresh_name(ctx, f"{role}_sync")
    if fence:
        first = (Repair("insert", before, text="lm.fence_proxy()"),)
    return (Repair("declare", text=f"{name} = lm.named_barrier(id={ident}, "
                                   f"threads={32 * warps})"),
            *first, Repair("insert", before, text=f"{name}.sync()"))


def guard_slot(program: Program, writer: Event) -> int | None:
    """The barrier slot the thread of `writer` (a copy or a write that overwrites a stage)
    waited on last before it: the `empty` side whose phase hands the stage over."""
    for ev in reversed(program.threads[writer.thread].events[:writer.seq]):
        if ev.kind == "wait":
            return ev.slot
    return None


def hand_off_after(program: Program, ev: Event, slot: int | None = None) -> Event | None:
    """The first arrive (or named barrier) of `ev`'s thread after `ev`; with `slot`, the
    first arrive on that barrier slot when the thread has one (the release of the stage,
    not a scheduling barrier's arrive between); when the thread has none (a class of a
    role split by `with lm.warps(...)` that leaves the hand-off to another warp of its
    role), the first arrive of another class of the same role after the same statement in
    the same iteration."""
    later_events = program.threads[ev.thread].events[ev.seq + 1:]
    if slot is not None:
        for later in later_events:
            if later.kind == "arrive" and later.slot == slot:
                return later
    for later in later_events:
        if later.kind == "arrive" or (later.kind == "named" and not later.derived):
            return later
    for t in program.threads:
        if t.index == ev.thread or t.role != ev.role or t.cta != program.threads[
                ev.thread].cta or not t.members:
            continue
        after = False
        for other in t.events:
            if other.path == ev.path and other.iters == ev.iters:
                after = True
            elif after and other.kind == "arrive":
                return other
    return None


def hoisted_releases(program: Program, read: Event, writer: Event | None = None
                     ) -> list[Event]:
    """The arrives of `read`'s thread that precede the synchronous `read` in its own
    iteration, nearest first, when none follows it there: the role handed the stage back
    before reading it (P010's class, a release hoisted above a read, not a missing wait
    of the writer). Empty for an asynchronous (wgmma) read or an ordinary hand-off.

    With `writer` (the access that overwrote the stage), only arrives on the barrier the
    writer waited on count: the release of this stage, not an unrelated hand-off (another
    ring's release, a scheduling barrier) later in the same iteration."""
    if read.group == "wgmma":
        return []
    same = [e for e in program.threads[read.thread].events
            if e.iters == read.iters and e.kind == "arrive"]
    guard = guard_slot(program, writer) if writer is not None else None
    if guard is not None:
        barrier = program.slots[guard][0]
        same = [e for e in same if program.slots[e.slot][0] == barrier]
    if any(e.seq > read.seq for e in same):
        return []
    return [e for e in reversed(same) if e.seq < read.seq]


def block_of(schedule: Schedule, path: str) -> Warps | None:
    """The `with lm.warps(...)` block holding statement `path`, if any."""
    for stmt, _, _ in statements(schedule):
        if isinstance(stmt, Warps) and path.startswith(stmt.path + ".body["):
            return stmt
    return None
