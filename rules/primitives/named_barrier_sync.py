"""Wait at a named barrier until its declared number of threads has arrived
(`bar.sync id, threads`). Every participating warp must reach it the same number of times."""

from cakegov.plugin import Arg, Effects, barrier_action

NAME = "named_barrier_sync"
VERSION = "1.0.0"
SPELLING = "named_barrier.sync"
RECEIVER = "bar"
CATEGORY = "sync"
ARGS = (Arg("bar", "named_barrier", "the named barrier"),)


def effects(call, view):
    return Effects(barriers=(barrier_action("sync", call.args["bar"]),))
