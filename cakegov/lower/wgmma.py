"""wgmma's view of shared memory and registers: matrix descriptors, the addresses a
descriptor makes the hardware read, and the accumulator fragment of every thread.

Sources (PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate", 9.7.15.5):
- "Matrix Descriptor Format": a 64-bit value; bits 0-13 the start address, 16-29 the
  leading dimension byte offset (LBO), 32-45 the stride dimension byte offset (SBO), each
  `matrix-descriptor-encode(x) = (x & 0x3FFFF) >> 4`; bits 49-51 the matrix base offset
  (0 when the swizzle pattern starts on its repeat boundary); bits 62-63 the swizzle mode
  (0 none, 1 128B, 2 64B, 3 32B).
- "Canonical Layouts", K-major: no swizzle `((8,m),(T,2k)):((1T,SBO),(1,LBO))`, swizzled
  `Swizzle<B,4,3> o ((8,m),(T,2k)):((W/16*T,SBO),(1,T))` with T the elements per 16 bytes
  and W the swizzle width; "Leading Dimension Byte Offset": for swizzled K-major layouts
  "not used, assumed to be 1"; "Stride Dimension Byte Offset", K-major: "the offset from
  the first 8 rows to the next 8 rows".
- Figure 149, "WGMMA .m64nNk16 register fragment layout for accumulator matrix D": warp w
  of the warpgroup owns rows 16w..16w+15; lane l holds rows 16w + l/4 and 16w + l/4 + 8 and,
  in every 8-column block, columns 2(l%4) and 2(l%4)+1; registers d0..d(N/2-1) go
  (row, col), (row, col+1), (row+8, col), (row+8, col+1), then the next 8 columns. (The
  same per-warp pattern as the m16n8 `mma.sync` C fragment, "Matrix Fragments for
  mma.m16n8k16".)

This module holds no CUDA: the lowering renders what it computes, and the tests check it
against the PTX ISA's worked examples and against the tensor-map tile layout of
cakegov/lower/swizzle.py."""

from __future__ import annotations

from dataclasses import dataclass

from cakegov.lower.swizzle import (
    CHUNK_BYTES,
    ROWS_PER_ATOM,
    KMajorTile,
    LayoutError,
    SwizzleMode,
    mode_for_descriptor,
)

FIELD_MASK = 0x3FFFF  # matrix-descriptor-encode keeps address bits 4..17
WARPGROUP_THREADS = 128
WGMMA_M = 64
WGMMA_K_BYTES = 32  # k16 of a 16-bit type, k8 of tf32, k32 of an 8-bit type
VALID_N = tuple(range(8, 257, 8))  # PTX ISA, "Matrix Shape": N = 8 * i, i = 1..32


def encode_field(value: int, what: str) -> int:
    """`matrix-descriptor-encode`, refusing values the 14-bit field would silently change."""
    if value < 0 or value % CHUNK_BYTES or value > FIELD_MASK:
        raise LayoutError(f"{what} {value} is not a multiple of 16 in [0, {FIELD_MASK}]")
    return (value & FIELD_MASK) >> 4


