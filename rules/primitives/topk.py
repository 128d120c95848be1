"""Top-k selection along the last axis: `dst` receives the indices of the `k` smallest
(`largest=False`) or largest elements of each row of `src`, in order."""

from cakegov.plugin import Arg, Effects, access, elements, operand_shape

NAME = "topk"
VERSION = "1.0.0"
SPELLING = "lm.topk"
CATEGORY = "compute"
ARGS = (
    Arg("dst", "fragment", "i32 fragment (rows, k) of selected indices"),
    Arg("src", "operand", "tile (rows, n) to select from"),
    Arg("k", "int", "how many elements to select per row"),
    Arg("largest", "bool", "select the largest instead of the smallest", required=False,
        default=False),
)


def effects(call, view):
    n = elements(operand_shape(call.args["src"], view))
    return Effects(
        reads=(access(call.args["src"], view),),
        writes=(access(call.args["dst"], view),),
        flops=n * max(1, n.bit_length()),
    )
