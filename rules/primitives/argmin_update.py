"""Carry a running (value, index) minimum across column tiles:
`best[r], index[r] = min((best[r], index[r]), (src[r, c], base + c) for every c)`.

An argmin over more columns than one tile holds (k-means with 1024 centroids streamed
64 at a time) reduces each tile and merges it into the running pair: a row's value and
index change only where the tile holds a strictly smaller value, so on ties the earlier
tile (the lower index) wins, and within a tile the first column does, as
`lm.reduce(..., op="argmin")` and numpy's `argmin` decide. Start `best` at a large
value and `index` anywhere (`lm.fill(best, 1e30)`, `lm.fill(index, 0.0)`): both are read
before they are written."""

import numpy as np

from cakegov.plugin import Arg, Effects, access, elements, operand_shape, spread_by

NAME = "argmin_update"
VERSION = "1.0.0"
SPELLING = "lm.argmin_update"
CATEGORY = "compute"
REQUIRES = ("reduce",)  # its device code: `row_value`, the value of one row of a tile
ARGS = (
    Arg("best", "fragment", "running minimum per row (R,), f32, read and written"),
    Arg("index", "fragment", "its column index per row (R,), i32, read and written"),
    Arg("src", "operand", "this tile's values (R, C)"),
    Arg("base", "index", "the column index of the tile's column 0"),
)


def effects(call, view):
    best, index, src = call.args["best"], call.args["index"], call.args["src"]
    return Effects(
        # thread r % threads merges row r of src into the row it holds (rows layout)
        reads=(access(src, view, spread=spread_by(best, "rows_of")), access(best, view),
               access(index, view)),
        writes=(access(best, view), access(index, view)),
        flops=elements(operand_shape(src, view)),
    )


# ---- CUDA lowering (docs/lowering.md, "Primitive templates") ---------------------------
TEMPLATE = """\
cg::argmin_update(
    {{ args.best.ref }}, {{ args.index.ref }}, {{ args.src.ref }}, {{ args.base.ref }}, cg_team);"""

DEVICE = """\
// argmin_update: merge each row of src into the running (value, index) minimum of the
// row, strictly smaller values only (ties keep the earlier, lower index).
template <class B, class I, class S>
__device__ __forceinline__ void argmin_update(B&& best, I&& index, S&& src, long long base,
                                              Team t) {
  typedef typename bare<B>::type BT;
  typedef typename bare<I>::type IT;
  typedef typename bare<S>::type ST;
  static_assert(BT::kind == ROWS && IT::kind == ROWS && BT::cols == 1 && IT::cols == 1 &&
                BT::rows == ST::rows && IT::rows == ST::rows && BT::threads == IT::threads,
                "best and index are rows-layout fragments with one value per row of src");
  static_assert(!ST::is_fragment || (ST::kind == ROWS && ST::threads == BT::threads),
                "a fragment source needs the rows layout of best");
#pragma unroll
  for (int i = 0; i < BT::RPT; ++i) {
    const int r = i * BT::threads + t.tid;
    if (BT::rows % BT::threads == 0 || r < BT::rows) {
      float acc = to_f32(best.v[i]);
      int idx = (int)index.v[i];  // i32 labels: a column index below 2^31
      for (int c = 0; c < ST::cols; ++c) {
        const float x = row_value(src, i, r, c);
        if (x < acc) { acc = x; idx = (int)(base + c); }
      }
      best.v[i] = convert<typename BT::elem>(acc);
      index.v[i] = convert<typename IT::elem>(idx);
    }
  }
}"""


# ---- numpy semantics (docs/simulator.md) -----------------------------------------------
def simulate(op, sim):
    """The template's strict comparisons, row by row, in column order: the first smallest
    column of the tile replaces the pair only when it is strictly smaller."""
    x = np.asarray(sim.tile("src"), dtype=np.float32)
    x = x.reshape(x.shape[0], -1)
    best = np.asarray(sim.tile("best"), dtype=np.float32).reshape(-1)
    index = np.asarray(sim.tile("index")).reshape(-1)
    with np.errstate(all="ignore"):
        col = np.argmin(x, axis=1)
        low = x[np.arange(x.shape[0]), col]
        take = low < best
    sim.put("best", np.where(take, low, best).reshape(-1, 1))
    sim.put("index", np.where(take, sim.value("base") + col, index).astype(np.int32)
            .reshape(-1, 1))
