"""Arrive at a named barrier without waiting (`bar.arrive id, threads`): a producer signals
consumers that `sync` on the same barrier."""

from cakegov.plugin import Arg, Effects, barrier_action

NAME = "named_barrier_arrive"
VERSION = "1.0.0"
SPELLING = "named_barrier.arrive"
RECEIVER = "bar"
CATEGORY = "sync"
ARGS = (Arg("bar", "named_barrier", "the named barrier"),)


def effects(call, view):
    return Effects(barriers=(barrier_action("bar_arrive", call.args["bar"]),))
