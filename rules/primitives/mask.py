"""Mask the scores of an attention tile: element `(r, c)` of `dst` becomes `-inf` when
its key column `col0 + c` is at or past `cols` (a key tile hanging over the end of the
sequence) or, with `causal=True`, when it lies after its query row (`col0 + c > row0 + r`).

`row0` and `col0` are the tile's query and key origins; the masked scores contribute
`exp(-inf) = 0` to a softmax that follows. `dst` is a shared-memory tile or a fragment,
read and written in place."""

import numpy as np

from cakegov.plugin import Arg, Effects, access, elements, operand_shape

NAME = "mask"
VERSION = "1.0.0"
SPELLING = "lm.mask"
CATEGORY = "compute"
ARGS = (
    Arg("dst", "operand", "score tile (rows, cols) to mask in place"),
    Arg("row0", "index", "query index of the tile's row 0"),
    Arg("col0", "index", "key index of the tile's column 0"),
    Arg("cols", "index", "number of keys: columns at or past it are masked"),
    Arg("causal", "bool", "also mask keys after the query (`col0 + c > row0 + r`)",
        required=False, default=False),
)


def effects(call, view):
    dst = call.args["dst"]
    return Effects(
        reads=(access(dst, view),),
        writes=(access(dst, view),),
        flops=elements(operand_shape(dst, view)),
    )


# ---- CUDA lowering (docs/lowering.md, "Primitive templates") ---------------------------
TEMPLATE = """\
cg::mask<{{ args.causal.const }}>(
    {{ args.dst.ref }}, {{ args.row0.ref }}, {{ args.col0.ref }}, {{ args.cols.ref }}, cg_team);"""

DEVICE = """\
// mask: -inf where the key column is past the sequence or, causally, after the query.
template <bool CAUSAL, class D>
__device__ __forceinline__ void mask(D&& dst, long long row0, long long col0, long long cols,
                                     Team t) {
  typedef typename bare<D>::type::elem T;
  const T neg_inf = convert<T>(__int_as_float(0xff800000));
  dst.for_each(t, [&](int r, int c, auto& v) {
    const long long key = col0 + c;
    if (key >= cols || (CAUSAL && key > row0 + r)) v = neg_inf;
  });
}"""


# ---- numpy semantics (docs/simulator.md) -----------------------------------------------
def simulate(op, sim):
    """The template's predicate over the whole tile; unmasked elements are unchanged."""
    x = np.array(sim.tile("dst"), dtype=np.float32)
    x = x.reshape(x.shape[0], -1)
    rows, cols = x.shape
    key = sim.value("col0") + np.arange(cols)[None, :]
    query = sim.value("row0") + np.arange(rows)[:, None]
    masked = key >= sim.value("cols")
    if sim.value("causal"):
        masked = masked | (key > query)
    sim.put("dst", np.where(masked, np.float32(-np.inf), x))
