"""Matrix multiply-accumulate on tensor cores: `acc (+)= a @ b` (or `a @ b^T`).

`acc` is an f32 (or f16) register fragment of shape (M, N); `a` is (M, K); `b` is (K, N),
or (N, K) with `transpose_b=True`. The tile is executed as `mma.sync` instructions of the
target's shape (m16n8k16 for f16/bf16), so M, N and K must be multiples of it. `init`
(True, False or a condition such as `k == 0`) zeroes the accumulator first."""

from cakegov.plugin import Arg, Effects, access, operand_shape

NAME = "mma"
VERSION = "1.0.0"
SPELLING = "lm.mma"
CATEGORY = "compute"
ARGS = (
    Arg("acc", "fragment", "accumulator fragment (M, N)"),
    Arg("a", "operand", "left operand tile (M, K)"),
    Arg("b", "operand", "right operand tile (K, N), or (N, K) with transpose_b"),
    Arg("transpose_b", "bool", "`b` is stored (N, K)", required=False, default=False),
    Arg("init", "bool", "zero the accumulator before this product", required=False,
        default=False),
)


def effects(call, view):
    a, b, acc = call.args["a"], call.args["b"], call.args["acc"]
    m, n = ((*operand_shape(acc, view), 0, 0))[:2]
    k = ((*operand_shape(a, view), 0, 0))[1]
    return Effects(
        reads=(access(a, view), access(b, view), access(acc, view)),
        writes=(access(acc, view),),
        flops=2 * m * n * k,
    )
