"""Wait until the mbarrier phase with the given parity has completed
(`mbarrier.try_wait.parity` in a retry loop). Parity is `(iteration // stages) % 2` for a
consumer of a ring, and the opposite for a producer waiting on an empty barrier."""

from cakegov.plugin import Arg, Effects, barrier_action

NAME = "mbarrier_wait"
VERSION = "1.0.0"
SPELLING = "mbarrier.wait"
RECEIVER = "bar"
CATEGORY = "sync"
ARGS = (
    Arg("bar", "mbarrier", "the barrier (`full[s]`)"),
    Arg("parity", "index", "phase parity to wait for (0 or 1)"),
)


def effects(call, view):
    return Effects(
        barriers=(barrier_action("wait", call.args["bar"], parity=call.args["parity"].expr),)
    )
