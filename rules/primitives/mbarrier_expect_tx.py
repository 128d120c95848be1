"""Arrive on an mbarrier and add `bytes` to its transaction count
(`mbarrier.arrive.expect_tx`): the phase cannot complete until asynchronous copies have
delivered that many bytes. Issue it once per phase, before or with the copies."""

from cakegov.plugin import Arg, Effects, barrier_action

NAME = "mbarrier_expect_tx"
VERSION = "1.0.0"
SPELLING = "mbarrier.arrive_expect_tx"
RECEIVER = "bar"
CATEGORY = "sync"
ARGS = (
    Arg("bar", "mbarrier", "the barrier (`full[s]`)"),
    Arg("bytes", "index", "transaction bytes the phase waits for (`lm.nbytes(a_s, b_s)`)"),
    Arg("per", "enum", "who arms: one thread for the whole role (`role`, the default) or one "
        "elected lane per warp (`warp`: arms once per warp)", required=False,
        default="role", choices=("role", "warp")),
)


def effects(call, view):
    nbytes = view.static_value(call.args["bytes"])
    return Effects(
        barriers=(
            barrier_action("expect_tx", call.args["bar"], bytes=nbytes or 0),
            barrier_action("arrive", call.args["bar"]),
        )
    )
