"""Set every element of a tile to `value`."""

import numpy as np

from cakegov.plugin import Arg, Effects, access

NAME = "fill"
VERSION = "1.3.0"
SPELLING = "lm.fill"
CATEGORY = "compute"
ARGS = (
    Arg("dst", "operand", "tile to fill (a fragment sub-tile `acc[:, a:b]` too)",
        sliceable=True),
    Arg("value", "float", "the value"),
)


def effects(call, view):
    return Effects(writes=(access(call.args["dst"], view),))


# ---- CUDA lowering (docs/lowering.md, "Primitive templates") ---------------------------
TEMPLATE = """\
cg::fill({{ args.dst.ref }}, {{ args.value.ref }}, cg_team);"""

DEVICE = """\
template <class D>
__device__ __forceinline__ void fill(D&& dst, float value, Team t) {
  typedef typename bare<D>::type::elem T;
  dst.for_each(t, [&](int, int, auto& v) { v = convert<T>(value); });
}"""


# ---- numpy semantics (docs/simulator.md) -----------------------------------------------
def simulate(op, sim):
    """Every element of the tile becomes `value` (converted to its dtype)."""
    sim.put("dst", np.full(sim.shape("dst"), float(sim.value("value")), dtype=np.float32))
