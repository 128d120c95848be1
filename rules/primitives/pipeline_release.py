"""Pipeline release: the consumer frees stage `ring.stage(k)` for the producer (empty barrier
arrive). Release each stage exactly once per phase, after every reader of it has finished."""

from cakegov.plugin import Arg, Effects, barrier_action

NAME = "pipeline_release"
VERSION = "1.0.0"
SPELLING = "pipeline.release"
RECEIVER = "ring"
CATEGORY = "sync"
ARGS = (
    Arg("ring", "pipeline", "the pipeline"),
    Arg("iter", "index", "the pipeline iteration (usually the loop variable)"),
)


def effects(call, view):
    ring = call.args["ring"]
    action = barrier_action("arrive", ring).model_copy(
        update={"index": call.args["iter"].expr, "pipeline_side": "empty"}
    )
    return Effects(barriers=(action,))
