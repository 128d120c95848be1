"""Register budgets: what every thread holds at kernel entry.

The kernel is emitted with `__launch_bounds__(threads, 1)`, so ptxas may give each thread
an even share of the register file; roles then move their warpgroups up or down with
`setmaxnreg`. One derivation, used by the lowering and by the register-pool rule."""

from __future__ import annotations

REGISTERS_PER_SM = 65536
REGISTERS_PER_THREAD = 255
ALLOCATION_GRANULARITY = 8  # registers are allocated per thread in multiples of 8


def launch_registers(threads: int, registers_per_sm: int = REGISTERS_PER_SM,
                     registers_per_thread: int = REGISTERS_PER_THREAD) -> int:
    """Per-thread registers at kernel entry for `__launch_bounds__(threads, 1)`: the pool
    split evenly, rounded down to the allocation granularity of 8, capped per thread."""
    if threads <= 0:
        return registers_per_thread
    return min(registers_per_thread,
               (registers_per_sm // threads) // ALLOCATION_GRANULARITY * ALLOCATION_GRANULARITY)
