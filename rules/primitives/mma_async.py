"""Asynchronous matrix multiply-accumulate on tensor cores (wgmma): `acc (+)= a @ b` (or
`a @ b^T`), issued now and completed later.

Lowers to `wgmma.fence`, `wgmma.mma_async` and `wgmma.commit_group`: each call is one
group. The tensor cores read the shared-memory operands through the async proxy while the
group is in flight, and the accumulator is not ready until `lm.mma_wait(pending=N)` has
retired the group. So a stage read by `mma_async` may only be released (empty-barrier
arrive, `ring.release`) or overwritten after an `mma_wait` that retires it, and shared
memory written by generic stores needs `lm.fence_proxy()` before the hand-off to
`mma_async`. Consecutive `mma_async` calls on one accumulator are ordered by the
hardware. `a` is a shared-memory tile (or a register fragment); `b` is a shared-memory
tile."""

import numpy as np

from cakegov.plugin import Arg, BarrierAction, Effects, access, mma_accumulate, operand_shape

NAME = "mma_async"
VERSION = "1.2.0"
SPELLING = "lm.mma_async"
CATEGORY = "compute"
ARGS = (
    Arg("acc", "fragment", "accumulator fragment (M, N)"),
    Arg("a", "operand", "left operand tile (M, K): shared memory or a register fragment"),
    Arg("b", "smem", "right operand tile in shared memory (K, N), or (N, K) with "
        "transpose_b"),
    Arg("transpose_b", "bool", "`b` is stored (N, K)", required=False, default=False),
    Arg("init", "bool", "zero the accumulator before this product", required=False,
        default=False),
)


def effects(call, view):
    a, b, acc = call.args["a"], call.args["b"], call.args["acc"]
    m, n = ((*operand_shape(acc, view), 0, 0))[:2]
    k = ((*operand_shape(a, view), 0, 0))[1]
    return Effects(
        reads=(access(a, view, proxy="async"), access(b, view, proxy="async"),
               access(acc, view)),
        writes=(access(acc, view),),
        barriers=(BarrierAction(op="commit_group", barrier="wgmma"),),
        flops=2 * m * n * k,
        asynchronous=True,
    )


# ---- CUDA lowering (docs/lowering.md, "Primitive templates") ---------------------------
# Lowered to synchronous mma.sync tiles (the device code of `mma`): the group is complete
# when the call returns, so `lm.mma_wait` has nothing left to wait for. A wgmma lowering
# needs the operands in the swizzled shared-memory layout that tensor-map (TMA) copies
# produce; the row-wise bulk copies of `load` do not swizzle (docs/lowering.md).
REQUIRES = ("mma",)

TEMPLATE = """\
cg::mma<{{ args.transpose_b.const }}>(
    {{ args.acc.ref }}, {{ args.a.ref }}, {{ args.b.ref }}, {{ args.init.ref }}, cg_team);"""


# ---- numpy semantics (docs/simulator.md) -----------------------------------------------
def simulate(op, sim):
    """When the group finishes (the simulator chooses when, before the
    retiring `mma_wait`): f32 accumulation in the k order of the
    mma.sync lowering, 16 at a time, from zero with `init`."""
    a, b = sim.tile("a"), sim.tile("b")
    if sim.value("transpose_b"):
        b = b.T
    m, n = sim.shape("acc")
    acc = np.zeros((m, n), dtype=np.float32) if sim.value("init") else sim.tile("acc")
    sim.put("acc", mma_accumulate(acc, a, b, 16))
