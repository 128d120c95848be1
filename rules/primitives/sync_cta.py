"""Synchronise every thread of the CTA (`bar.sync 0`, `__syncthreads()`): all roles must
reach it, the same number of times, or the kernel hangs. Orders everything before it in
every role before everything after it; it publishes manually initialised mbarriers
(after `lm.fence_barrier_init()`)."""

from cakegov.plugin import BarrierAction, Effects

NAME = "sync_cta"
VERSION = "1.0.0"
SPELLING = "lm.sync_cta"
CATEGORY = "sync"
ARGS = ()


def effects(call, view):
    return Effects(barriers=(BarrierAction(op="sync", barrier="cta"),))
