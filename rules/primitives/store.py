"""Store a tile from registers or shared memory into a global tensor.

With `mask=True` each element is bounds-checked against the tensor's extents, which makes
a tile that hangs over the edge of the output (a tail tile) safe; without it the tile must
lie inside the tensor for every CTA."""

from cakegov.plugin import Arg, Effects, access, elements, operand_shape

NAME = "store"
VERSION = "1.3.0"
SPELLING = "lm.store"
CATEGORY = "memory"
ARGS = (
    Arg("dst", "tensor", "global tensor to write"),
    Arg("at", "coord", "element coordinates of the tile origin in `dst`"),
    Arg("src", "operand", "register fragment (or a sub-tile `acc[:, a:b]` of one) or "
        "shared-memory stage holding the tile", sliceable=True),
    Arg("mask", "bool", "bounds-check every element against `dst` (tail strategy)",
        required=False, default=False),
)


def effects(call, view):
    src = access(call.args["src"], view)
    dtype = view.tensor_dtype(call.args["dst"].name)
    size = elements(operand_shape(call.args["src"], view)) * view.dtype_bytes(dtype)
    dst = access(call.args["dst"], view).model_copy(update={"bytes": size})
    return Effects(reads=(src,), writes=(dst,), global_bytes=size)


# ---- CUDA lowering (docs/lowering.md, "Primitive templates") ---------------------------
# Every thread of the role writes the elements it holds (a fragment) or a share of the
# tile (shared memory); with mask=True each write is bounds-checked against the tensor.
TEMPLATE = """\
cg::store({{ args.dst.ref }}, {{ args.at.row }}, {{ args.at.col }},
          {{ args.src.ref }}, {{ args.mask.ref }}, cg_team);"""

DEVICE = """\
// store: write tile `src` at (r0, c0) of the 2-D tensor view `dst`, converting elements.
template <class T, class S>
__device__ __forceinline__ void store(Gmem<T> dst, long long r0, long long c0, S&& src,
                                      bool mask, Team t) {
  src.for_each(t, [&](int r, int c, const auto& v) {
    const long long gr = r0 + r, gc = c0 + c;
    if (!mask || (gr >= 0 && gr < dst.rows && gc >= 0 && gc < dst.cols)) {
      dst.p[gr * dst.cols + gc] = convert<T>(v);
    }
  });
}"""


# ---- numpy semantics (docs/simulator.md) -----------------------------------------------
def simulate(op, sim):
    """Each warp writes the elements it holds of `src` (converted to the tensor's dtype);
    with mask, elements outside the tensor are skipped (the tail guard)."""
    sim.store("dst", "at", sim.tile("src"), bool(sim.value("mask")), src="src")
