"""Top-k selection along the last axis: `dst` receives the indices of the `k` smallest
(`largest=False`) or largest elements of each row of `src`, in order."""

import numpy as np

from cakegov.plugin import Arg, Effects, access, elements, operand_shape, spread_by

NAME = "topk"
VERSION = "1.3.1"
SPELLING = "lm.topk"
CATEGORY = "compute"
ARGS = (
    Arg("dst", "fragment", "i32 fragment (rows, k) of selected indices"),
    Arg("src", "operand", "tile (rows, n) to select from"),
    Arg("k", "int", "how many elements to select per row"),
    Arg("largest", "bool", "select the largest instead of the smallest", required=False,
        default=False),
)


def effects(call, view):
    n = elements(operand_shape(call.args["src"], view))
    return Effects(
        # thread r % threads selects from row r of src (the rows layout of dst)
        reads=(access(call.args["src"], view, spread=spread_by(call.args["dst"], "rows_of")),),
        writes=(access(call.args["dst"], view),),
        flops=n * max(1, n.bit_length()),
    )


# ---- CUDA lowering (docs/lowering.md, "Primitive templates") ---------------------------
TEMPLATE = """\
cg::topk<{{ args.k.const }}, {{ args.largest.const }}>(
    {{ args.dst.ref }}, {{ args.src.ref }}, cg_team);"""

DEVICE = """\
template <class S>
__device__ __forceinline__ float topk_value(S& src, int i, int r, int c) {
  if constexpr (bare<S>::type::is_fragment) {
    return to_f32(src.v[i * bare<S>::type::cols + c]);
  } else {
    return to_f32(src.get(r, c));
  }
}

// topk: for each row owned by this thread, the indices of the K smallest (largest)
// elements in order, ties to the lower index: K selection passes, each taking the best
// element that comes after the previous pick in (value, index) order. Both selection loops
// are unrolled: a register array indexed by a run-time value lives in local memory.
template <int K, bool LARGEST, class D, class S>
__device__ __forceinline__ void topk(D&& dst, S&& src, Team t) {
  typedef typename bare<D>::type DT;
  typedef typename bare<S>::type ST;
  static_assert(DT::kind == ROWS && DT::cols == K && DT::rows == ST::rows,
                "the result is a rows-layout fragment of K indices per row of src");
  static_assert(!ST::is_fragment || (ST::kind == ROWS && ST::threads == DT::threads),
                "a fragment source needs the rows layout of the result");
  static_assert(K <= ST::cols, "k exceeds the row length");
#pragma unroll
  for (int i = 0; i < DT::RPT; ++i) {
    const int r = i * DT::threads + t.tid;
    if (DT::rows % DT::threads == 0 || r < DT::rows) {
      float pv = 0.f;
      int pi = -1;
#pragma unroll
      for (int j = 0; j < K; ++j) {
        float bv = 0.f;
        int bi = -1;
#pragma unroll
        for (int c = 0; c < ST::cols; ++c) {
          const float x = LARGEST ? -topk_value(src, i, r, c) : topk_value(src, i, r, c);
          const bool after = pi < 0 || x > pv || (x == pv && c > pi);
          if (after && (bi < 0 || x < bv)) { bv = x; bi = c; }
        }
        dst.v[i * K + j] = convert<typename DT::elem>(bi);
        pv = bv;
        pi = bi;
      }
    }
  }
}"""


# ---- numpy semantics (docs/simulator.md) -----------------------------------------------
def simulate(op, sim):
    """Per row, the indices of the k smallest (largest) elements in (value, index)
    order: a stable sort, so ties go to the lower index as in the template's passes."""
    x = np.asarray(sim.tile("src"), dtype=np.float32)
    key = -x if sim.value("largest") else x
    order = np.argsort(key, axis=1, kind="stable")[:, :int(sim.value("k"))]
    sim.put("dst", order.astype(np.int32))
