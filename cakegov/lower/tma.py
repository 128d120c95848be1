"""Tensor-map (TMA) copies: which loads and bulk stores become `cp.async.bulk.tensor`, the
boxes each one issues, and which buffers hold the swizzled layout.

One derivation, read by the shared-memory layout (a zero row only for what tensor maps
cannot express), the lowering (`LCopy.tma`, `LCompute.tma`, `LBuffer.layout`), the
emitter, the simulator and the GPU runner (the `CUtensorMap` parameters).

Hardware facts (CUDA driver API, `cuTensorMapEncodeTiled`; PTX ISA 9.7.9.27
"cp.async.bulk.tensor"):
- a box has at most 256 elements along every dimension, and its inner extent in bytes is
  a multiple of 16;
- with a swizzle mode the inner extent is at most the swizzle width (32, 64 or 128 bytes);
  the box then lands in shared memory as rows of that width with the 16-byte chunks of
  row r permuted by `Swizzle<B, 4, 3>` (cakegov/lower/swizzle.py) — exactly the K-major
  tile `KMajorTile` models, one box per column panel;
- without a swizzle a box lands densely, row after row: for a box as wide as the tile,
  the row-major layout the row-wise bulk copies produce;
- elements of a box outside the tensor are filled with zeros (`oobFill` NONE) and still
  count towards the bytes the copy completes on its mbarrier, so a tail tile delivers its
  full stage bytes with no zero row (docs/lowering.md, "Tail tiles");
- a tensor store (`cp.async.bulk.tensor...global.shared::cta.bulk_group`) writes only the
  elements inside the tensor;
- the shared-memory address of every box is 128-byte aligned (`TMA_SMEM_ALIGN`), the
  global address and row pitch 16-byte aligned (checked on the host, cakegov/gpu/tensormap.py).

What tensor maps do not take here, and so keeps the row-wise `cp.async.bulk` path (with
its zero row for `pad=True`): a copy from or to a 1-D tensor (the issue scopes tensor maps
to tensors of two or more dimensions), an element type without a `CUtensorMapDataType`,
a tile whose rows are wider than 256 elements or not a multiple of 16 bytes, and a
multi-stage buffer whose stages are not 128-byte multiples. A buffer
declared with a swizzle keeps the row-major layout when any copy into or out of it stays
row-wise, or when its tile is not a whole number of 8-row swizzle atoms; the reason is
recorded (`LBuffer.note`) and printed by `cakegov lower`."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from cakegov.ir.dtypes import dtype_bytes
from cakegov.ir.nodes import CoordValue, Schedule, SmemDecl, SmemRef, Stmt
from cakegov.ir.parse import walk_statements
from cakegov.lower.swizzle import CHUNK_BYTES, ROWS_PER_ATOM, LayoutError, SwizzleMode
from cakegov.lower.swizzle import mode as swizzle_mode

BOX_MAX = 256  # elements per box dimension (cuTensorMapEncodeTiled: boxDim[i] <= 256)
# The shared-memory address of a tensor-map copy must be 128-byte aligned (CUDA C++
# Programming Guide, "Using TMA to transfer multi-dimensional arrays", alignment table);
# the layout aligns such buffers so, and every stage and box must keep it.
TMA_SMEM_ALIGN = 128

# CUtensorMapDataType enumerators (CUDA driver API): tensor maps move bytes, so the fp8
# formats and 8-bit integers travel as UINT8.
TENSOR_MAP_DTYPES: dict[str, int] = {
    "u8": 0, "i8": 0, "f8e4m3": 0, "f8e5m2": 0,
    "u32": 2, "i32": 3, "f16": 6, "f32": 7, "f64": 8, "bf16": 9,
}

# The primitives whose shared-memory operand a tensor map fills or drains, and the name
# of that operand.
TMA_COPIES = {"load": "dst", "store_async": "src"}


@dataclass(frozen=True)
class Box:
    """One box of a tile: origin (row, col) in the tile, byte offset in the stage."""

    offset: int
    row: int
    col: int


@dataclass(frozen=True)
class TilePlan:
    """How one stage of a buffer moves through a tensor map."""

    box_rows: int
    box_cols: int
    swizzle: SwizzleMode
    boxes: tuple[Box, ...]


def copy_tile(decl: SmemDecl) -> tuple[int, int]:
    """The tile a copy moves: `rows x cols` with `cols` the innermost extent (a 1-D buffer
    of n elements is one row of n, as the row-wise copies see it)."""
    cols = decl.shape[-1]
    return decl.stage_bytes // decl.row_bytes, cols


def swizzle_problem(decl: SmemDecl) -> str | None:
    """Why `decl`'s tile cannot hold its declared swizzle pattern (None: it can)."""
    try:
        sw = swizzle_mode(decl.swizzle)
    except LayoutError as exc:
        return str(exc)
    rows, _cols = copy_tile(decl)
    if len(decl.shape) != 2:
        return f"a {len(decl.shape)}-D tile (the swizzled layout is modelled for 2-D tiles)"
    if decl.row_bytes % sw.width:
        return (f"its rows are {decl.row_bytes} bytes, not a multiple of the {sw.width}-byte "
                f"{sw.name} swizzle width")
    if rows % ROWS_PER_ATOM:
        return f"{rows} rows are not a whole number of {ROWS_PER_ATOM}-row swizzle atoms"
    return None


