"""The CTAs of one thread-block cluster, simulated together.

A kernel whose CTAs touch each other's shared memory (a multicast copy, an arrive on a
peer's barrier with `cta=`, `lm.sync_cluster()`; cakegov/analysis/cluster.py) cannot be
simulated one CTA at a time. A `ClusterRun` holds one `Machine` per CTA of the cluster,
in rank order, and schedules all their warps and pending asynchronous operations as one
system under one strategy:

- every CTA's clock threads live in one vector-clock space (each machine's from its
  `base`), so happens-before, and with it race detection, spans the cluster: the
  consumer of CTA 1 releasing a stage orders its reads before the multicast that CTA 0
  issues into it afterwards;
- a remote arrive contributes to the barrier of the peer machine; a multicast copy is
  one pending copy per destination, each landing in that machine's shared memory and
  completing on that machine's barrier at the same offset;
- the cluster barrier (`barrier.cluster`) is one named-barrier state machine shared by
  every machine, counting every thread of the cluster;
- a remote write that lands in a CTA whose warps have all ended is a defect (the CTA
  has exited; CUDA programming guide, "Distributed Shared Memory").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cakegov.ir.cluster import cluster_size
from cakegov.lower.kernel import LCopy, LoweredKernel
from cakegov.sim.machine import Machine, Named
from cakegov.sim.scheduler import WarpInfo
from cakegov.sim.state import EventBound


class ClusterRun:
    """Every CTA of one cluster, run together."""

    def __init__(self, kernel: LoweredKernel, sizes: dict[str, int],
                 ctas: list[tuple[int, int, int]], ordinal: int, gmem: Any, placement: Any,
                 primitives: dict[str, Any], strategy: Callable[[list[WarpInfo]], Any],
                 max_events: int, cta_name: Callable[[int], str]):
        self.size = len(ctas)
        assert self.size == cluster_size(kernel.cluster)
        self.named: dict[int, Named] = {}
        self.machines: list[Machine] = []
        for rank, cta in enumerate(ctas):
            self.machines.append(Machine(kernel, sizes, cta, ordinal + rank, gmem, placement,
                                         primitives, strategy, max_events, cta_name,
                                         cluster=self, rank=rank))
        width = self.machines[0].width
        names = [""] * width
        for m in self.machines:
            for i, n in enumerate(m.names):
                if n:
                    names[i] = n
        log: list[list[tuple[int, int, str]]] = [[] for _ in range(width)]
        for m in self.machines:
            m.names, m.log = names, log
        self.warps = [(m, w) for m in self.machines for w in m.warps]
        producers = {r.name for r in kernel.roles if _has_copy(r.body)}
        infos = [WarpInfo(g, w.role.name, w.role.name in producers, w.role.warps)
                 for g, (_, w) in enumerate(self.warps)]
        self.strategy = strategy(infos)
        self.max_events = max_events
        self.events = 0

    def run(self) -> int:
        while True:
            runnable = [g for g, (m, w) in enumerate(self.warps) if m.can_run(w)]
            events = [(m, p) for m in self.machines for p in m.completable()]
            if not runnable and not events:
                break
            self.events += 1
            if self.events > self.max_events:
                raise EventBound(f"more than {self.max_events} events in the cluster of CTA "
                                 f"{self.machines[0].cta}")
            kind, k = self.strategy.pick(runnable, len(events))
            if kind == "warp":
                m, w = self.warps[k]
                m.step(w)
            else:
                m, p = events[k]
                m.finish(p)
        for m in self.machines:
            if any(not w.done for w in m.warps):
                m.deadlock()
        for m in self.machines:
            m.at_exit()
        return self.events


def _has_copy(ops) -> bool:
    for op in ops:
        if isinstance(op, LCopy):
            return True
        body = getattr(op, "body", None)
        if body and _has_copy(body):
            return True
    return False
