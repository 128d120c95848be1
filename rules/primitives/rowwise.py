"""Row-broadcast operation `dst[r, c] = src[r, c] op vec[r]` over one 2-D tile.

`op` is `sub`, `add`, `mul` or `div`; `vec` holds one value per row of `src` (the result
of `lm.reduce(..., axis=1)`), so a row softmax is `reduce max`, `rowwise sub`,
`elementwise exp`, `reduce sum`, `rowwise div`. `dst` is a register fragment of the shape
of `src`; `src` is a shared-memory tile or a fragment. All three operands are laid out one
row per thread (the `rows` layout), so the broadcast needs no communication."""

import numpy as np

from cakegov.plugin import Arg, Effects, access, elements, operand_shape, spread_by

NAME = "rowwise"
VERSION = "1.0.0"
SPELLING = "lm.rowwise"
CATEGORY = "compute"
ARGS = (
    Arg("dst", "fragment", "destination fragment (rows, cols)"),
    Arg("src", "operand", "source tile (rows, cols): shared memory or a fragment"),
    Arg("vec", "fragment", "one value per row (rows,)"),
    Arg("op", "enum", "the operation", choices=("sub", "add", "mul", "div")),
)


def effects(call, view):
    n = elements(operand_shape(call.args["dst"], view))
    return Effects(
        # the thread that owns row r of dst reads row r of src (rows layout)
        reads=(access(call.args["src"], view, spread=spread_by(call.args["dst"], "rows_of")),
               access(call.args["vec"], view)),
        writes=(access(call.args["dst"], view),),
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

template <class S>
__device__ __forceinline__ float rw_value(S& src, int i, int r, int c) {
  if constexpr (bare<S>::type::is_fragment) {
    return to_f32(src.v[i * bare<S>::type::cols + c]);
  } else {
    return to_f32(src.get(r, c));
  }
}

// rowwise: dst[r, c] = Op(src[r, c], vec[r]) in f32 for every row this thread owns.
template <class Op, class D, class S, class V>
__device__ __forceinline__ void rowwise(D&& dst, S&& src, V&& vec, Team t) {
  typedef typename bare<D>::type DT;
  typedef typename bare<S>::type ST;
  typedef typename bare<V>::type VT;
  static_assert(DT::kind == ROWS && VT::kind == ROWS && VT::cols == 1 &&
                VT::rows == DT::rows && VT::threads == DT::threads,
                "dst and vec are rows-layout fragments over the same rows");
  static_assert(ST::rows == DT::rows && ST::cols == DT::cols, "src has the shape of dst");
  static_assert(!ST::is_fragment || (ST::kind == ROWS && ST::threads == DT::threads),
                "a fragment source needs the rows layout of dst");
#pragma unroll
  for (int i = 0; i < DT::RPT; ++i) {
    const int r = i * DT::threads + t.tid;
    if (DT::rows % DT::threads == 0 || r < DT::rows) {
      const float s = to_f32(vec.v[i]);
      for (int c = 0; c < DT::cols; ++c) {
        dst.v[i * DT::cols + c] = convert<typename DT::elem>(Op::f(rw_value(src, i, r, c), s));
      }
    }
  }
}"""


# ---- numpy semantics (docs/simulator.md) -----------------------------------------------
_F32 = {
    "sub": np.subtract,
    "add": np.add,
    "mul": np.multiply,
    "div": np.divide,
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
