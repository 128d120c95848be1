"""Pipeline acquire: the producer waits until stage `ring.stage(k)` is free again (empty
barrier, producer parity). The compiler derives the stage and phase from the iteration."""

from cakegov.plugin import Arg, Effects, barrier_action

NAME = "pipeline_acquire"
VERSION = "1.0.0"
SPELLING = "pipeline.acquire"
RECEIVER = "ring"
CATEGORY = "sync"
ARGS = (
    Arg("ring", "pipeline", "the pipeline"),
    Arg("iter", "index", "the pipeline iteration (usually the loop variable)"),
)


def effects(call, view):
    ring = call.args["ring"]
    action = barrier_action("wait", ring).model_copy(
        update={"index": call.args["iter"].expr, "pipeline_side": "empty"}
    )
    return Effects(barriers=(action,))
