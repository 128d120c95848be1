"""The shared-memory swizzle patterns of sm_90a, as a model the lowering and tests share.

Source: PTX ISA, "Shared Memory Matrix Layout" (9.7.15.5.1.2, wgmma) and its "Canonical
Layouts" table: the K-major and MN-major layouts are composed with CuTe's
`Swizzle<B, 4, 3>`, B = 0 (no swizzle), 1 (32B), 2 (64B), 3 (128B); "Matrix Descriptor
Format": the pattern of the 128B / 64B / 32B modes repeats at 1024- / 512- / 256-byte
boundaries. CUTLASS `include/cute/swizzle.hpp` defines `Swizzle<B, M, S>` as
`addr ^ ((addr & (((1 << B) - 1) << (M + S))) >> S)`: the B bits above bit M+S are XORed
into the B bits above bit M. With M = 4 and S = 3 on a *byte* address: the 16-byte chunk
index within a row of the swizzle width (bits 4..4+B-1) is XORed with bits 7..7+B-1,
which for a tile stored with a row pitch equal to the swizzle width is the row index
modulo 8 (128B), row / 2 modulo 4 (64B), row / 4 modulo 2 (32B). The tensor-map copies
(`CU_TENSOR_MAP_SWIZZLE_*`, CUDA driver API `cuTensorMapEncodeTiled`) write with the same
pattern, which is why a TMA-loaded tile can be handed to wgmma unchanged.

Everything here is integer arithmetic on byte addresses: no GPU needed, exhaustively
testable (tests/test_layout_model.py)."""

from __future__ import annotations

from dataclasses import dataclass

CHUNK_BYTES = 16  # the unit a swizzle moves: bits 0..3 of the address never change
SHIFT = 3  # Swizzle<B, 4, 3>: the XOR source lies 3 bits above the chunk bits
ROWS_PER_ATOM = 8  # every pattern spans 8 rows of its width


class LayoutError(ValueError):
    """A layout the model (and so the lowering) cannot express."""


@dataclass(frozen=True)
class SwizzleMode:
    """One swizzle mode: its schedule spelling, row width in bytes and XOR bit count."""

    name: str  # as the schedule spells it: "none", "32B", "64B", "128B"
    width: int  # bytes of one swizzled row; 16 for "none" (one chunk: the core matrix row)
    bits: int  # B of Swizzle<B, 4, 3>
    descriptor_code: int  # bits 62..63 of the wgmma matrix descriptor
    tensor_map_code: int  # CUtensorMapSwizzle enumerator

    @property
    def repeat(self) -> int:
        """Bytes after which the pattern repeats (PTX: 1024 / 512 / 256; 128 for none)."""
        return ROWS_PER_ATOM * self.width

    def apply(self, address: int) -> int:
        """The physical byte address of logical byte `address` (Swizzle<B, 4, 3>)."""
        if address < 0:
            raise LayoutError(f"negative shared-memory address {address}")
        mask = ((1 << self.bits) - 1) << (4 + SHIFT)
        return address ^ ((address & mask) >> SHIFT)


# PTX ISA, "Matrix Descriptor Format": 0 none, 1 128B, 2 64B, 3 32B. CUDA driver API,
# CUtensorMapSwizzle: NONE 0, 32B 1, 64B 2, 128B 3.
MODES: dict[str, SwizzleMode] = {
    "none": SwizzleMode("none", 16, 0, 0, 0),
    "32B": SwizzleMode("32B", 32, 1, 3, 1),
    "64B": SwizzleMode("64B", 64, 2, 2, 2),
    "128B": SwizzleMode("128B", 128, 3, 1, 3),
}


def mode(name: str) -> SwizzleMode:
    """The mode a schedule's `swizzle=` names."""
    try:
        return MODES[name]
    except KeyError:
        raise LayoutError(f"unknown swizzle {name!r} (have: {', '.join(MODES)})") from None


def mode_for_descriptor(code: int) -> SwizzleMode:
    for m in MODES.values():
        if m.descriptor_code == code:
            return m
    raise LayoutError(f"descriptor swizzle code {code} is not 0..3")


@dataclass(frozen=True)
class KMajorTile:
    """A K-major operand tile in shared memory as a tensor-map copy leaves it.

    `rows` rows (M or N) of `cols` elements of `elem_bytes` each (K contiguous). The tile is
    cut into column *panels* of the swizzle width (a tensor-map box's inner extent may not
    exceed it): panel p holds bytes [p * width, (p + 1) * width) of every row, its rows
    `width` bytes apart, and panels follow each other (`rows * width` bytes apart). For
    "none" the panel is one 16-byte chunk wide: the 8x16-byte core matrices of the PTX
    ISA's no-swizzle canonical layout. `base` must sit on the pattern's repeat boundary (the
    shared-memory layout aligns swizzled buffers so, cakegov/lower/layout.py)."""

    base: int
    rows: int
    cols: int
    elem_bytes: int
    swizzle: SwizzleMode

    def __post_init__(self) -> None:
        if self.rows <= 0 or self.cols <= 0 or self.elem_bytes <= 0:
            raise LayoutError("a tile needs positive rows, columns and element size")
        if self.rows % ROWS_PER_ATOM:
            raise LayoutError(f"{self.rows} rows are not a multiple of {ROWS_PER_ATOM}")
        if (self.cols * self.elem_bytes) % self.swizzle.width:
            raise LayoutError(f"a row of {self.cols * self.elem_bytes} bytes is not a multiple "
                              f"of the {self.swizzle.name} panel width {self.swizzle.width}")
        if self.base % self.swizzle.repeat:
            raise LayoutError(f"tile base {self.base} is not on a {self.swizzle.repeat}-byte "
                              f"boundary ({self.swizzle.name} pattern repeat)")

    @property
    def row_bytes(self) -> int:
        return self.cols * self.elem_bytes

    @property
    def panel_bytes(self) -> int:
        return self.rows * self.swizzle.width

    @property
    def nbytes(self) -> int:
        return self.rows * self.row_bytes

    def logical(self, row: int, col: int) -> int:
        """The byte address of element (row, col) before the swizzle."""
        if not (0 <= row < self.rows and 0 <= col < self.cols):
            raise LayoutError(f"element ({row}, {col}) is outside a {self.rows}x{self.cols} "
                              "tile")
        byte = col * self.elem_bytes
        panel, within = divmod(byte, self.swizzle.width)
        return self.base + panel * self.panel_bytes + row * self.swizzle.width + within

    def address(self, row: int, col: int) -> int:
        """The physical byte address of element (row, col)."""
        return self.swizzle.apply(self.logical(row, col))
