"""Reduction of a tile along one axis: `dst = op(src, axis)`.

`op` is `sum`, `max`, `min`, `argmin` or `argmax` (index of the first extreme element;
`dst` is then an i32 fragment). `dst` has the shape of `src` without `axis`."""

from cakegov.plugin import Arg, Effects, access, elements, operand_shape

NAME = "reduce"
VERSION = "1.0.0"
SPELLING = "lm.reduce"
CATEGORY = "compute"
ARGS = (
    Arg("dst", "fragment", "result fragment"),
    Arg("src", "operand", "tile to reduce"),
    Arg("op", "enum", "the reduction", choices=("sum", "max", "min", "argmin", "argmax")),
    Arg("axis", "int", "axis of `src` to reduce"),
)


def effects(call, view):
    n = elements(operand_shape(call.args["src"], view))
    return Effects(
        reads=(access(call.args["src"], view),),
        writes=(access(call.args["dst"], view),),
        flops=n,
    )
