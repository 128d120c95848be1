"""Bulk store of one shared-memory tile into a global tensor, issued now and completed
later: into a 2-D tensor as tensor-map stores (`cp.async.bulk.tensor.2d.global.shared::cta
.tile.bulk_group`, one per box, by one thread; the tile may be swizzled), otherwise row by
row (`cp.async.bulk.global.shared::cta.bulk_group`), then `cp.async.bulk.commit_group`.

Each call is one bulk group. The copy engine reads the shared-memory stage through the
async proxy while the group is in flight: the stage must not be written again (by a
generic store or a bulk load) or released to another role, and the kernel must not exit,
before `lm.store_wait(pending=N)` has retired the group. Generic writes to the stage need
`lm.fence_proxy()` in the writer before the store. With `mask=True` rows and columns
outside `dst` are not written (the tail strategy)."""

from cakegov.plugin import Arg, BarrierAction, Effects, access, elements, operand_shape

NAME = "store_async"
VERSION = "1.4.0"
SPELLING = "smem.store_async"
RECEIVER = "src"
CATEGORY = "memory"
ARGS = (
    Arg("src", "smem", "shared-memory stage holding the tile (`c_s[stage]`)"),
    Arg("dst", "tensor", "global tensor to write"),
    Arg("at", "coord", "element coordinates of the tile origin in `dst`"),
    Arg("mask", "bool", "skip the part of the tile outside `dst` (tail strategy)",
        required=False, default=False),
)


def effects(call, view):
    src = access(call.args["src"], view, proxy="async")
    dtype = view.tensor_dtype(call.args["dst"].name)
    size = elements(operand_shape(call.args["src"], view)) * view.dtype_bytes(dtype)
    dst = access(call.args["dst"], view, proxy="async").model_copy(update={"bytes": size})
    return Effects(
        reads=(src,),
        writes=(dst,),
        barriers=(BarrierAction(op="commit_group", barrier="bulk"),),
        global_bytes=size,
        asynchronous=True,
    )


# ---- CUDA lowering (docs/lowering.md, "Primitive templates") ---------------------------
# The lowering synchronises the role first (an explicit op), so every thread of the role
# has written (and fenced) its part of the tile before the bulk stores are issued.
# Tensor-map path (`tma`): the first thread of the role stores every box (a tensor store
# writes only the elements inside the tensor, so `mask` needs nothing more) and commits
# them as one bulk group. Row-wise path (`rowwise`): each lane of the first warp commits its
# rows as one bulk group. The `store_wait` lowering waits in the first warp's lanes (bulk
# groups belong to the thread that committed them), then synchronises the role.
TEMPLATE = """\
{% for t in tma %}
if (cg_rtid == 0) {  // tensor map {{ t.map }}
{% for b in t.boxes %}
  cg::tma_store_2d(&{{ t.map }}, (int)({{ args.at.col }}) + {{ b.col }},
                   (int)({{ args.at.row }}) + {{ b.row }},
                   cg_base + (cg::u32)({{ t.src }}) + {{ b.offset }}u);
{% endfor %}
  cg::bulk_commit();
}
{% endfor %}
{% for r in rowwise %}
// {{ r.why }}
if (cg_rwarp == 0) {
  cg::store_async<{{ args.mask.const }}>(
      {{ args.dst.ref }}, {{ args.at.row }}, {{ args.at.col }}, {{ args.src.ref }}, cg_lane);
}
{% endfor %}"""

DEVICE = """\
// store_async: bulk copies (shared -> global) committed as one bulk group. A tile of one
// column into a tensor of one column (a rank-1 tile into a rank-1 tensor: both views are
// `n x 1`) is contiguous on both sides: lane 0 stores its rows in one copy. Otherwise lane
// l stores rows l, l + 32, ... With MASK only the part inside the tensor is written.
// Every copy must move a multiple of 16 bytes between 16-byte aligned addresses (the
// bulk-copy-size rule checks the rows, the tensor's pitch and the tails).
template <bool MASK, class T, int R, int C, int SW>
__device__ __forceinline__ void store_async(Gmem<T> dst, long long r0, long long c0,
                                            const Smem<T, R, C, SW>& src, int lane) {
  static_assert(SW == 0, "row-wise bulk stores copy row-major tiles");
  if (C == 1 && dst.cols == 1) {
    if (lane == 0) {
      long long valid = R;
      if (MASK) {
        valid = (r0 >= 0 && c0 == 0) ? dst.rows - r0 : 0;
        valid = valid < 0 ? 0 : (valid > R ? R : valid);
      }
      if (valid > 0) {
        bulk_s2g(dst.p + r0, (u32)__cvta_generic_to_shared(src.p),
                 (u32)(valid * (long long)sizeof(T)));
      }
    }
  } else {
    for (int r = lane; r < R; r += 32) {
      const long long gr = r0 + r;
      long long valid = C;
      if (MASK) {
        valid = (gr >= 0 && gr < dst.rows && c0 >= 0) ? dst.cols - c0 : 0;
        valid = valid < 0 ? 0 : (valid > C ? C : valid);
      }
      if (valid > 0) {
        bulk_s2g(dst.p + gr * dst.cols + c0, (u32)__cvta_generic_to_shared(src.p + r * C),
                 (u32)(valid * (long long)sizeof(T)));
      }
    }
  }
  bulk_commit();
}"""


# ---- numpy semantics (docs/simulator.md) -----------------------------------------------
def simulate(op, sim):
    """When the bulk group finishes (the simulator chooses when, before the retiring
    `store_wait`): the copy engine reads the whole stage (in the buffer's lowered layout)
    and writes it at `at`, only the part inside the tensor with mask."""
    sim.store("dst", "at", sim.tile("src"), bool(sim.value("mask")), src="src")