def tile_plan(decl: SmemDecl, swizzled: bool) -> TilePlan | str:
    """The boxes of one stage of `decl` (the swizzled panels when `swizzled`, else one box
    as wide as the row), or why a tensor map cannot move it."""
    if decl.dtype not in TENSOR_MAP_DTYPES:
        return f"{decl.dtype} has no tensor-map element type"
    rows, cols = copy_tile(decl)
    elem = dtype_bytes(decl.dtype)
    if decl.stages > 1 and decl.stage_bytes % TMA_SMEM_ALIGN:
        return (f"its stages of {decl.stage_bytes} bytes would put later stages off the "
                f"{TMA_SMEM_ALIGN}-byte alignment tensor-map copies need")
    box_rows = min(rows, BOX_MAX)
    if rows % box_rows:
        return (f"{rows} rows do not split into boxes of at most {BOX_MAX} rows of equal "
                "height")
    if swizzled:
        sw = swizzle_mode(decl.swizzle)
        panel_cols = sw.width // elem
        panels = decl.row_bytes // sw.width
        boxes = tuple(Box(offset=p * rows * sw.width + q * box_rows * sw.width,
                          row=q * box_rows, col=p * panel_cols)
                      for p in range(panels) for q in range(rows // box_rows))
        return TilePlan(box_rows, panel_cols, sw, boxes)
    if cols > BOX_MAX:
        return f"rows of {cols} elements are wider than a box ({BOX_MAX} elements)"
    if decl.row_bytes % CHUNK_BYTES:
        return f"rows of {decl.row_bytes} bytes are not a multiple of 16 bytes"
    boxes = tuple(Box(offset=q * box_rows * decl.row_bytes, row=q * box_rows, col=0)
                  for q in range(rows // box_rows))
    return TilePlan(box_rows, cols, swizzle_mode("none"), boxes)


@dataclass(frozen=True)
class BufferLayout:
    """The lowered layout of one buffer: swizzled or row-major, with the reason a
    declared swizzle is not applied."""

    swizzled: bool
    note: str = ""


def _copies(schedule: Schedule) -> Iterator[tuple[Stmt, str, int]]:
    """Every load and bulk store with its buffer and the rank of its tensor (the number
    of coordinates in `at`)."""
    for role in schedule.roles:
        for stmt, _ in walk_statements(role.body):
            operand = TMA_COPIES.get(getattr(stmt, "primitive", ""))
            if operand is None:
                continue
            ref, at = stmt.args.get(operand), stmt.args.get("at")
            if isinstance(ref, SmemRef) and isinstance(at, CoordValue):
                yield stmt, ref.name, len(at.items)


def rank_problem(rank: int) -> str | None:
    if rank != 2:
        return (f"a {rank}-D tensor (tensor maps are used for 2-D tensors; the row-wise "
                "cp.async.bulk path remains for the rest)")
    return None


def buffer_layouts(schedule: Schedule) -> dict[str, BufferLayout]:
    """The layout of every shared-memory buffer: swizzled when it declares a swizzle, its
    tile holds the pattern, and every copy into or out of it is a tensor-map copy."""
    decls = {d.name: d for d in schedule.resources if isinstance(d, SmemDecl)}
    blocked: dict[str, str] = {}
    for stmt, name, rank in _copies(schedule):
        decl = decls.get(name)
        if decl is None or decl.swizzle == "none" or name in blocked:
            continue
        why = rank_problem(rank)
        if why is None:
            plan = tile_plan(decl, swizzled=True) if swizzle_problem(decl) is None else None
            why = plan if isinstance(plan, str) else None
        if why is not None:
            verb = "loaded from" if stmt.primitive == "load" else "stored to"
            blocked[name] = f"{verb} {why}, line {stmt.span.line}"
    out: dict[str, BufferLayout] = {}
    for name, decl in decls.items():
        if decl.swizzle == "none":
            out[name] = BufferLayout(False)
            continue
        problem = swizzle_problem(decl) or blocked.get(name)
        out[name] = BufferLayout(problem is None, "" if problem is None else
                                 f"swizzle {decl.swizzle} not applied: {problem}; the "
                                 "buffer keeps the row-major layout (the swizzle only "
                                 "raises its alignment)")
    return out


def copy_plan(decl: SmemDecl, rank: int, layout: BufferLayout) -> TilePlan | str:
    """The tensor-map plan of one copy of `decl` from or to a tensor of `rank`
    dimensions, or why it stays on the row-wise path."""
    why = rank_problem(rank)
    if why is not None:
        return why
    return tile_plan(decl, layout.swizzled)


def tensor_map_buffers(schedule: Schedule) -> set[str]:
    """The buffers at least one tensor-map copy fills or drains."""
    decls = {d.name: d for d in schedule.resources if isinstance(d, SmemDecl)}
    layouts = buffer_layouts(schedule)
    return {name for _stmt, name, rank in _copies(schedule) if name in decls
            and not isinstance(copy_plan(decls[name], rank, layouts[name]), str)}


def needs_zero_row(schedule: Schedule) -> list[SmemDecl]:
    """The buffers that a `pad=True` load fills on the row-wise path (the only loads
    that need the kernel's zero row)."""
    decls = {d.name: d for d in schedule.resources if isinstance(d, SmemDecl)}
    layouts = buffer_layouts(schedule)
    out = []
    for stmt, name, rank in _copies(schedule):
        pad = stmt.args.get("pad")
        decl = decls.get(name)
        if stmt.primitive != "load" or decl is None or not getattr(pad, "value", False):
            continue
        if isinstance(copy_plan(decl, rank, layouts[name]), str):
            out.append(decl)
    return out
