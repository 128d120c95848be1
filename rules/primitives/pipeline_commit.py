"""Pipeline commit: the producer signals that stage `ring.stage(k)` is full after generic (non-
bulk) writes; bulk loads that name `ring.full(k)` as their barrier commit by themselves,
with the transaction bytes armed by the compiler."""

from cakegov.plugin import Arg, Effects, barrier_action

NAME = "pipeline_commit"
VERSION = "1.0.0"
SPELLING = "pipeline.commit"
RECEIVER = "ring"
CATEGORY = "sync"
ARGS = (
    Arg("ring", "pipeline", "the pipeline"),
    Arg("iter", "index", "the pipeline iteration (usually the loop variable)"),
)


def effects(call, view):
    ring = call.args["ring"]
    action = barrier_action("arrive", ring).model_copy(
        update={"index": call.args["iter"].expr, "pipeline_side": "full"}
    )
    return Effects(barriers=(action,))
