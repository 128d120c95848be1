"""Matrix multiply-accumulate on tensor cores: `acc (+)= a @ b` (or `a @ b^T`).

`acc` is an f32 (or f16) register fragment of shape (M, N); `a` is (M, K); `b` is (K, N),
or (N, K) with `transpose_b=True`. The tile is executed as `mma.sync` instructions of the
target's shape (m16n8k16 for f16/bf16, m16n8k32 for the fp8 types f8e4m3/f8e5m2, which
read `b` stored (N, K): `transpose_b=True`), so M, N and K must be multiples of it. `init`
(True, False or a condition such as `k == 0`) zeroes the accumulator first."""

import numpy as np

from cakegov.plugin import Arg, Effects, Spread, access, mma_accumulate, operand_shape

NAME = "mma"
VERSION = "1.5.0"
SPELLING = "lm.mma"
CATEGORY = "compute"
ARGS = (
    Arg("acc", "fragment", "accumulator fragment (M, N)"),
    Arg("a", "operand", "left operand tile (M, K)"),
    Arg("b", "operand", "right operand tile (K, N), or (N, K) with transpose_b"),
    Arg("transpose_b", "bool", "`b` is stored (N, K)", required=False, default=False),
    Arg("init", "bool", "zero the accumulator before this product", required=False,
        default=False),
)


def _flag(call, name):
    value = call.args.get(name)
    return bool(getattr(value, "value", False))


def effects(call, view):
    a, b, acc = call.args["a"], call.args["b"], call.args["acc"]
    m, n = ((*operand_shape(acc, view), 0, 0))[:2]
    k = ((*operand_shape(a, view), 0, 0))[1]
    return Effects(
        # each lane loads its A and B fragments (32-bit pairs) and the warp then executes
        # mma.sync.aligned, which every lane must reach: the loads are complete warp-wide
        reads=(access(a, view, spread=Spread(kind="mma_a", fragment=acc.name),
                      collective=True),
               access(b, view, spread=Spread(kind="mma_b", fragment=acc.name,
                                             transpose=_flag(call, "transpose_b")),
                      collective=True),
               access(acc, view)),
        writes=(access(acc, view),),
        flops=2 * m * n * k,
    )


# ---- CUDA lowering (docs/lowering.md, "Primitive templates") ---------------------------
# Each warp of the role multiplies its block of the accumulator (LFragLayout `mma`): per
# 16-wide k step it loads its A and B fragments from shared memory (32-bit loads of two
# adjacent elements, PTX ISA "Matrix fragments for mma.m16n8k16") and issues
# tiles_m x tiles_n mma.sync instructions. Addresses come from the operand's layout
# (`Smem::at`: row-major, or swizzled where a tensor map loaded the buffer); a 32-bit
# pair (2 x 16 bits at an even column, 4 x 8 bits at a column multiple of 4) never
# crosses a 16-byte chunk, so a swizzle keeps it contiguous.
TEMPLATE = """\
cg::mma<{{ args.transpose_b.const }}>(
    {{ args.acc.ref }}, {{ args.a.ref }}, {{ args.b.ref }}, {{ args.init.ref }}, cg_team);"""

