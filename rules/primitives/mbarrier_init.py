"""Initialise one mbarrier (`mbarrier.init.shared::cta.b64`) with the arrival count of its
declaration, by one elected thread of the role. Only for barriers declared with
`init="manual"` (the others are initialised by the kernel prologue).

The initialisation must be made visible before any role uses the barrier: the
initialising role issues `lm.fence_barrier_init()` after its inits, then every role meets
at `lm.sync_cta()`, and only then may any role wait on, arrive on or load through the
barrier. A barrier is initialised once: re-initialising one that is in use is undefined."""

from cakegov.plugin import Arg, Effects, barrier_action

NAME = "mbarrier_init"
VERSION = "1.0.0"
SPELLING = "mbarrier.init"
RECEIVER = "bar"
CATEGORY = "sync"
ARGS = (Arg("bar", "mbarrier", "the barrier element to initialise (`full[s]`)"),)


def effects(call, view):
    return Effects(barriers=(barrier_action("init", call.args["bar"]),))
