"""Arrive on an mbarrier (`mbarrier.arrive`): decrements its pending arrival count; the
phase completes when pending arrivals and the transaction count both reach zero.

By default one elected lane of each warp of the role arrives (`per="warp"`); writes to
shared memory made by the other lanes must be ordered first (`lm.syncwarp()` or a named
barrier)."""

from cakegov.plugin import Arg, Effects, barrier_action

NAME = "mbarrier_arrive"
VERSION = "1.0.0"
SPELLING = "mbarrier.arrive"
RECEIVER = "bar"
CATEGORY = "sync"
ARGS = (
    Arg("bar", "mbarrier", "the barrier (`full[s]`)"),
    Arg("per", "enum", "who arrives: one elected lane per warp of the role (`warp`), one "
        "thread for the whole role (`role`), or every thread (`thread`)", required=False,
        default="warp", choices=("warp", "role", "thread")),
)


def effects(call, view):
    return Effects(barriers=(barrier_action("arrive", call.args["bar"]),))