DEVICE = """\
__device__ __forceinline__ void mma_16816(float& d0, float& d1, float& d2, float& d3,
                                          const u32 (&a)[4], const u32 (&b)[2], bf16) {
  asm volatile("{{ ptx.mma_bf16 }} { %0, %1, %2, %3 }, { %4, %5, %6, %7 }, { %8, %9 }, "
               "{ %0, %1, %2, %3 };"
               : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void mma_16816(float& d0, float& d1, float& d2, float& d3,
                                          const u32 (&a)[4], const u32 (&b)[2], f16) {
  asm volatile("{{ ptx.mma_f16 }} { %0, %1, %2, %3 }, { %4, %5, %6, %7 }, { %8, %9 }, "
               "{ %0, %1, %2, %3 };"
               : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void mma_16832(float& d0, float& d1, float& d2, float& d3,
                                          const u32 (&a)[4], const u32 (&b)[2], f8e4m3) {
  asm volatile("{{ ptx.mma_e4m3 }} { %0, %1, %2, %3 }, { %4, %5, %6, %7 }, { %8, %9 }, "
               "{ %0, %1, %2, %3 };"
               : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void mma_16832(float& d0, float& d1, float& d2, float& d3,
                                          const u32 (&a)[4], const u32 (&b)[2], f8e5m2) {
  asm volatile("{{ ptx.mma_e5m2 }} { %0, %1, %2, %3 }, { %4, %5, %6, %7 }, { %8, %9 }, "
               "{ %0, %1, %2, %3 };"
               : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ u32 ld_quad(const unsigned char* p) {
  return *reinterpret_cast<const u32*>(p);
}
__device__ __forceinline__ u32 ld_pair(const unsigned short* p) {
  return *reinterpret_cast<const u32*>(p);
}
__device__ __forceinline__ u32 pack_pair(unsigned short lo, unsigned short hi) {
  return (u32)lo | ((u32)hi << 16);
}

// mma: acc (M x N, FragMma) (+)= a (M x K, shared) @ b (K x N, or N x K with TRANSB).
template <bool TRANSB, class Acc, class A, class B>
__device__ __forceinline__ void mma(Acc&& acc, A&& a, B&& b, bool init, Team t) {
  typedef typename bare<Acc>::type AccT;
  typedef typename bare<A>::type AT;
  typedef typename bare<B>::type BT;
  typedef typename AT::elem E;
  constexpr int M = AccT::rows, N = AccT::cols, K = AT::cols;
  static_assert(AccT::kind == MMA, "the accumulator needs the mma fragment layout");
  static_assert(AT::kind == SMEM && BT::kind == SMEM, "mma operands are shared-memory tiles");
  static_assert(same<E, typename BT::elem>::value, "a and b need the same element type");
  static_assert(same<typename AccT::elem, float>::value, "the accumulator is f32");
  static_assert(AT::rows == M && K % 16 == 0, "a must be M x K with K a multiple of 16");
  static_assert(TRANSB ? (BT::rows == N && BT::cols == K) : (BT::rows == K && BT::cols == N),
                "b must be K x N (N x K with transpose_b)");
  if (init) acc.zero();
  const int r0 = AccT::row0(t), c0 = AccT::col0(t);
  const int q2 = 2 * (t.tid & 3);
  if constexpr (sizeof(E) == 1) {
    // fp8: mma.sync.m16n8k32, 4 elements per 32-bit register (PTX ISA, "Matrix fragments
    // for mma.m16n8k32"): a rows g and g + 8, columns 4 (l % 4) .. + 3 and + 16; b stored
    // N x K, column g, rows 4 (l % 4) .. + 3 and + 16.
    static_assert(TRANSB, "fp8 mma reads b stored N x K (transpose_b=True)");
    static_assert(K % 32 == 0, "fp8 mma steps K by 32");
    const int q4 = 4 * (t.tid % 4);
    // one k step at a time: the fp8 tiles of a 128 x 128 block are register-heavy next to
    // the two f32 accumulators a block-scaled GEMM keeps (unrolling K spills)
#pragma unroll 1
    for (int kk = 0; kk < K; kk += 32) {
      u32 af[AccT::TM][4];
      u32 bf[AccT::TN][2];
#pragma unroll
      for (int mi = 0; mi < AccT::TM; ++mi) {
        const int r = r0 + mi * 16;
        af[mi][0] = ld_quad(&a.at(r, kk + q4).bits);
        af[mi][1] = ld_quad(&a.at(r + 8, kk + q4).bits);
        af[mi][2] = ld_quad(&a.at(r, kk + q4 + 16).bits);
        af[mi][3] = ld_quad(&a.at(r + 8, kk + q4 + 16).bits);
      }
#pragma unroll
      for (int ni = 0; ni < AccT::TN; ++ni) {
        const int n = c0 - q2 + ni * 8 + (t.tid % 32) / 4;
        bf[ni][0] = ld_quad(&b.at(n, kk + q4).bits);
        bf[ni][1] = ld_quad(&b.at(n, kk + q4 + 16).bits);
      }
#pragma unroll
      for (int mi = 0; mi < AccT::TM; ++mi) {
#pragma unroll
        for (int ni = 0; ni < AccT::TN; ++ni) {
          float* d = &acc.v[(mi * AccT::TN + ni) * 4];
          mma_16832(d[0], d[1], d[2], d[3], af[mi], bf[ni], E{});
        }
      }
    }
  } else {
#pragma unroll
    for (int kk = 0; kk < K; kk += 16) {
      u32 af[AccT::TM][4];
      u32 bf[AccT::TN][2];
#pragma unroll
      for (int mi = 0; mi < AccT::TM; ++mi) {
        const int r = r0 + mi * 16;
        af[mi][0] = ld_pair(&a.at(r, kk + q2).bits);
        af[mi][1] = ld_pair(&a.at(r + 8, kk + q2).bits);
        af[mi][2] = ld_pair(&a.at(r, kk + q2 + 8).bits);
        af[mi][3] = ld_pair(&a.at(r + 8, kk + q2 + 8).bits);
      }
#pragma unroll
      for (int ni = 0; ni < AccT::TN; ++ni) {
        const int n = c0 - q2 + ni * 8 + (t.tid % 32) / 4;  // column g of tile ni
        if constexpr (TRANSB) {
          bf[ni][0] = ld_pair(&b.at(n, kk + q2).bits);
          bf[ni][1] = ld_pair(&b.at(n, kk + q2 + 8).bits);
        } else {
          bf[ni][0] = pack_pair(b.at(kk + q2, n).bits, b.at(kk + q2 + 1, n).bits);
          bf[ni][1] = pack_pair(b.at(kk + q2 + 8, n).bits, b.at(kk + q2 + 9, n).bits);
        }
      }
#pragma unroll
      for (int mi = 0; mi < AccT::TM; ++mi) {
#pragma unroll
        for (int ni = 0; ni < AccT::TN; ++ni) {
          float* d = &acc.v[(mi * AccT::TN + ni) * 4];
          mma_16816(d[0], d[1], d[2], d[3], af[mi], bf[ni], E{});
        }
      }
    }
  }
}"""


# ---- numpy semantics (docs/simulator.md) -----------------------------------------------
def simulate(op, sim):
    """f32 accumulation in the template's k order: one 16-wide k step at a time (each
    step one `mma.sync.m16n8k16` per tile; 32-wide for fp8, m16n8k32), starting from zero
    with `init`."""
    a, b = sim.tile("a"), sim.tile("b")
    if sim.value("transpose_b"):
        b = b.T
    m, n = sim.shape("acc")
    acc = np.zeros((m, n), dtype=np.float32) if sim.value("init") else sim.tile("acc")
    k_step = 32 if sim.dtype("a") in ("f8e4m3", "f8e5m2") else 16  # m16n8k32 for fp8
    sim.put("acc", mma_accumulate(acc, a, b, k_step))
