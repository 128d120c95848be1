"""Pipeline wait: the consumer waits until the data of stage `ring.stage(k)` has landed (full
barrier, consumer parity)."""

from cakegov.plugin import Arg, Effects, barrier_action

NAME = "pipeline_wait"
VERSION = "1.0.0"
SPELLING = "pipeline.wait"
RECEIVER = "ring"
CATEGORY = "sync"
ARGS = (
    Arg("ring", "pipeline", "the pipeline"),
    Arg("iter", "index", "the pipeline iteration (usually the loop variable)"),
)


def effects(call, view):
    ring = call.args["ring"]
    action = barrier_action("wait", ring).model_copy(
        update={"index": call.args["iter"].expr, "pipeline_side": "full"}
    )
    return Effects(barriers=(action,))
