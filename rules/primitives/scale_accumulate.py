"""Scaled accumulation of a partial product: `acc[r, c] += src[r, c] * row_scale[r] *
scale[at]`, in f32.

The promotion step of block-scaled fp8 GEMMs (DeepGEMM): the tensor cores multiply one
128-wide K block of fp8 operands into a fresh accumulator `src`, and the CUDA cores add
it to the running accumulator `acc` with the block's scales, one per row of A
(`row_scale`, a shared-memory tile read in row-major order: element r is row r's scale)
and one for the tile of B (`scale[at]`, element `at` of a shared-memory tile in row-major
order). `acc` and `src` are fragments of one layout (an mma accumulator, typically)."""

import numpy as np

from cakegov.plugin import Arg, Effects, Spread, access, elements, operand_shape, spread_by

NAME = "scale_accumulate"
VERSION = "1.0.0"
SPELLING = "lm.scale_accumulate"
CATEGORY = "compute"
ARGS = (
    Arg("acc", "fragment", "running accumulator (rows, cols), f32"),
    Arg("src", "fragment", "partial product (rows, cols), f32, in the layout of acc"),
    Arg("row_scale", "smem", "one scale per row of acc, in row-major order"),
    Arg("scale", "smem", "tile holding the scale of the whole block"),
    Arg("at", "index", "row-major element of `scale` to use"),
)


def effects(call, view):
    acc = call.args["acc"]
    return Effects(
        # the thread holding acc[r, c] reads row scale r and the block scale
        reads=(access(call.args["src"], view),
               access(call.args["row_scale"], view, spread=Spread(kind="all")),
               access(call.args["scale"], view, spread=Spread(kind="all")),
               access(acc, view)),
        writes=(access(acc, view, spread=spread_by(acc)),),
        flops=3 * elements(operand_shape(acc, view)),
    )


# ---- CUDA lowering (docs/lowering.md, "Primitive templates") ---------------------------
TEMPLATE = """\
cg::scale_accumulate(
    {{ args.acc.ref }}, {{ args.src.ref }}, {{ args.row_scale.ref }}, {{ args.scale.ref }},
    {{ args.at.ref }}, cg_team);"""

DEVICE = """\
// scale_accumulate: acc[r, c] += src[r, c] * row_scale[r] * scale[at], in f32. src shares
// acc's layout, so element (r, c) sits in the same slot of both.
template <class A, class S, class R, class B>
__device__ __forceinline__ void scale_accumulate(A&& acc, S&& src, R&& row_scale, B&& scale,
                                                 long long at, Team t) {
  typedef typename bare<A>::type AT;
  typedef typename bare<S>::type ST;
  typedef typename bare<R>::type RT;
  static_assert(AT::is_fragment && ST::is_fragment && ST::kind == AT::kind &&
                ST::SLOTS == AT::SLOTS && ST::rows == AT::rows && ST::cols == AT::cols,
                "src is a fragment in the layout of acc");
  static_assert(RT::rows * RT::cols == AT::rows, "one row scale per row of acc");
  const float block = to_f32(scale.p[at]);
  acc.for_each(t, [&](int r, int c, auto& v) {
    const int s = (int)(&v - &acc.v[0]);
    v = convert<typename AT::elem>(to_f32(v) + to_f32(src.v[s]) * (to_f32(row_scale.p[r]) *
                                                                  block));
  });
}"""


# ---- numpy semantics (docs/simulator.md) -----------------------------------------------
def simulate(op, sim):
    """The template's f32 arithmetic: the two scales multiplied first, then the product
    with the partial sum added to the accumulator."""
    acc = np.asarray(sim.tile("acc"), dtype=np.float32)
    src = np.asarray(sim.tile("src"), dtype=np.float32)
    rows = np.asarray(sim.tile("row_scale"), dtype=np.float32).reshape(-1)[:acc.shape[0]]
    block = np.float32(np.asarray(sim.tile("scale"), dtype=np.float32).reshape(-1)[
        int(sim.value("at"))])
    with np.errstate(all="ignore"):
        out = acc + src * (rows[:, None] * block)
    sim.put("acc", out.astype(np.float32))
