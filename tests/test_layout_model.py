"""The layout model (cakegov/lower/swizzle.py, cakegov/lower/wgmma.py) against the PTX ISA.

Hand-worked values are cited next to each test: the PTX ISA sections "Shared Memory Matrix
Layout" / "Canonical Layouts" (worked examples for K-major tf32), "Matrix Descriptor
Format", Figure 149 (m64nNk16 accumulator D), and CUTLASS cute/swizzle.hpp for
Swizzle<B, 4, 3>. Property tests (hypothesis) check that every swizzle is a bijection on its
atom that moves whole 16-byte chunks, that descriptors round-trip, and that the addresses a
descriptor makes wgmma read equal the addresses a tensor-map copy wrote. CPU only."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cakegov.lower.swizzle import MODES, KMajorTile, LayoutError, mode
from cakegov.lower.wgmma import (
    VALID_N,
    MatrixDescriptor,
    accumulator_element,
    accumulator_owner,
    accumulator_registers,
    encode_field,
    kmajor_descriptor,
)

SWIZZLED = ("32B", "64B", "128B")

# ---- swizzle patterns ------------------------------------------------------------------


@pytest.mark.parametrize(("name", "logical", "physical"), [
    # 128B = Swizzle<3,4,3>: chunk (bits 4-6) ^= row of 128 bytes (bits 7-9)
    ("128B", 0x000, 0x000), ("128B", 0x080, 0x090), ("128B", 0x1D0, 0x1E0),
    ("128B", 7 * 128, 7 * 128 + 7 * 16), ("128B", 1024 + 128 + 5, 1024 + 128 + 16 + 5),
    # 64B = Swizzle<2,4,3>: chunk (bits 4-5) ^= bits 7-8 (= 64-byte row / 2)
    ("64B", 64, 64), ("64B", 128, 144), ("64B", 3 * 128 + 48, 3 * 128 + 0),
    # 32B = Swizzle<1,4,3>: chunk (bit 4) ^= bit 7 (= 32-byte row / 4)
    ("32B", 96, 96), ("32B", 128, 144), ("32B", 128 + 16, 128),
    ("none", 0x1D0, 0x1D0),
])
def test_swizzle_hand_worked_values(name, logical, physical):
    # e.g. 0x1D0 = row 3 (of 128 B), chunk 5: 5 ^ 3 = 6 -> 3 * 128 + 6 * 16 = 0x1E0
    assert mode(name).apply(logical) == physical


def test_swizzle_codes_follow_ptx_and_the_driver_api():
    # PTX "Matrix Descriptor Format": 0 none, 1 128B, 2 64B, 3 32B;
    # CUtensorMapSwizzle: NONE 0, 32B 1, 64B 2, 128B 3; repeats 1024/512/256 bytes
    assert {m.name: m.descriptor_code for m in MODES.values()} == {
        "none": 0, "128B": 1, "64B": 2, "32B": 3}
    assert {m.name: m.tensor_map_code for m in MODES.values()} == {
        "none": 0, "32B": 1, "64B": 2, "128B": 3}
    assert {n: MODES[n].repeat for n in SWIZZLED} == {"32B": 256, "64B": 512, "128B": 1024}


@given(st.sampled_from(list(MODES)), st.integers(0, 200))
def test_every_swizzle_is_a_bijection_on_its_atom(name, atom):
    m = mode(name)
    base = atom * m.repeat
    image = [m.apply(base + a) for a in range(m.repeat)]
    assert sorted(image) == list(range(base, base + m.repeat))


@given(st.sampled_from(list(MODES)), st.integers(0, 1 << 17))
def test_a_swizzle_moves_whole_16_byte_chunks(name, address):
    m = mode(name)
    chunk = address & ~15
    assert m.apply(address) == m.apply(chunk) + (address & 15)
    assert m.apply(m.apply(address)) == address  # an XOR with higher bits: an involution


def test_128b_swizzle_spreads_a_column_of_chunks_over_all_banks():
    # why 128B swizzle exists: 8 rows' chunk c land in 8 distinct 16-byte bank groups
    m = mode("128B")
    for c in range(8):
        groups = {m.apply(r * 128 + c * 16) % 128 // 16 for r in range(8)}
        assert len(groups) == 8
    plain = {r * 128 % 128 // 16 for r in range(8)}
    assert len(plain) == 1  # unswizzled: all eight in one group (8-way conflict)


def test_unknown_swizzle_and_misplaced_tiles_are_refused():
    with pytest.raises(LayoutError, match="unknown swizzle"):
        mode("16B")
    with pytest.raises(LayoutError, match="1024-byte boundary"):
        KMajorTile(base=512, rows=64, cols=64, elem_bytes=2, swizzle=mode("128B"))
    with pytest.raises(LayoutError, match="multiple of 8"):
        KMajorTile(base=0, rows=12, cols=64, elem_bytes=2, swizzle=mode("128B"))
    with pytest.raises(LayoutError, match="panel width"):
        KMajorTile(base=0, rows=64, cols=40, elem_bytes=2, swizzle=mode("128B"))


# ---- descriptors -----------------------------------------------------------------------


def test_descriptor_bits_hand_worked():
    # start 0x400 -> 0x40; LBO 16 -> 1; SBO 1024 -> 64; 128B -> 1 in bits 62-63
    d = MatrixDescriptor(start=0x400, lbo=16, sbo=1024, swizzle=mode("128B"))
    assert d.encode() == 0x40 | 1 << 16 | 64 << 32 | 1 << 62 == 0x4000_0040_0001_0040
    assert MatrixDescriptor.decode(d.encode()) == d


def test_ptx_example_k_major_no_swizzle_tf32():
    # PTX ISA "Canonical Layouts", example "K-Major, no-swizzling and tf32 type":
    # Swizzle<0,4,3> o ((8,2),(4,4)):((4,32),(1,64)); LBO = 64*4 B (encoded 16),
    # SBO = 32*4 B (encoded 8)
    d = MatrixDescriptor(start=0, lbo=64 * 4, sbo=32 * 4, swizzle=mode("none"))
    assert (encode_field(d.lbo, "lbo"), encode_field(d.sbo, "sbo")) == (16, 8)
    for r in range(16):
        for k in range(16):
            elem = (r % 8) * 4 + (r // 8) * 32 + (k % 4) * 1 + (k // 4) * 64
            assert d.address(r, 4 * k) == 4 * elem


def test_ptx_example_k_major_32b_swizzle_tf32():
    # PTX ISA example "K-Major, 32B swizzling and tf32 type": Swizzle<1,4,3> o
    # ((8,2),(4,4)):((8,64),(1,4)); SBO = 64*4 B (encoded 16), LBO unused ("assumed 1").
    # Checked over one swizzle row of K (8 tf32 = 32 B), the span one descriptor covers.
    d = MatrixDescriptor(start=0, lbo=16, sbo=64 * 4, swizzle=mode("32B"))
    assert (encode_field(d.lbo, "lbo"), encode_field(d.sbo, "sbo")) == (1, 16)
    for r in range(16):
        for k in range(8):
            elem = (r % 8) * 8 + (r // 8) * 64 + (k % 4) * 1 + (k // 4) * 4
            assert d.address(r, 4 * k) == mode("32B").apply(4 * elem)


sixteen = st.integers(0, (1 << 14) - 1).map(lambda v: v << 4)


@given(sixteen, sixteen, sixteen, st.sampled_from(list(MODES)), st.integers(0, 7))
def test_descriptor_round_trips(start, lbo, sbo, name, base_offset):
    d = MatrixDescriptor(start, lbo, sbo, mode(name), base_offset)
    value = d.encode()
    assert 0 <= value < 1 << 64
    assert MatrixDescriptor.decode(value) == d


def test_descriptor_fields_refuse_what_they_cannot_hold():
    with pytest.raises(LayoutError, match="multiple of 16"):
        MatrixDescriptor(8, 16, 1024, mode("128B")).encode()
    with pytest.raises(LayoutError, match="multiple of 16"):
        MatrixDescriptor(1 << 18, 16, 1024, mode("128B")).encode()
    with pytest.raises(LayoutError, match="reserved"):
        MatrixDescriptor.decode(1 << 15)


@pytest.mark.parametrize("name", list(MODES))
@pytest.mark.parametrize("cols", [64, 128])
def test_descriptor_addresses_equal_the_tensor_map_tile(name, cols):
    """For every (row, K element) of every m64 K slice of a bf16 tile of 128 rows: the byte
    the descriptor makes wgmma read is the byte the tensor-map copy wrote that element to."""
    tile = KMajorTile(base=2048, rows=128, cols=cols, elem_bytes=2, swizzle=mode(name))
    steps = tile.row_bytes // 32
    for step in range(steps):
        for row0 in (0, 64):
            d = kmajor_descriptor(tile, step, row0)
            assert MatrixDescriptor.decode(d.encode()) == d
            seen = set()
            for r in range(64):
                for k in range(16):
                    got = d.address(r, 2 * k)
                    assert got == tile.address(row0 + r, step * 16 + k), (step, row0, r, k)
                    seen.add(got)
            assert len(seen) == 64 * 16  # no two elements read from one byte pair


@pytest.mark.parametrize("name", SWIZZLED)
def test_swizzled_descriptors_match_cutlass_conventions(name):
    tile = KMajorTile(base=0, rows=128, cols=64, elem_bytes=2, swizzle=mode(name))
    width = mode(name).width
    d = kmajor_descriptor(tile, 0)
    # SBO: 8 rows of the swizzle width (1024 B for 128B: CUTLASS's "stride_byte_offset =
    # 64" in 16-byte units); LBO assumed 1 (PTX: unused for swizzled K-major)
    assert (d.sbo, d.lbo) == (8 * width, 16)
    # advancing K by 16 bf16 inside a swizzle row adds 32 bytes to the start address
    if width > 32:
        assert kmajor_descriptor(tile, 1).start == d.start + 32


# ---- the accumulator -------------------------------------------------------------------


def test_accumulator_hand_worked_from_figure_149():
    # thread 0: (0,0) (0,1) (8,0) (8,1), then the same 8 columns over
    assert [accumulator_element(0, i, 16) for i in range(8)] == [
        (0, 0), (0, 1), (8, 0), (8, 1), (0, 8), (0, 9), (8, 8), (8, 9)]
    # thread 5 (warp 0, lane 5: row 1, columns 2-3)
    assert [accumulator_element(5, i, 8) for i in range(4)] == [(1, 2), (1, 3), (9, 2), (9, 3)]
    # thread 127 (warp 3, lane 31): rows 48+7 and 48+15, columns 6-7
    assert [accumulator_element(127, i, 8) for i in range(4)] == [
        (55, 6), (55, 7), (63, 6), (63, 7)]
    assert accumulator_registers(256) == 128


@pytest.mark.parametrize("n", VALID_N)
def test_accumulator_covers_the_tile_once(n):
    cells = {}
    for t in range(128):
        for i in range(accumulator_registers(n)):
            cell = accumulator_element(t, i, n)
            assert cell not in cells
            cells[cell] = (t, i)
            assert accumulator_owner(*cell, n) == (t, i)
    assert set(cells) == {(r, c) for r in range(64) for c in range(n)}


def test_accumulator_refuses_invalid_shapes():
    with pytest.raises(LayoutError, match="not a wgmma N"):
        accumulator_registers(12)
    with pytest.raises(LayoutError, match="thread"):
        accumulator_element(128, 0, 8)


def test_the_shared_memory_layout_aligns_swizzled_buffers_to_the_model_repeat():
    # cakegov/lower/layout.py places every swizzled buffer on its pattern boundary, which
    # KMajorTile requires (base offset 0 in every descriptor)
    from cakegov.lower.layout import SWIZZLE_REPEAT

    assert {n: MODES[n].repeat for n in SWIZZLED} == SWIZZLE_REPEAT
