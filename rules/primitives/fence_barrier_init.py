"""Make this role's earlier `mbarrier.init`s visible to other threads and to the async
proxy (`fence.mbarrier_init.release.cluster`). Issue it after the inits and before the
`lm.sync_cta()` that publishes them."""

from cakegov.plugin import BarrierAction, Effects

NAME = "fence_barrier_init"
VERSION = "1.0.0"
SPELLING = "lm.fence_barrier_init"
CATEGORY = "sync"
ARGS = ()


def effects(call, view):
    return Effects(barriers=(BarrierAction(op="fence", barrier="mbarrier_init"),))
