"""Elementwise operation `dst = op(src)` over one tile.

`op` is one of `copy`, `scale` (`alpha * src`), `add` (`src + alpha`), `relu`, `exp` and
`cast` (convert to the dtype of `dst`). `dst` and `src` have the same shape. Either may
be a sub-tile of a fragment (`acc[:, j * 32:(j + 1) * 32]`) when the other is a
shared-memory tile: the epilogue of a sub-tiled store copies one window of the
accumulator into a small staging buffer."""

import numpy as np

from cakegov.plugin import Arg, Effects, access, elements, operand_shape, spread_by

NAME = "elementwise"
VERSION = "1.4.0"
SPELLING = "lm.elementwise"
CATEGORY = "compute"
ARGS = (
    Arg("dst", "operand", "destination tile (a fragment sub-tile `acc[:, a:b]` too)",
        sliceable=True),
    Arg("src", "operand", "source tile (a fragment sub-tile `acc[:, a:b]` too)",
        sliceable=True),
    Arg("op", "enum", "the operation", choices=("copy", "scale", "add", "relu", "exp",
                                                "cast")),
    Arg("alpha", "float", "scalar for `scale` and `add`", required=False, default=1.0),
)


def effects(call, view):
    n = elements(operand_shape(call.args["dst"], view))
    return Effects(
        # a fragment meets a shared tile element by element, in the fragment's layout;
        # two shared tiles meet through the destination's `for_each`
        reads=(access(call.args["src"], view, spread=spread_by(call.args["dst"])),),
        writes=(access(call.args["dst"], view, spread=spread_by(call.args["src"])),),
        flops=n,
    )


# ---- CUDA lowering (docs/lowering.md, "Primitive templates") ---------------------------
TEMPLATE = """\
cg::elementwise<cg::ew_{{ args.op.value }}>(
    {{ args.dst.ref }}, {{ args.src.ref }}, {{ args.alpha.ref }}, cg_team);"""

DEVICE = """\
// `exact` ops convert the element directly (an i32 copy stays exact); the others
// compute in f32.
struct ew_copy {
  static constexpr bool exact = true;
  __device__ static float f(float x, float) { return x; }
};
struct ew_scale {
  static constexpr bool exact = false;
  __device__ static float f(float x, float a) { return a * x; }
};
struct ew_add {
  static constexpr bool exact = false;
  __device__ static float f(float x, float a) { return x + a; }
};
struct ew_relu {
  static constexpr bool exact = false;
  __device__ static float f(float x, float) { return x > 0.f ? x : 0.f; }
};
struct ew_exp {
  static constexpr bool exact = false;
  __device__ static float f(float x, float) { return expf(x); }
};
struct ew_cast {
  static constexpr bool exact = true;
  __device__ static float f(float x, float) { return x; }
};
template <class Op, class T, class S>
__device__ __forceinline__ T ew_apply(S x, float alpha) {
  if constexpr (Op::exact) {
    return convert<T>(x);
  } else {
    return convert<T>(Op::f(to_f32(x), alpha));
  }
}

// elementwise: dst = Op(src), through f32. Two fragments must share a layout (slot by
// slot); a fragment and a shared tile meet element by element.
template <class Op, class D, class S>
__device__ __forceinline__ void elementwise(D&& dst, S&& src, float alpha, Team t) {
  typedef typename bare<D>::type DT;
  typedef typename bare<S>::type ST;
  typedef typename DT::elem T;
  if constexpr (DT::is_fragment && ST::is_fragment) {
    static_assert(DT::kind == ST::kind && DT::rows == ST::rows && DT::cols == ST::cols &&
                  DT::SLOTS == ST::SLOTS, "fragment operands must share a layout");
#pragma unroll
    for (int s = 0; s < DT::SLOTS; ++s) dst.v[s] = ew_apply<Op, T>(src.v[s], alpha);
  } else if constexpr (ST::is_fragment) {
    src.for_each(t, [&](int r, int c, const auto& v) {
      dst.at(r, c) = ew_apply<Op, T>(v, alpha);
    });
  } else {
    dst.for_each(t, [&](int r, int c, auto& v) {
      v = ew_apply<Op, T>(src.get(r, c), alpha);
    });
  }
}"""


# ---- numpy semantics (docs/simulator.md) -----------------------------------------------
_F32 = {
    "scale": lambda x, a: np.float32(a) * x,
    "add": lambda x, a: x + np.float32(a),
    "relu": lambda x, a: np.maximum(x, np.float32(0)),
    "exp": lambda x, a: np.exp(x),
}


def simulate(op, sim):
    """`copy` and `cast` convert the element directly; the others compute in f32; the
    result is rounded to the destination's dtype when it is written."""
    src = sim.tile("src")
    kind = sim.value("op")
    alpha = sim.value("alpha")
    alpha = 1.0 if alpha is None else float(alpha)
    if kind in ("copy", "cast"):
        out = src
    else:
        with np.errstate(all="ignore"):
            out = _F32[kind](np.asarray(src, dtype=np.float32), alpha)
    sim.put("dst", out)
