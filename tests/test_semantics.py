"""The synchronisation state machines (cakegov/analysis/semantics.py) driven through
hand-worked PTX traces: every step's expected state is written out from the PTX ISA's
description of mbarrier, bar.sync and the async-group waits, not computed."""

from __future__ import annotations

import pytest

from cakegov.analysis.semantics import (
    ARRIVAL_LIMIT,
    TX_LIMIT,
    AsyncGroups,
    BarrierError,
    MBarrier,
    NamedBarrier,
    OverArrival,
)


def state(b: MBarrier) -> tuple[int, int, int]:
    return (b.phase, b.pending, b.tx)


def test_init_sets_pending_to_the_count_and_phase_zero():
    b = MBarrier(count=3)
    assert state(b) == (0, 3, 0)
    # phase "-1" counts as complete: parity 1 passes on a fresh barrier, parity 0 waits
    assert b.passes(1) and not b.passes(0)
    assert b.observed == -1


def test_phase_completes_only_when_arrivals_and_tx_bytes_are_both_in():
    b = MBarrier(count=1)
    assert b.arrive(tx=16384) == 0  # arrive.expect_tx: pending 0, tx 16384
    assert state(b) == (0, 0, 16384)
    assert not b.passes(0)
    assert b.complete_tx(8192) == 0  # the first copy lands
    assert state(b) == (0, 0, 8192)
    assert b.complete_tx(8192) == 1  # the second one completes the phase
    assert state(b) == (1, 1, 0)  # pending reloaded with the count
    assert b.passes(0) and not b.passes(1)
    assert b.observed == 0


def test_expect_tx_after_the_copy_already_completed():
    b = MBarrier(count=1)
    assert b.complete_tx(4096) == 0  # the copy lands first: tx goes below zero
    assert state(b) == (0, 1, -4096)  # pending 1: no completion
    assert b.arrive(tx=4096) == 1  # the arm brings tx back to 0 and the last arrival
    assert state(b) == (1, 1, 0)


def test_arrivals_of_several_threads_complete_one_phase():
    b = MBarrier(count=4)
    assert [b.arrive() for _ in range(4)] == [0, 0, 0, 1]
    assert state(b) == (1, 4, 0)
    assert [b.arrive() for _ in range(4)] == [0, 0, 0, 1]
    assert b.phase == 2 and b.passes(1) and not b.passes(0)


def test_an_arrival_beyond_the_expected_count_is_undefined():
    b = MBarrier(count=1)
    b.arrive(tx=64)  # all arrivals in, tx outstanding: the phase is still open
    with pytest.raises(OverArrival):
        b.arrive(tx=64)  # a second producer arming the same phase
    assert state(b) == (0, 0, 64)  # nothing changed


def test_parity_aliasing_a_waiter_two_phases_behind_cannot_tell_them_apart():
    b = MBarrier(count=1)
    b.arrive()  # phase 0 completes
    b.arrive()  # phase 1 completes
    # a waiter that wants phase 0 (parity 0) and arrives only now sees parity 0 again: it
    # blocks (it would wait for phase 2), exactly as if phase 0 had not completed
    assert b.phase == 2 and not b.passes(0)
    b.arrive()  # phase 2 completes: the late waiter passes, believing it saw phase 0
    assert b.passes(0) and b.observed == 2


def test_tx_count_range():
    b = MBarrier(count=1)
    with pytest.raises(BarrierError):
        b.expect_tx(TX_LIMIT + 1)
    with pytest.raises(BarrierError):
        MBarrier(count=ARRIVAL_LIMIT + 1)
    with pytest.raises(BarrierError):
        MBarrier(count=0)


def test_named_barrier_counts_threads_and_splits_a_group_larger_than_the_room_left():
    bar = NamedBarrier(threads=256)
    assert bar.arrive(128) == (0, 128)  # one warpgroup in, waiting
    assert bar.arrive(128) == (1, 0)  # the second completes the instance
    assert bar.instance == 1
    small = NamedBarrier(threads=64)
    assert small.arrive(128) == (2, 0)  # a 4-warp role fills two 64-thread instances
    odd = NamedBarrier(threads=96)
    assert odd.arrive(128) == (1, 32)  # one warp is left in the next instance


def test_async_groups_retire_all_but_the_pending_most_recent():
    g = AsyncGroups()
    assert [g.commit() for _ in range(3)] == [1, 2, 3]
    assert g.wait(1) == 2 and g.in_flight == 1  # wgmma.wait_group 1
    assert g.wait(2) == 2  # a looser wait retires nothing more
    assert g.wait(0) == 3 and g.in_flight == 0


def test_a_waiter_one_phase_behind_passes_on_the_previous_phase():
    b = MBarrier(count=2)
    b.arrive()
    assert b.passes(1)  # the fresh barrier: phase "-1" (parity 1) counts as complete
    b.arrive()  # phase 0 completes: parity 0 passes now, parity 1 waits for phase 1
    assert state(b) == (1, 2, 0)
    assert b.passes(0) and not b.passes(1)
    b.arrive()
    b.arrive()  # phase 1 completes: the current phase is 2 (parity 0) again
    assert b.passes(1) and not b.passes(0) and b.observed == 1


def test_tx_bytes_of_two_copies_and_the_arm_complete_one_phase_in_any_order():
    b = MBarrier(count=1)
    assert b.complete_tx(8192) == 0  # copy 1 lands before the arm: tx -8192
    assert b.arrive(tx=16384) == 0  # the arm: pending 0, tx 8192
    assert state(b) == (0, 0, 8192)
    assert b.complete_tx(8192) == 1  # copy 2 lands: pending 0 and tx 0
    assert state(b) == (1, 1, 0)


def test_over_arrival_after_the_phase_completed_counts_towards_the_next_phase():
    b = MBarrier(count=1)
    assert b.arrive() == 1  # phase 0 completes with the first arrival
    assert b.arrive() == 1  # a second producer's arrival completes phase 1 at once
    assert b.phase == 2 and b.passes(1)  # a parity-0 waiter of phase 0 now blocks


def test_async_groups_finish_in_commit_order_and_wait_group_follows_finish():
    g = AsyncGroups()
    g.commit()
    g.commit()
    assert not g.ready(0) and not g.ready(1) and g.ready(2)
    assert g.finish() == 1  # the oldest group finishes first
    assert g.ready(1) and not g.ready(0)
    assert g.finish() == 2 and g.ready(0)
    with pytest.raises(BarrierError):
        g.finish()  # nothing left in flight
