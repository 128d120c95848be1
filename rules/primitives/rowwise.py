"""Row-broadcast operation `dst[r, c] = src[r, c] op vec[r]` over one 2-D tile.

`op` is `sub`, `add`, `mul`, `div` or `max`; `vec` holds one value per row of `src` (the
result of `lm.reduce(..., axis=1)`), so a row softmax is `reduce max`, `rowwise sub`,
`elementwise exp`, `reduce sum`, `rowwise div`. `dst` is a register fragment of the shape
of `src`; `src` is a shared-memory tile or a fragment (then `dst` itself or one of its
layout). When `vec` is a fragment, `dst`, `src` and `vec` are laid out one row per thread
(the `rows` layout) and the broadcast needs no communication; when `vec` is a
shared-memory tile, `dst` keeps its own layout (an mma accumulator can be rescaled per
row, as the online softmax of attention does) and each thread reads the rows it holds."""

import numpy as np

from cakegov.plugin import Arg, Effects, access, elements, operand_shape, spread_by

NAME = "rowwise"
VERSION = "1.0.0"
SPELLING = "lm.rowwise"
CATEGORY = "compute"
ARGS = (
    Arg("dst", "fragment", "destination fragment (rows, cols)"),
    Arg("src", "operand", "source tile (rows, cols): shared memory or a fragment"),
    Arg("vec", "operand", "one value per row (rows,): a fragment or a shared-memory tile"),
    Arg("op", "enum", "the operation", choices=("sub", "add", "mul", "div", "max")),
)


def effects(call, view):
    n = elements(operand_shape(call.args["dst"], view))
    dst = call.args["dst"]
    return Effects(
        # the thread that holds dst[r, c] reads src[r, c] and vec[r]
        reads=(access(call.args["src"], view, spread=spread_by(dst, "owner")),
               access(call.args["vec"], view, spread=spread_by(dst, "rows_of"))),
        writes=(access(dst, view),),
        flops=n,
    )


# ---- CUDA lowering (docs/lowering.md, "Primitive templates") ---------------------------
TEMPLATE = """\
cg::rowwise<cg::rw_{{ args.op.value }}>(
    {{ args.dst.ref }}, {{ args.src.ref }}, {{ args.vec.ref }}, cg_team);"""

DEVICE = """\
struct rw_sub { __device__ static float f(float x, float s) { return x - s; } };
struct rw_add { __device__ static float f(float x, float s) { return x + s; } };
struct rw_mul { __device__ static float f(float x, float s) { return x * s; } };
struct rw_div { __device__ static float f(float x, float s) { return x / s; } };
struct rw_max { __device__ static float f(float x, float s) { return fmaxf(x, s); } };

// rowwise: dst[r, c] = Op(src[r, c], vec[r]) in f32 for every element this thread holds.
// A fragment source shares dst's layout, so element (r, c) sits in the same slot of both.
template <class Op, class D, class S, class V>
__device__ __forceinline__ void rowwise(D&& dst, S&& src, V&& vec, Team t) {
  typedef typename bare<D>::type DT;
  typedef typename bare<S>::type ST;
  typedef typename bare<V>::type VT;
  typedef typename DT::elem T;
  static_assert(DT::is_fragment, "the destination is a register fragment");
  static_assert(ST::rows == DT::rows && ST::cols == DT::cols, "src has the shape of dst");
  if constexpr (ST::is_fragment) {
    static_assert(ST::kind == DT::kind && ST::SLOTS == DT::SLOTS,
                  "a fragment source needs the layout of dst");
  }
  static_assert(VT::rows == DT::rows && VT::cols == 1, "vec holds one value per row");
  if constexpr (VT::is_fragment) {
    static_assert(DT::kind == ROWS && VT::kind == ROWS && VT::threads == DT::threads,
                  "a fragment vec needs rows-layout operands over the same threads");
  }
  dst.for_each(t, [&](int r, int c, auto& v) {
    const int s = (int)(&v - &dst.v[0]);
    float x;
    if constexpr (ST::is_fragment) {
      x = to_f32(src.v[s]);
    } else {
      x = to_f32(src.get(r, c));
    }
    float w;
    if constexpr (VT::is_fragment) {
      w = to_f32(vec.v[s / DT::cols]);
    } else {
      w = to_f32(vec.get(r, 0));
    }
    v = convert<T>(Op::f(x, w));
  });
}"""


# ---- numpy semantics (docs/simulator.md) -----------------------------------------------
_F32 = {
    "sub": np.subtract,
    "add": np.add,
    "mul": np.multiply,
    "div": np.divide,
    "max": np.fmax,
}


def simulate(op, sim):
    """Each element combined with its row's value in f32, as the template does; the
    result is rounded to the destination's dtype when it is written."""
    x = np.asarray(sim.tile("src"), dtype=np.float32)
    x = x.reshape(x.shape[0], -1)
    vec = np.asarray(sim.tile("vec"), dtype=np.float32).reshape(-1, 1)
    with np.errstate(all="ignore"):
        out = _F32[sim.value("op")](x, vec).astype(np.float32)
    sim.put("dst", out)
