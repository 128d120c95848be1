"""The state machines of the synchronisation objects a lowered kernel uses: mbarriers,
named barriers and asynchronous groups. This is the one place their arithmetic lives;
the protocol analysis (cakegov/analysis/execute.py), the CPU simulator and the tests of
hand-worked PTX traces all drive these classes.

mbarrier (PTX ISA, "Parallel Synchronization and Communication Instructions: mbarrier"):
the object holds the current phase, a pending-arrival count and a transaction count
(tx-count). `mbarrier.init` sets pending to the expected arrival count, tx to 0 and the
phase to 0. An arrive decrements pending; `expect-tx(n)` raises tx by n; the completion
of an asynchronous copy (`complete-tx(n)`) lowers it by n, and tx may go below zero while
arrivals are outstanding. The current phase completes when pending and tx are both zero:
the phase advances and pending is reloaded with the expected count. `try_wait.parity(p)`
succeeds when the phase whose parity is `p` has completed, i.e. when the current phase's
parity differs from `p`; a waiter therefore observes the most recently completed phase,
and on a fresh barrier `try_wait.parity(1)` succeeds at once (phase "-1" counts as
complete). A waiter two phases behind sees the same parity as one zero phases behind:
parity aliasing.

Named barrier (PTX ISA, `bar.sync` / `bar.arrive`): each instance completes when the
declared number of threads has arrived; `bar.sync` waits for completion, `bar.arrive`
does not. The next arrivals start a new instance.

Asynchronous groups (`wgmma.commit_group` / `wgmma.wait_group N`,
`cp.async.bulk.commit_group` / `cp.async.bulk.wait_group.read N`): each thread counts the
groups it committed; a wait with N retires every group but the N most recent. The groups
of one thread finish in commit order (PTX ISA, wgmma.wait_group and
cp.async.bulk.wait_group: waiting for "all but the N most recent" groups is only
meaningful in that order); the CPU simulator, which chooses when a group finishes, records
that with `finish()` and lets `wait_group N` return only once `ready(N)`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# PTX ISA, mbarrier: the expected arrival count and the tx-count are limited to
# 2^20 - 1 in magnitude.
ARRIVAL_LIMIT = (1 << 20) - 1
TX_LIMIT = (1 << 20) - 1


class BarrierError(Exception):
    """An operation that has no defined outcome on the hardware (out-of-range counts)."""


class OverArrival(BarrierError):
    """An arrival on a phase whose expected arrivals have all been made (its transaction
    bytes still outstanding): the pending count would go below zero, which the PTX ISA
    does not define (an arrive counts towards the current phase only)."""


@dataclass
class MBarrier:
    """One mbarrier object. `phase` counts completed phases (the current phase's index)."""

    count: int
    phase: int = 0
    pending: int = 0
    tx: int = 0

    def __post_init__(self) -> None:
        if not 1 <= self.count <= ARRIVAL_LIMIT:
            raise BarrierError(f"arrival count {self.count} outside 1..{ARRIVAL_LIMIT}")
        if self.pending == 0 and self.phase == 0 and self.tx == 0:
            self.pending = self.count

    def _settle(self) -> int:
        if self.pending == 0 and self.tx == 0:
            self.phase += 1
            self.pending = self.count
            return 1
        return 0

    def _check_tx(self) -> None:
        if abs(self.tx) > TX_LIMIT:
            raise BarrierError(f"tx-count {self.tx} outside +-{TX_LIMIT}")

    def arrive(self, tx: int = 0) -> int:
        """One arrival, after adding `tx` expected bytes (`arrive.expect_tx`). Returns the
        number of phases it completed (0 or 1)."""
        if self.pending <= 0:
            raise OverArrival(f"arrival on a phase whose {self.count} expected arrival(s) "
                              f"are all in ({self.tx} tx byte(s) outstanding)")
        self.tx += tx
        self._check_tx()
        self.pending -= 1
        return self._settle()

    def complete_tx(self, nbytes: int) -> int:
        """An asynchronous copy delivered `nbytes`. Returns the phases completed (0 or 1)."""
        self.tx -= nbytes
        self._check_tx()
        if self.pending == 0:
            return self._settle()
        return 0

    def expect_tx(self, nbytes: int) -> None:
        """`mbarrier.expect_tx`: raise the tx-count without arriving."""
        self.tx += nbytes
        self._check_tx()

    def passes(self, parity: int) -> bool:
        """`mbarrier.try_wait.parity(parity)`: has the phase of this parity completed?"""
        return self.phase % 2 != parity % 2

    @property
    def observed(self) -> int:
        """The phase a waiter that passes now observes: the latest completed one."""
        return self.phase - 1


@dataclass
class NamedBarrier:
    """One hardware named barrier with its declared thread count."""

    threads: int
    arrived: int = 0
    instance: int = 0  # instances completed so far

    def arrive(self, threads: int) -> tuple[int, int]:
        """`threads` threads arrive. Returns (instances completed, threads left over in
        the next instance): a group larger than the room left splits across instances."""
        if self.threads <= 0:
            raise BarrierError(f"named barrier with {self.threads} threads")
        self.arrived += threads
        done = 0
        while self.arrived >= self.threads:
            self.arrived -= self.threads
            self.instance += 1
            done += 1
        return done, self.arrived


@dataclass
class AsyncGroups:
    """The asynchronous groups of one kind that one thread has committed."""

    committed: int = 0
    retired: int = 0
    finished: int = 0  # groups the asynchronous proxy has completed (simulator)

    def commit(self) -> int:
        """Commit one group; returns its ordinal (1-based)."""
        self.committed += 1
        return self.committed

    def wait(self, pending: int) -> int:
        """`wait_group pending`: returns the number of groups retired in total."""
        self.retired = max(self.retired, self.committed - max(0, pending))
        return self.retired

    @property
    def in_flight(self) -> int:
        return self.committed - self.retired

    def finish(self) -> int:
        """The oldest unfinished group completes; returns its ordinal (1-based)."""
        if self.finished >= self.committed:
            raise BarrierError("no committed group is left to finish")
        self.finished += 1
        return self.finished

    def ready(self, pending: int) -> bool:
        """Would `wait_group pending` return now: have all but the `pending` most recent
        groups finished?"""
        return self.finished >= self.committed - max(0, pending)


# A warpgroup: four contiguous warps whose first warp's rank in the CTA is a multiple of
# four (PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate Instructions").
WARPGROUP_WARPS = 4


def warpgroup_of(warp: int) -> int:
    """The warpgroup of the CTA-relative warp `warp`."""
    return warp // WARPGROUP_WARPS


@dataclass
class WarpgroupIssue:
    """Axiom A13 (docs/checker.md): a wgmma group is one operation of its whole warpgroup.
    `wgmma.mma_async` is `.sync.aligned` over the warpgroup and takes the accumulator
    fragments of all 128 threads, so the group a warp commits cannot complete, and no
    `wgmma.wait_group` of any warp can retire it, before every warp of the warpgroup has
    issued its `mma_async`; once one warp retires it, the operation (its shared-memory
    operand reads on behalf of every warp included) has completed for all of them.

    One object per warpgroup: `members` are whatever issues for the warpgroup's warps
    (warps in the simulator, classes of a split role's warps in the protocol analysis),
    each with the number of groups it has issued."""

    members: dict[int, int] = field(default_factory=dict)

    def issue(self, member: int) -> int:
        """`member` issues its next group; returns the group's ordinal (1-based)."""
        self.members[member] = self.members.get(member, 0) + 1
        return self.members[member]

    def issued(self, member: int) -> int:
        return self.members.get(member, 0)

    def complete(self, ordinal: int) -> bool:
        """Can group `ordinal` of this warpgroup complete: has every member issued it?"""
        return all(n >= ordinal for n in self.members.values())

    def missing(self, ordinal: int) -> list[int]:
        """The members that have not issued group `ordinal` yet."""
        return [m for m, n in self.members.items() if n < ordinal]


# ---- proxies -----------------------------------------------------------------------------
#
# PTX ISA, "Memory Consistency Model: Proxies" and membar/fence (`fence.proxy.async`):
# accesses to one location through different proxies are ordered only through a proxy
# fence. A release/acquire pair (an mbarrier arrive and the wait that observes its phase, a
# named barrier) orders generic-proxy accesses for generic-proxy accesses only. So an
# async-proxy access (a TMA or bulk copy writing a stage, a bulk store or wgmma reading
# one) that a hand-off orders after a generic-proxy access of the same shared-memory bytes
# by thread T is ordered after it only when T executed `fence.proxy.async` after that
# access and the fence itself is ordered before the async-proxy access (T's fence happens
# before the hand-off). Both directions need it: generic writes read by the async proxy
# (axiom A9) and generic reads or writes followed by an async-proxy write of the same bytes
# (axiom A19: the write-after-read the FlashAttention-3 transcriptions hit on an H200).

def proxy_fenced(fences: list[int], access: int, known: int) -> bool:
    """Is thread T's generic access at clock `access` ordered before an async-proxy access
    of the same bytes? `fences` are the clocks of T's `fence.proxy.async`, ascending;
    `known` is the latest clock of T that happens before the async-proxy access (through
    the hand-off). True when some fence lies after the access and within what is known."""
    import bisect

    i = bisect.bisect_right(fences, access)
    return i < len(fences) and fences[i] <= known


def needs_proxy_fence(first_proxy: str, first_write: bool, second_proxy: str,
                      second_write: bool) -> bool:
    """Does a hand-off between two accesses of the same bytes need the first accessor's
    proxy fence? Only when a generic access is followed by an async-proxy access and at
    least one of them writes (two reads never conflict)."""
    return (first_proxy == "generic" and second_proxy == "async"
            and (first_write or second_write))
