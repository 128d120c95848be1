"""Squared Euclidean distances between the rows of two tiles:
`dst[i, j] = sum_d (x[i, d] - c[j, d])^2`, with `x` (R, D), `c` (C, D) and `dst` (R, C)."""

from cakegov.plugin import Arg, Effects, access, operand_shape

NAME = "sqdist"
VERSION = "1.0.0"
SPELLING = "lm.sqdist"
CATEGORY = "compute"
ARGS = (
    Arg("dst", "fragment", "distance fragment (R, C)"),
    Arg("x", "operand", "row tile (R, D)"),
    Arg("c", "operand", "centroid tile (C, D)"),
)


def effects(call, view):
    r, d = ((*operand_shape(call.args["x"], view), 0, 0))[:2]
    c = ((*operand_shape(call.args["c"], view), 0))[0]
    return Effects(
        reads=(access(call.args["x"], view), access(call.args["c"], view)),
        writes=(access(call.args["dst"], view),),
        flops=3 * r * c * d,
    )
