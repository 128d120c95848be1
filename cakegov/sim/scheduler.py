"""Scheduling strategies: who moves next in a simulated CTA.

Warps run deterministic programs; the only freedom is the order in which warps take
their next step and when the asynchronous proxy finishes a pending operation (a bulk copy
landing, a wgmma or bulk-store group finishing). At every step the machine offers the
runnable warps and the pending operations that may finish now, and a strategy picks one.
Every strategy is seeded (its tie-breaks come from `random.Random(seed)`), so a run is a
function of (kernel, inputs, strategy, seed).

- `round-robin`: warps in index order, one step each; pending operations finish at the
  start of each round, oldest first.
- `random`: a uniformly random choice among everything that may move.
- `producer-ahead`: warps of producer roles (those that issue bulk copies) whenever they
  can move; operations finish as soon as possible.
- `consumer-ahead`: the other roles first, then pending operations, producers last.
- `late-completion`: pending operations finish only when no warp can move ("copies
  complete as late as possible").
- `laggard`: one warp (chosen by the seed among the warps of multi-warp roles) moves only
  when nothing else can; the rest is random."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

STRATEGIES = ("round-robin", "random", "producer-ahead", "consumer-ahead",
              "late-completion", "laggard")


@dataclass(frozen=True)
class WarpInfo:
    """What a strategy knows of a warp."""

    index: int
    role: str
    producer: bool
    role_warps: int


class Strategy:
    """Picks the next move: ("warp", index) or ("event", index into `events`)."""

    name = "strategy"

    def __init__(self, seed: int, warps: Sequence[WarpInfo]):
        self.rng = random.Random(f"{self.name}:{seed}")
        self.warps = list(warps)

    def pick(self, runnable: list[int], events: int) -> tuple[str, int]:
        raise NotImplementedError

    def _any(self, runnable: list[int], events: int) -> tuple[str, int]:
        n = len(runnable) + events
        k = self.rng.randrange(n)
        return ("warp", runnable[k]) if k < len(runnable) else ("event", k - len(runnable))


class RoundRobin(Strategy):
    name = "round-robin"

    def __init__(self, seed: int, warps: Sequence[WarpInfo]):
        super().__init__(seed, warps)
        self.last = -1

    def pick(self, runnable, events):
        after = [w for w in runnable if w > self.last]
        if after:
            self.last = after[0]
            return ("warp", after[0])
        if events:  # the round is over: pending operations finish first, oldest first
            return ("event", 0)
        self.last = runnable[0]
        return ("warp", runnable[0])


class Random(Strategy):
    name = "random"

    def pick(self, runnable, events):
        return self._any(runnable, events)


class ProducerAhead(Strategy):
    name = "producer-ahead"

    def pick(self, runnable, events):
        prod = [w for w in runnable if self.warps[w].producer]
        if prod:
            return ("warp", self.rng.choice(prod))
        if events:
            return ("event", self.rng.randrange(events))
        return ("warp", self.rng.choice(runnable))


class ConsumerAhead(Strategy):
    name = "consumer-ahead"

    def pick(self, runnable, events):
        cons = [w for w in runnable if not self.warps[w].producer]
        if cons:
            return ("warp", self.rng.choice(cons))
        if events:
            return ("event", self.rng.randrange(events))
        return ("warp", self.rng.choice(runnable))


class LateCompletion(Strategy):
    name = "late-completion"

    def pick(self, runnable, events):
        if runnable:
            return ("warp", self.rng.choice(runnable))
        return ("event", self.rng.randrange(events))


class Laggard(Strategy):
    name = "laggard"

    def __init__(self, seed: int, warps: Sequence[WarpInfo]):
        super().__init__(seed, warps)
        multi = [w.index for w in self.warps if w.role_warps > 1] or \
            [w.index for w in self.warps]
        self.slow = self.rng.choice(multi) if multi else -1

    def pick(self, runnable, events):
        fast = [w for w in runnable if w != self.slow]
        if fast or events:
            return self._any(fast, events)
        return ("warp", runnable[0])


_BY_NAME = {cls.name: cls for cls in (RoundRobin, Random, ProducerAhead, ConsumerAhead,
                                      LateCompletion, Laggard)}


def make_strategy(name: str, seed: int, warps: Sequence[WarpInfo]) -> Strategy:
    if name not in _BY_NAME:
        raise ValueError(f"unknown strategy {name!r}; known: {', '.join(STRATEGIES)}")
    return _BY_NAME[name](seed, warps)
