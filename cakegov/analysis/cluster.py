"""Thread-block clusters in the protocol analysis: every CTA of a cluster in one program.

A kernel whose CTAs touch each other's shared memory (a multicast copy, an arrive on a
peer's barrier with `cta=`, or `lm.sync_cluster()`) cannot be analysed one CTA at a time:
a consumer in CTA 1 frees the stage that the producer of CTA 0 refills in both CTAs. Such
a kernel is analysed one *cluster* at a time. Each CTA of the cluster is unrolled on its
own (cakegov/analysis/program.py, with its own block index, so peers whose loops
disagree in length get their own trip counts), and the programs are joined into one:

- model threads are numbered CTA by CTA (rank-major), each event stamped with its CTA;
- mbarrier slots and shared-memory regions are replicated per CTA (slot `s` of CTA `r`
  is `r * slots + s`): a local wait, arrive or init uses its own CTA's copy, a remote
  arrive (`Event.peer`) the peer's;
- a multicast copy becomes one copy per destination CTA, issued together (the one
  instruction delivers to each destination independently, PTX ISA "cp.async.bulk": the
  bytes complete on the barrier at the same offset in each destination), each writing
  the destination's region and completing on the destination's slot;
- named barriers (and `lm.sync_cta()`) stay per CTA, the cluster barrier spans them all.

The joined program is executed once like any other (cakegov/analysis/execute.py), so the
exploration covers remote arrivals and multicast completion on every destination CTA; an
anomaly names the CTA (`Event.where`, `Program.slot_name`). At the end, a CTA must not
exit while another CTA's arrival on its barriers or a copy into its shared memory may
still be under way (exit-remote, CUDA programming guide "Distributed Shared Memory").

Symmetry: clusters whose joined programs behave identically (the same signature) are
executed once, so a grid of equivalent clusters costs one execution; the grid positions
analysed are the clusters of the CTAs cakegov/analysis/protocol.py picks (first,
second-to-last and last along each axis where the protocol depends on the block)."""

from __future__ import annotations

import copy
from collections.abc import Mapping

from cakegov.analysis.program import Builder, Event, Mem, Program, Thread, UnrollError
from cakegov.lower.kernel import CLUSTER_BARRIER, LArrive, LCopy, LNamedSync, LoweredKernel


def _ops(ops):
    for op in ops:
        yield op
        body = getattr(op, "body", None)
        if body:
            yield from _ops(body)


def cross_cta(kernel: LoweredKernel) -> bool:
    """Does any CTA touch another CTA of its cluster (so clusters are analysed whole)?"""
    return any((isinstance(op, LNamedSync) and op.id == CLUSTER_BARRIER) or
               (isinstance(op, LArrive) and op.cta is not None) or
               (isinstance(op, LCopy) and op.multicast is not None)
               for role in kernel.roles for op in _ops(role.body))


def members(kernel: LoweredKernel, cta: tuple[int, int, int]) -> list[tuple[int, int, int]]:
    """The CTAs of the cluster holding `cta`, in rank order (x fastest)."""
    dims = (*kernel.cluster, 1, 1, 1)[:3]
    origin = tuple(c - c % d for c, d in zip(cta, dims, strict=True))
    return [(origin[0] + x, origin[1] + y, origin[2] + z)
            for z in range(dims[2]) for y in range(dims[1]) for x in range(dims[0])]


def estimate(builder: Builder, sizes: Mapping[str, int], cta: tuple[int, int, int],
             limit: int) -> int:
    total = 0
    for member in members(builder.kernel, cta):
        total += builder.estimate(sizes, member, {}, limit)
        if total > limit:
            return limit + 1
    return total


def build(builder: Builder, sizes: Mapping[str, int], cta: tuple[int, int, int],
          limit: int, seen: set | None = None) -> Program | None:
    """The joined program of the cluster holding `cta` (no splicing: the periods of
    different CTAs need not agree). With `seen`: None when a cluster whose CTAs behave
    the same, rank by rank, was joined before (symmetry: it would execute identically)."""
    ctas = members(builder.kernel, cta)
    n = len(ctas)
    per_slots = len(builder.slots)
    per_regions = len(builder.regions)
    parts = []
    for member in ctas:
        parts.append(builder.build(sizes, member, {}, limit))
        if sum(p.events for p in parts) > limit:
            raise UnrollError(f"more than {limit} events after unrolling the cluster's "
                              f"{n} CTAs")
    if seen is not None:
        key = ("cluster", tuple(hash(p.signature()) for p in parts))
        if key in seen:
            return None
        seen.add(key)
    threads: list[Thread] = []
    trips: dict[str, int] = {}
    for rank, part in enumerate(parts):
        for k, v in part.trip_counts.items():
            trips[k] = max(trips.get(k, 0), v)
        for t in part.threads:
            index = len(threads)
            thread = Thread(index=index, role=t.role, warps=t.warps, cta=rank,
                            members=t.members, role_warps=t.role_warps, rep=t.rep,
                            blocks=t.blocks, private=t.private)
            for ev in t.events:
                for out in _place(ev, rank, n, per_slots, per_regions):
                    out.thread = index
                    out.seq = len(thread.events)
                    thread.events.append(out)
            threads.append(thread)
    regions = [f"{r} of CTA {rank}" for rank in range(n) for r in builder.regions]
    return Program(kernel=builder.kernel, sizes=dict(sizes), cta=ctas[0], threads=threads,
                   slots=builder.slots * n, slot_count=builder.slot_count * n,
                   slot_manual=builder.slot_manual * n, regions=regions,
                   trip_counts=trips, cluster=n)


def _shift(mem: tuple[Mem, ...], rank: int, per_regions: int,
           fresh: bool = False) -> tuple[Mem, ...]:
    """`mem` moved to the regions of CTA `rank`; `fresh`: the accesses belong to this
    event alone and are moved in place."""
    if not rank or not mem:
        return mem
    out = []
    for m in mem:
        m2 = m if fresh else copy.copy(m)
        m2.region = m.region + rank * per_regions
        out.append(m2)
    return tuple(out)


def _place(ev: Event, rank: int, n: int, per_slots: int, per_regions: int) -> list[Event]:
    """`ev` of CTA `rank` in the joined program: its slots and regions those of the CTA
    it acts on; a multicast copy split per destination. The member programs are built
    for this join alone, so an event is placed in place (this is the hot path of a long
    persistent cluster); only the further destinations of a multicast are copies."""
    if ev.kind == "copy":
        dests = ev.dests or (rank,)
        out = []
        for i, d in enumerate(dests):
            if d >= n:
                raise UnrollError(f"{ev.path}: multicast to CTA rank {d} outside the "
                                  f"cluster of {n}")
            last = i == len(dests) - 1
            out.append(_set(ev if last else copy.copy(ev), cta=rank,
                            peer=d if d != rank else -1, slot=ev.slot + d * per_slots,
                            mem=_shift(ev.mem, d, per_regions, fresh=False)))
        return out
    if ev.kind == "arrive" and ev.peer >= 0:
        if ev.peer >= n:
            raise UnrollError(f"{ev.path}: arrive on CTA rank {ev.peer} outside the cluster "
                              f"of {n}")
        target = ev.peer
        ev.cta, ev.peer = rank, target if target != rank else -1
        ev.slot += target * per_slots
        return [ev]
    ev.cta = rank
    if ev.slot >= 0:
        ev.slot += rank * per_slots
    ev.mem = _shift(ev.mem, rank, per_regions, fresh=True)
    return [ev]


def _set(ev: Event, **changes) -> Event:
    for k, v in changes.items():
        setattr(ev, k, v)
    return ev
