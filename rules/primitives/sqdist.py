"""Squared Euclidean distances between the rows of two tiles:
`dst[i, j] = sum_d (x[i, d] - c[j, d])^2`, with `x` (R, D), `c` (C, D) and `dst` (R, C)."""

import numpy as np

from cakegov.plugin import Arg, Effects, access, operand_shape, sequential_sum, spread_by

NAME = "sqdist"
VERSION = "1.3.0"
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
        # the thread holding dst[i, j] reads row i of x and row j of c
        reads=(access(call.args["x"], view, spread=spread_by(call.args["dst"], "rows_of")),
               access(call.args["c"], view, spread=spread_by(call.args["dst"], "cols_of"))),
        writes=(access(call.args["dst"], view),),
        flops=3 * r * c * d,
    )


# ---- CUDA lowering (docs/lowering.md, "Primitive templates") ---------------------------
TEMPLATE = """\
cg::sqdist({{ args.dst.ref }}, {{ args.x.ref }}, {{ args.c.ref }}, cg_team);"""

DEVICE = """\
// sqdist: dst[i, j] = sum_d (x[i, d] - c[j, d])^2 in f32, for the elements each thread
// holds. The d loop starts at a row-dependent offset so that the threads of a warp read
// different shared-memory banks.
template <class D, class X, class C>
__device__ __forceinline__ void sqdist(D&& dst, X&& x, C&& c, Team t) {
  typedef typename bare<X>::type XT;
  typedef typename bare<C>::type CT;
  static_assert(!XT::is_fragment && !CT::is_fragment, "sqdist reads shared-memory tiles");
  static_assert(XT::cols == CT::cols, "x and c need the same row length");
  typedef typename bare<D>::type::elem T;
  dst.for_each(t, [&](int i, int j, auto& v) {
    float acc = 0.f;
    for (int dd = 0; dd < XT::cols; ++dd) {
      const int d = (dd + i) % XT::cols;
      const float diff = to_f32(x.get(i, d)) - to_f32(c.get(j, d));
      acc += diff * diff;
    }
    v = convert<T>(acc);
  });
}"""


# ---- numpy semantics (docs/simulator.md) -----------------------------------------------
def simulate(op, sim):
    """`dst[i, j]`: the f32 sum of `(x[i, d] - c[j, d])^2` over d in the template's order,
    which starts row i at d = i (mod D) to spread shared-memory banks."""
    x = np.asarray(sim.tile("x"), dtype=np.float32)
    c = np.asarray(sim.tile("c"), dtype=np.float32)
    rows, depth = x.shape
    with np.errstate(all="ignore"):
        diff = x[:, None, :] - c[None, :, :]
        sq = diff * diff
    order = (np.arange(depth)[None, :] + np.arange(rows)[:, None]) % depth
    sq = np.take_along_axis(sq, order[:, None, :], axis=2)
    sim.put("dst", sequential_sum(sq, axis=2))
