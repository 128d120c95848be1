"""Static helpers over unrolled role programs for the asynchronous-access rules: P010
(early release), P012 (barrier init order), P013 (proxy fence), P014 (store drain) and
P018 (uninitialised shared-memory reads).

The exploration (cakegov/analysis/explore.py) finds the anomaly and its witness; these
helpers locate, in the program of the role at fault, the statement to point at and the
fix: the release that handed a stage back while an asynchronous group still read it,
the `pending` count of the group wait that would retire it, the hand-off a proxy fence
must precede, the writes a location has."""

from __future__ import annotations

from collections.abc import Iterable

from cakegov.analysis.explore import Anomaly
from cakegov.analysis.protocol import ProtocolResult, Run
from cakegov.analysis.unroll import Event, Location

WAIT_SPELLING = {"wgmma": "lm.mma_wait", "bulk": "lm.store_wait"}


def run_of(result: ProtocolResult, ev: Event) -> Run | None:
    """The exploration run whose unrolled program contains `ev`."""
    for run in result.runs:
        events = run.unrolled.roles.get(ev.role, ())
        if ev.seq < len(events) and events[ev.seq] == ev:
            return run
    return None


def role_events(result: ProtocolResult, ev: Event, role: str | None = None
                ) -> tuple[Event, ...]:
    """The unrolled program of `role` (default: `ev`'s) in the run `ev` comes from."""
    run = run_of(result, ev)
    return run.unrolled.roles.get(role or ev.role, ()) if run is not None else ()


def anomalies_of(result: ProtocolResult, kind: str) -> Iterable[Anomaly]:
    return (a for a in result.anomalies if a.kind == kind)


def iteration(ev: Event) -> str:
    """` at k=3` for an event inside a loop, `` otherwise."""
    its = ", ".join(f"{k}={v}" for k, v in ev.iters)
    return f" at {its}" if its else ""


def issued_between(events: tuple[Event, ...], group: str, start: int, stop: int) -> int:
    """Groups of `group` a role issues strictly between two of its events."""
    return sum(1 for ev in events[start + 1:stop] if ev.kind == "compute"
               and ev.group == group)


def retiring_wait(events: tuple[Event, ...], op: Event) -> Event | None:
    """The first group wait after the asynchronous `op` that retires it: one that lets
    fewer groups stay in flight than were issued after `op`."""
    for ev in events[op.seq + 1:]:
        if ev.kind == "retire" and ev.group == op.group and \
                issued_between(events, op.group, op.seq, ev.seq) >= ev.pending:
            return ev
    return None


def group_waits_between(events: tuple[Event, ...], group: str, start: int, stop: int
                        ) -> list[Event]:
    return [ev for ev in events[start + 1:stop] if ev.kind == "retire" and ev.group == group]


def hands_off(ev: Event) -> bool:
    """An event through which a role orders its past before another role's future."""
    return ev.kind in ("arrive", "named")  # mbarrier arrive, bar.arrive/bar.sync


def last_wait_before(events: tuple[Event, ...], seq: int) -> Event | None:
    for ev in reversed(events[:seq]):
        if ev.kind == "wait":
            return ev
    return None


def release_between(events: tuple[Event, ...], start: int, stop: int,
                    slot: tuple[str, int] | None = None) -> Event | None:
    """The hand-off (arrive or named barrier) of a role between two of its events,
    preferring an arrive on `slot` (the slot the overwriting role waited on)."""
    candidates = [ev for ev in events[start + 1:stop] if hands_off(ev)]
    for ev in candidates:
        if slot is not None and ev.slot == slot:
            return ev
    return candidates[0] if candidates else None


def wait_fix(events: tuple[Event, ...], op: Event, before: Event) -> str:
    """How to retire the asynchronous `op` before the event `before`: lower the pending
    count of a group wait that is already in between, move the one that retires it too
    late, or insert one."""
    spelling = WAIT_SPELLING.get(op.group, "the group wait")
    pending = issued_between(events, op.group, op.seq, before.seq)
    existing = group_waits_between(events, op.group, op.seq, before.seq)
    if existing:
        last = existing[-1]
        return (f"lower `{spelling}(pending={last.pending})` at line {last.line} to "
                f"`{spelling}(pending={pending})`")
    late = retiring_wait(events, op)
    if late is not None and late.pending <= pending and late.line != before.line and \
            not group_waits_between(events, op.group, before.seq, late.seq) and \
            late.iters == before.iters:
        return f"move `{spelling}(pending={late.pending})` from line {late.line} to before " \
               f"line {before.line}"
    return f"insert `{spelling}(pending={pending})` before line {before.line}"


def writes_to(result: ProtocolResult, ev: Event, loc: Location) -> list[Event]:
    """Every event of every role that writes `loc`, in the run `ev` comes from."""
    run = run_of(result, ev)
    if run is None:
        return []
    return [w for evs in run.unrolled.roles.values() for w in evs
            if any(x == loc for x, _ in w.writes)]


def written_stages(result: ProtocolResult, ev: Event, buffer: str) -> dict[int, Event]:
    """Stage -> first writing event, for the stages of `buffer` anything writes."""
    run = run_of(result, ev)
    out: dict[int, Event] = {}
    if run is None:
        return out
    for evs in run.unrolled.roles.values():
        for w in evs:
            for (space, name, stage), _ in w.writes:
                if space == "smem" and name == buffer and stage not in out:
                    out[stage] = w
    return out
