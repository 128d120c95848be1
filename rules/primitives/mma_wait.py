"""Wait for asynchronous tensor-core groups (`wgmma.wait_group pending`): returns once at
most `pending` of this role's most recent `lm.mma_async` groups are still in flight. Every
older group has finished reading its shared-memory operands and writing its accumulator,
so their stages may be released and their accumulators read."""

from cakegov.plugin import Arg, BarrierAction, Effects

NAME = "mma_wait"
VERSION = "1.0.0"
SPELLING = "lm.mma_wait"
CATEGORY = "sync"
ARGS = (
    Arg("pending", "int", "how many of the most recent mma_async groups may stay in flight",
        required=False, default=0),
)


def effects(call, view):
    return Effects(barriers=(BarrierAction(op="wait_group", barrier="wgmma"),))
