"""Wait-for cycles among the roles blocked in a deadlock (rule P016).

Role A waits for role B when A is blocked on a barrier whose awaited phase needs an
arrival (or a bulk copy) that B issues only later in its program than the point where B
is blocked. Which phase each arrival belongs to and which phase each wait must observe
come from cakegov/analysis/accounting.py (one derivation for all protocol rules), passed
in as a `PhaseMap`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from cakegov.analysis.flow import NAMED, Flow, Key, wait_key
from cakegov.analysis.unroll import Event


@dataclass(frozen=True)
class WaitEdge:
    waiter: str
    key: Key
    wait: Event
    helper: str
    provider: Event  # the helper's future event that the waiter needs


@dataclass(frozen=True)
class PhaseMap:
    """Which phase of its slot each arrive and copy belongs to, and which phase each wait
    must observe, keyed by (role, event index): cakegov/analysis/accounting.py derives
    both (one derivation for all protocol rules); None where it could not."""

    of: Mapping[tuple[str, int], int]
    target: Mapping[tuple[str, int], int]


def _wait_edges(flow: Flow, stuck: Mapping[str, Event], phases: PhaseMap
                ) -> dict[str, list[WaitEdge]]:
    edges: dict[str, list[WaitEdge]] = {}
    for role, ev in stuck.items():
        key = wait_key(ev)
        if key is None:
            continue
        target = phases.target.get((role, ev.seq))
        for helper, hev in stuck.items():
            events = flow.roles[helper]
            for j in range(hev.seq, len(events)):
                fut = events[j]
                if key[0] == NAMED:
                    same = fut.kind == "named" and fut.named and fut.named[0] == key[1]
                    if helper == role or not same or (j == hev.seq and wait_key(hev) == key):
                        continue
                elif fut.kind not in ("arrive", "copy") or fut.slot != key:
                    continue
                else:
                    phase = phases.of.get((helper, j))
                    if phase is None and fut.kind == "copy":
                        continue  # a copy of no known phase cannot complete one
                    if phase is not None and target is not None and phase != target:
                        continue
                edges.setdefault(role, []).append(WaitEdge(role, key, ev, helper, fut))
                break
    return edges


def _cycle_from(start: str, edges: Mapping[str, list[WaitEdge]]) -> list[WaitEdge] | None:
    stack: list[tuple[str, list[WaitEdge]]] = [(start, [])]
    seen = {start}
    while stack:
        role, path = stack.pop()
        for edge in edges.get(role, ()):
            if edge.helper == start:
                return [*path, edge]
            if edge.helper not in seen:
                seen.add(edge.helper)
                stack.append((edge.helper, [*path, edge]))
    return None


def wait_for_cycle(flow: Flow, blocked: Iterable[Event], phases: PhaseMap
                   ) -> list[WaitEdge] | None:
    """A cycle among the roles blocked in a deadlock: role A waits on a key whose phase
    needs an arrival (or copy) that role B only issues after the point where B itself is
    blocked, and so on back to A (B may be A). None when the blocked roles form no cycle
    (someone waits for an arrival nobody will make: a count or release defect)."""
    stuck = {ev.role: ev for ev in blocked}
    edges = _wait_edges(flow, stuck, phases)
    for role in (r.name for r in flow.kernel.roles if r.name in stuck):
        cycle = _cycle_from(role, edges)
        if cycle is not None:
            return cycle
    return None
