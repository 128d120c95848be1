"""Wait for bulk stores (`cp.async.bulk.wait_group.read pending`): returns once at most
`pending` of this role's most recent `store_async` groups are still reading shared
memory. The stages of every older group may then be written again or released, and with
`pending=0` before the end of the role body no bulk store outlives the kernel's shared
memory."""

from cakegov.plugin import Arg, BarrierAction, Effects

NAME = "store_wait"
VERSION = "1.0.0"
SPELLING = "lm.store_wait"
CATEGORY = "sync"
ARGS = (
    Arg("pending", "int", "how many of the most recent store_async groups may still be "
        "reading shared memory", required=False, default=0),
)


def effects(call, view):
    return Effects(barriers=(BarrierAction(op="wait_group", barrier="bulk"),))