@dataclass(frozen=True)
class MatrixDescriptor:
    """The fields of a wgmma shared-memory matrix descriptor, in bytes."""

    start: int
    lbo: int
    sbo: int
    swizzle: SwizzleMode
    base_offset: int = 0

    def encode(self) -> int:
        """The 64-bit descriptor value."""
        if not 0 <= self.base_offset <= 7:
            raise LayoutError(f"base offset {self.base_offset} is not 0..7")
        return (encode_field(self.start, "start address")
                | encode_field(self.lbo, "leading byte offset") << 16
                | encode_field(self.sbo, "stride byte offset") << 32
                | self.base_offset << 49
                | self.swizzle.descriptor_code << 62)

    @classmethod
    def decode(cls, value: int) -> MatrixDescriptor:
        if not 0 <= value < 1 << 64:
            raise LayoutError(f"{value} is not a 64-bit descriptor")
        reserved = value & ~((0x3FFF) | 0x3FFF << 16 | 0x3FFF << 32 | 0x7 << 49 | 0x3 << 62)
        if reserved:
            raise LayoutError(f"descriptor {value:#018x} sets reserved bits {reserved:#x}")
        return cls(start=(value & 0x3FFF) << 4, lbo=(value >> 16 & 0x3FFF) << 4,
                   sbo=(value >> 32 & 0x3FFF) << 4,
                   swizzle=mode_for_descriptor(value >> 62 & 0x3),
                   base_offset=value >> 49 & 0x7)

    def address(self, row: int, kbyte: int) -> int:
        """The shared-memory byte the hardware reads for byte `kbyte` of K of operand row
        `row` (K-major), by the canonical layout of the PTX ISA."""
        if row < 0 or kbyte < 0:
            raise LayoutError("row and K byte must be non-negative")
        if self.base_offset:
            raise LayoutError("non-zero base offsets are not modelled (tiles are placed on "
                              "their pattern boundary)")
        group, r = divmod(row, ROWS_PER_ATOM)
        if self.swizzle.bits == 0:
            chunk, within = divmod(kbyte, CHUNK_BYTES)
            return self.start + r * CHUNK_BYTES + group * self.sbo + chunk * self.lbo + within
        if (self.start % self.swizzle.width) + kbyte >= self.swizzle.width:
            raise LayoutError(f"K byte {kbyte} from start {self.start} leaves the "
                              f"{self.swizzle.width}-byte swizzle row")
        logical = self.start + r * self.swizzle.width + group * self.sbo + kbyte
        return self.swizzle.apply(logical)


def kmajor_descriptor(tile: KMajorTile, k_step: int, row0: int = 0,
                      k_bytes: int = WGMMA_K_BYTES) -> MatrixDescriptor:
    """The descriptor of the `k_step`-th K slice (`k_bytes` wide) of `tile`, from operand
    row `row0` (a multiple of 8: e.g. the second warpgroup's 64 rows of A)."""
    if row0 % ROWS_PER_ATOM or not 0 <= row0 < tile.rows:
        raise LayoutError(f"row offset {row0} is not a multiple of 8 inside the tile")
    first = k_step * k_bytes
    if k_step < 0 or first + k_bytes > tile.row_bytes:
        raise LayoutError(f"K step {k_step} lies outside a {tile.row_bytes}-byte row")
    width = tile.swizzle.width
    if tile.swizzle.bits and k_bytes > width:
        raise LayoutError(f"a {k_bytes}-byte K slice is wider than the {width}-byte swizzle")
    panel, within = divmod(first, width)
    start = tile.base + panel * tile.panel_bytes + within + row0 * width
    if tile.swizzle.bits == 0:  # core matrices: K neighbours one panel apart
        return MatrixDescriptor(start, lbo=tile.panel_bytes, sbo=ROWS_PER_ATOM * width,
                                swizzle=tile.swizzle)
    return MatrixDescriptor(start, lbo=CHUNK_BYTES, sbo=ROWS_PER_ATOM * width,
                            swizzle=tile.swizzle)


# ---- the accumulator ------------------------------------------------------------------


def accumulator_registers(n: int) -> int:
    """f32 registers per thread of an m64nNk16 accumulator (PTX: N/2)."""
    if n not in VALID_N:
        raise LayoutError(f"N={n} is not a wgmma N (8..256, a multiple of 8)")
    return n // 2


def accumulator_element(thread: int, register: int, n: int) -> tuple[int, int]:
    """(row, column) of D held by `thread` (0..127 in its warpgroup) in `register`."""
    if not 0 <= thread < WARPGROUP_THREADS:
        raise LayoutError(f"thread {thread} is not 0..127")
    if not 0 <= register < accumulator_registers(n):
        raise LayoutError(f"register {register} is not 0..{n // 2 - 1}")
    warp, lane = divmod(thread, 32)
    row = 16 * warp + lane // 4 + 8 * ((register // 2) % 2)
    col = 8 * (register // 4) + 2 * (lane % 4) + register % 2
    return row, col


def accumulator_owner(row: int, col: int, n: int) -> tuple[int, int]:
    """The inverse: (thread, register) holding D[row, col]."""
    if not (0 <= row < WGMMA_M and 0 <= col < n):
        raise LayoutError(f"({row}, {col}) is outside a 64x{n} accumulator")
    accumulator_registers(n)
    warp, r = divmod(row, 16)
    half, group = divmod(r, 8)
    block, c = divmod(col, 8)
    pair, odd = divmod(c, 2)
    return 32 * warp + 4 * group + pair, 4 * block + 2 * half + odd
