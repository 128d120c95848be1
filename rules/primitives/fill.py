"""Set every element of a tile to `value`."""

from cakegov.plugin import Arg, Effects, access

NAME = "fill"
VERSION = "1.0.0"
SPELLING = "lm.fill"
CATEGORY = "compute"
ARGS = (
    Arg("dst", "operand", "tile to fill"),
    Arg("value", "float", "the value"),
)


def effects(call, view):
    return Effects(writes=(access(call.args["dst"], view),))
