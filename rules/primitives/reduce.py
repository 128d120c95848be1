"""Reduction of a tile along one axis: `dst = op(src, axis)`.

`op` is `sum`, `max`, `min`, `argmin` or `argmax` (index of the first extreme element;
`dst` is then an i32 fragment). `dst` has the shape of `src` without `axis`."""

import numpy as np

from cakegov.plugin import (
    Arg,
    Effects,
    access,
    elements,
    operand_shape,
    sequential_sum,
    spread_by,
)

NAME = "reduce"
VERSION = "1.3.0"
SPELLING = "lm.reduce"
CATEGORY = "compute"
ARGS = (
    Arg("dst", "fragment", "result fragment"),
    Arg("src", "operand", "tile to reduce"),
    Arg("op", "enum", "the reduction", choices=("sum", "max", "min", "argmin", "argmax")),
    Arg("axis", "int", "axis of `src` to reduce"),
)


def effects(call, view):
    n = elements(operand_shape(call.args["src"], view))
    return Effects(
        # thread r % threads reduces row r of src (the rows layout of dst)
        reads=(access(call.args["src"], view, spread=spread_by(call.args["dst"], "rows_of")),),
        writes=(access(call.args["dst"], view),),
        flops=n,
    )


# ---- CUDA lowering (docs/lowering.md, "Primitive templates") ---------------------------
# Reductions run along the last axis of a 2-D tile, one row per thread: `dst` has the
# `rows` layout (fragments.py), so each row's result lands in the thread that owns the row.
TEMPLATE = """\
cg::reduce<cg::red_{{ args.op.value }}, {{ args.axis.const }}>(
    {{ args.dst.ref }}, {{ args.src.ref }}, cg_team);"""

DEVICE = """\
struct red_sum {
  static constexpr bool arg = false;
  __device__ static void step(float& acc, int&, float x, int) { acc += x; }
};
struct red_max {
  static constexpr bool arg = false;
  __device__ static void step(float& acc, int& i, float x, int c) {
    if (x > acc) { acc = x; i = c; }
  }
};
struct red_min {
  static constexpr bool arg = false;
  __device__ static void step(float& acc, int& i, float x, int c) {
    if (x < acc) { acc = x; i = c; }
  }
};
struct red_argmax {
  static constexpr bool arg = true;
  __device__ static void step(float& acc, int& i, float x, int c) { red_max::step(acc, i, x, c); }
};
struct red_argmin {
  static constexpr bool arg = true;
  __device__ static void step(float& acc, int& i, float x, int c) { red_min::step(acc, i, x, c); }
};

// The value of row `i` (slot block i of a `rows` fragment, or row r of a shared tile).
template <class S>
__device__ __forceinline__ float row_value(S& src, int i, int r, int c) {
  if constexpr (bare<S>::type::is_fragment) {
    return to_f32(src.v[i * bare<S>::type::cols + c]);
  } else {
    return to_f32(src.get(r, c));
  }
}

// reduce: dst[r] = Op over c of src[r, c]; the arg variants give the first extreme index.
template <class Op, int AXIS, class D, class S>
__device__ __forceinline__ void reduce(D&& dst, S&& src, Team t) {
  typedef typename bare<D>::type DT;
  typedef typename bare<S>::type ST;
  static_assert(AXIS == 1, "reductions run along axis 1 of a 2-D tile");
  static_assert(DT::kind == ROWS && DT::rows == ST::rows && DT::cols == 1,
                "the result is a rows-layout fragment with one value per row of src");
  static_assert(!ST::is_fragment || (ST::kind == ROWS && ST::threads == DT::threads),
                "a fragment source needs the rows layout of the result");
#pragma unroll
  for (int i = 0; i < DT::RPT; ++i) {
    const int r = i * DT::threads + t.tid;
    if (DT::rows % DT::threads == 0 || r < DT::rows) {
      float acc = row_value(src, i, r, 0);
      int idx = 0;
      for (int c = 1; c < ST::cols; ++c) Op::step(acc, idx, row_value(src, i, r, c), c);
      if constexpr (Op::arg) {
        dst.v[i] = convert<typename DT::elem>(idx);
      } else {
        dst.v[i] = convert<typename DT::elem>(acc);
      }
    }
  }
}"""


# ---- numpy semantics (docs/simulator.md) -----------------------------------------------
def simulate(op, sim):
    """Row r of `src` reduced in the template's order: the sum adds columns left to
    right in f32, argmin/argmax give the first extreme index (strict comparisons from
    column 0 on, so ties go to the lower index)."""
    x = np.asarray(sim.tile("src"), dtype=np.float32)
    kind = sim.value("op")
    with np.errstate(all="ignore"):
        if kind == "sum":
            out = sequential_sum(x, axis=1)
        elif kind in ("max", "min"):
            out = x.max(axis=1) if kind == "max" else x.min(axis=1)
        else:
            out = np.argmax(x, axis=1) if kind == "argmax" else np.argmin(x, axis=1)
    sim.put("dst", np.asarray(out).reshape(-1, 1))
