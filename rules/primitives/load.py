"""Bulk copy of one tile from a global tensor into a shared-memory stage.

From a 2-D tensor it lowers to tensor-map copies: one elected thread issues one
`cp.async.bulk.tensor.2d...mbarrier::complete_tx::bytes` per box of the stage (usually one;
one per swizzle panel), through a `CUtensorMap` the host encodes with the buffer's swizzle,
so a swizzled buffer receives the swizzled layout. Otherwise (a 1-D tensor, a tile no
tensor map takes: cakegov/lower/tma.py) it lowers to
`cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes`, one copy per tile row
(rows are multiples of 16 bytes). The copy runs in the async proxy and completes at any
later moment by subtracting its bytes from the transaction count of `barrier`. Rows or
columns outside the tensor are zero-filled when `pad=True` (the tail strategy: a tensor
map fills them itself, the row-wise path copies them from the kernel's zero row); without
it the tile must lie inside the tensor.

With `multicast=MASK` (a thread-block cluster launch) one issue delivers the tile to every
CTA of the cluster whose rank bit is set in MASK, at the same shared-memory offset, and
completes the tile's bytes on the barrier at the same offset in each of those CTAs
(`cp.async.bulk...multicast::cluster` with a 16-bit ctaMask, PTX ISA "cp.async.bulk";
sm_90a). Each destination CTA must therefore arm its own barrier with the bytes it
receives, and every destination must have freed the stage before the copy is issued."""

from cakegov.plugin import Arg, Effects, access, barrier_action

NAME = "load"
VERSION = "1.6.0"
SPELLING = "smem.load"
RECEIVER = "dst"
CATEGORY = "memory"
ARGS = (
    Arg("dst", "smem", "shared-memory stage receiving the tile (`a_s[stage]`)"),
    Arg("src", "tensor", "global tensor to read"),
    Arg("at", "coord", "element coordinates of the tile origin in `src`"),
    Arg("barrier", "mbarrier", "mbarrier whose transaction count the copy completes"),
    Arg("pad", "bool", "zero-fill the part of the tile outside `src` (tail strategy)",
        required=False, default=False),
    Arg("multicast", "index", "CTA mask over the cluster's ranks (bit r: CTA rank r, "
        "`%cluster_ctarank`): the tile lands in every CTA of the mask at the same shared "
        "offset and completes its bytes on each one's `barrier`", required=False),
)


def effects(call, view):
    dst = access(call.args["dst"], view, proxy="async")
    src = access(call.args["src"], view, proxy="async").model_copy(update={"bytes": dst.bytes})
    return Effects(
        reads=(src,),
        writes=(dst,),
        barriers=(barrier_action("complete_tx", call.args["barrier"], bytes=dst.bytes),),
        global_bytes=dst.bytes,
        asynchronous=True,
    )


# ---- CUDA lowering (docs/lowering.md, "Primitive templates") ---------------------------
# Tensor-map path (`copy.tma`, one entry when the lowering chose it): the first thread of
# the role issues one box per entry of the plan, at the tile origin plus the box's origin
# (coordinates innermost first), into the stage plus the box's byte offset; every box
# completes its full bytes on the barrier, out-of-bounds elements included (as zeros).
# Row-wise path (`copy.rowwise`): the first warp of the role issues the copy, one row per
# lane at a time; every row delivers exactly its bytes to the barrier: the in-bounds part
# from the tensor, the rest (with pad=True) from the kernel's zero row. The lowering puts
# a role synchronisation before every load (an explicit op of the LoweredKernel: a named
# barrier over the role, `__syncwarp()` for a one-warp role), so the copy follows
# everything the role's threads did before in program order (arming the barrier, reading
# the old stage).
TEMPLATE = """\
{% for t in copy.tma %}
if (cg_rtid == 0) {  // tensor map {{ t.map }}
{% for b in t.boxes %}
  cg::tma_load_2d(cg_base + (cg::u32)({{ copy.dst }}) + {{ b.offset }}u, &{{ t.map }},
                  (int)({{ copy.col0 }}) + {{ b.col }}, (int)({{ copy.row0 }}) + {{ b.row }},
                  cg_base + (cg::u32)({{ copy.bar }}), {{ copy.multicast }});
{% endfor %}
}
{% endfor %}
{% for r in copy.rowwise %}
// {{ r.why }}
if (cg_rwarp == 0) {
  cg::load_tile<{{ copy.ctype }}, {{ op.rows }}, {{ op.row_elems }}, {{ copy.pad }}>(
      cg_base + {{ copy.dst }}, {{ copy.src }}, {{ copy.src_rows }}, {{ copy.src_cols }},
      {{ copy.row0 }}, {{ copy.col0 }}, cg_base + {{ copy.bar }}, cg_base + {{ copy.zero }},
      cg_lane, {{ copy.multicast }});
}
{% endfor %}"""

