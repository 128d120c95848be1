"""Asynchronous matrix multiply-accumulate on tensor cores (wgmma): `acc (+)= a @ b` (or
`a @ b^T`), issued now and completed later.

Lowers to `wgmma.fence`, `wgmma.mma_async` and `wgmma.commit_group`: each call is one
group (cakegov/lower/warpgroup.py says when; otherwise it keeps the synchronous
`mma.sync` lowering, and `cakegov lower` prints why). The tensor cores read the
shared-memory operands through the async proxy while the group is in flight, and the
accumulator is not ready until `lm.mma_wait(pending=N)` has retired the group. So a
stage read by `mma_async` may only be released (empty-barrier arrive, `ring.release`) or
overwritten after an `mma_wait` that retires it, and shared memory written by generic
stores needs `lm.fence_proxy()` before the hand-off to `mma_async`. Consecutive
`mma_async` calls on one accumulator are ordered by the hardware. `a` is a shared-memory
tile (or a register fragment); `b` is a shared-memory tile."""

import numpy as np

from cakegov.plugin import Arg, BarrierAction, Effects, access, mma_accumulate, operand_shape

NAME = "mma_async"
VERSION = "1.3.0"
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
# wgmma path (`wgmma`, one entry when the lowering chose it: both operands swizzled and
# K-major, whole warpgroups): each warpgroup computes its operand base addresses from the
# stage offsets and its position in the warpgroup grid, fences the accumulator registers,
# issues `wgmma.fence`, then one `wgmma.mma_async` per (K step, M block, N block) with the
# descriptor start offsets and the constant descriptor bits the LoweredKernel derived
# (scale-d 0 on the first K step when `init` holds), and commits them as one group.
# Otherwise (`sync`): synchronous mma.sync tiles (the device code of `mma`): the group is
# complete when the call returns, so `lm.mma_wait` has nothing left to wait for.
REQUIRES = ("mma",)

TEMPLATE = """\
{% for w in wgmma %}
{
  const cg::u32 cg_wg = (cg::u32)cg_rwarp / 4u;
  const cg::u32 cg_da = cg_base + (cg::u32)({{ w.a_stage }})
                        + cg_wg / {{ w.groups_n }}u * {{ w.a_stride }}u;
  const cg::u32 cg_db = cg_base + (cg::u32)({{ w.b_stage }})
                        + cg_wg % {{ w.groups_n }}u * {{ w.b_stride }}u;
  [[maybe_unused]] const bool cg_keep = !({{ args.init.ref }});
  cg::fence_operand({{ args.acc.ref }});
  cg::wgmma_fence();
{% for i in w.instructions %}
  cg::{{ i.fn }}(&{{ args.acc.ref }}.v[{{ i.slot }}],
      cg::wgmma_desc(cg_da + {{ i.a }}u, {{ w.a_hi }}ull),
      cg::wgmma_desc(cg_db + {{ i.b }}u, {{ w.b_hi }}ull), {{ i.keep }});
{% endfor %}
  cg::wgmma_commit();
  cg::fence_operand({{ args.acc.ref }});
}
{% endfor %}
{% for s in sync %}
// mma.sync: {{ s.why }}
cg::mma<{{ args.transpose_b.const }}>(
    {{ args.acc.ref }}, {{ args.a.ref }}, {{ args.b.ref }}, {{ args.init.ref }}, cg_team);
{% endfor %}"""


# ---- numpy semantics (docs/simulator.md) -----------------------------------------------
def simulate(op, sim):
    """When the group finishes (the simulator chooses when, before the retiring
    `mma_wait`): f32 accumulation one instruction K step at a time (16, or 32 for fp8),
    from zero with `init`. On the wgmma path the operands are read from shared memory the
    way the hardware reads them: through the lowered kernel's matrix descriptors
    (`sim.wgmma_operands()`, cakegov/lower/wgmma.py `MatrixDescriptor.address`), so a wrong
    descriptor or layout shows up as a wrong result."""
    if getattr(op, "wgmma", None) is not None:
        a, b = sim.wgmma_operands()  # a: M x K, b: N x K, as the descriptors read them
        b = b.T
        k_step = op.wgmma.k
    else:
        a, b = sim.tile("a"), sim.tile("b")
        if sim.value("transpose_b"):
            b = b.T
        k_step = 32 if sim.dtype("a") in ("f8e4m3", "f8e5m2") else 16
    m, n = sim.shape("acc")
    acc = np.zeros((m, n), dtype=np.float32) if sim.value("init") else sim.tile("acc")
    sim.put("acc", mma_accumulate(acc, a, b, k_step))
