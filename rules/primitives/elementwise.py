"""Elementwise operation `dst = op(src)` over one tile.

`op` is one of `copy`, `scale` (`alpha * src`), `add` (`src + alpha`), `relu`, `exp` and
`cast` (convert to the dtype of `dst`). `dst` and `src` have the same shape."""

from cakegov.plugin import Arg, Effects, access, elements, operand_shape

NAME = "elementwise"
VERSION = "1.0.0"
SPELLING = "lm.elementwise"
CATEGORY = "compute"
ARGS = (
    Arg("dst", "operand", "destination tile"),
    Arg("src", "operand", "source tile"),
    Arg("op", "enum", "the operation", choices=("copy", "scale", "add", "relu", "exp",
                                                "cast")),
    Arg("alpha", "float", "scalar for `scale` and `add`", required=False, default=1.0),
)


def effects(call, view):
    n = elements(operand_shape(call.args["dst"], view))
    return Effects(
        reads=(access(call.args["src"], view),),
        writes=(access(call.args["dst"], view),),
        flops=n,
    )