DEVICE = """\
// load: copy a ROWS x ROW_ELEMS tile whose origin is (row0, col0) of a row-major
// src_rows x src_cols tensor into shared memory at `dst`. Lane l copies rows l, l + 32, ...
// With PAD, the part of a row outside the tensor comes from the zero row, so each row
// completes exactly ROW_ELEMS * sizeof(T) bytes on `bar`. A non-zero `mask` multicasts
// every row to the cluster CTAs of the mask (same offsets there, completing on each one's
// `bar`); their zero fill is copied from this CTA's zero row into each of them.
template <class T, int ROWS, int ROW_ELEMS, bool PAD>
__device__ __forceinline__ void load_tile(u32 dst, const T* src, int src_rows, int src_cols,
                                          int row0, int col0, u32 bar, u32 zero, int lane,
                                          u32 mask) {
#pragma unroll 1
  for (int r = lane; r < ROWS; r += 32) {
    const u32 d = dst + (u32)(r * ROW_ELEMS * (int)sizeof(T));
    const int gr = row0 + r;
    int valid = ROW_ELEMS;
    if (PAD) {
      valid = (gr >= 0 && gr < src_rows && col0 >= 0) ? imin(src_cols - col0, ROW_ELEMS) : 0;
      valid = valid < 0 ? 0 : valid;
    }
    if (valid > 0) {
      const T* from = src + ((long long)gr * src_cols + col0);
      if (mask != 0u) {
        bulk_g2s_multicast(d, from, (u32)valid * (u32)sizeof(T), bar, (unsigned short)mask);
      } else {
        bulk_g2s(d, from, (u32)valid * (u32)sizeof(T), bar);
      }
    }
    if (PAD && valid < ROW_ELEMS) {
      const u32 off = (u32)valid * (u32)sizeof(T);
      const u32 rest = (u32)(ROW_ELEMS - valid) * (u32)sizeof(T);
      if (mask != 0u) {
        for (u32 peer = 0; peer < 16u; ++peer) {
          if (mask & (1u << peer)) {
            bulk_s2s(map_peer(d + off, peer), zero, rest, map_peer(bar, peer));
          }
        }
      } else {
        bulk_s2s(d + off, zero, rest, bar);
      }
    }
  }
}"""


# ---- numpy semantics (docs/simulator.md) -----------------------------------------------
def simulate(op, sim):
    """The copy's data when it lands: tile row r is row `row0 + r` of the source's 2-D
    view from column `col0`; with pad, what lies outside the view is zero (a tensor map's
    fill, or the kernel's zero row on the row-wise path; without pad it is an
    out-of-bounds read). The stage receives it in the buffer's lowered layout (swizzled
    for a tensor-map copy into a swizzled buffer: cakegov/sim/memory.py)."""
    view = (sim.index(op.src_rows), sim.index(op.src_cols))
    tile = sim.gather(op.tensor, view, sim.index(op.row0), sim.index(op.col0), op.rows,
                      op.row_elems, op.pad)
    sim.put_stage(op.buffer, sim.index(op.stage), tile)  # in the CTA the copy lands in
