"""Shared-memory layout: where every buffer stage and every mbarrier lives.

This is the one derivation of offsets in the project: the checker's capacity rule, the
protocol analysis and the CUDA emitter all read it. Buffers are placed in declaration
order, each aligned to the larger of its declared alignment and its swizzle repeat; the
mbarriers (8 bytes each; a pipeline owns a full and an empty barrier per stage) follow.
A buffer that a tensor-map copy fills or drains is aligned to at least 128 bytes (a root
too, when a view aliasing it is such a buffer).
The dynamic shared-memory window is only guaranteed 16-byte aligned, so when a buffer
needs more, the kernel rounds its base up at run time and the layout reserves the
worst-case slack of `max_align - 16` bytes.

A schedule with a zero-padded load (`pad=True`) that stays on the row-wise bulk-copy path
(a 1-D tensor, a tile no tensor map takes: cakegov/lower/tma.py) also gets a *zero row*
after the barriers: as many zero bytes as the widest such tile row, 16-byte aligned. The
lowered kernel fills the part of a tail tile outside the tensor with bulk copies from this
row (shared to shared), so every tile delivers exactly its full byte count to its mbarrier
(see docs/lowering.md, "Tail tiles"). Tensor-map loads need no zero row: the hardware fills
the out-of-bounds part of a box with zeros and still completes its full bytes."""

from __future__ import annotations

from dataclasses import dataclass

from cakegov.ir.nodes import (
    SWIZZLE_BYTES,
    MBarrierDecl,
    PipelineDecl,
    Schedule,
    SmemDecl,
)
from cakegov.lower.tma import TMA_SMEM_ALIGN, needs_zero_row, tensor_map_buffers

BASE_ALIGN = 16  # what the CUDA runtime guarantees for extern __shared__ arrays
MBARRIER_BYTES = 8

# The byte length over which each swizzle pattern repeats (8 rows of the swizzle width).
SWIZZLE_REPEAT = {name: 8 * width for name, width in SWIZZLE_BYTES.items() if width}


@dataclass(frozen=True)
class BufferSlot:
    name: str
    offset: int
    stage_bytes: int
    stages: int
    align: int
    padding: int  # bytes skipped before this buffer to reach `align`
    alias: str | None = None  # the view whose storage this one reuses (same offset)

    @property
    def bytes(self) -> int:
        return self.stage_bytes * self.stages

    def stage_offset(self, stage: int) -> int:
        return self.offset + stage * self.stage_bytes


@dataclass(frozen=True)
class BarrierSlot:
    name: str  # raw mbarrier name, or `<pipeline>.full` / `<pipeline>.empty`
    offset: int
    count: int  # number of mbarriers (stages)


@dataclass(frozen=True)
class SmemLayout:
    buffers: tuple[BufferSlot, ...]
    barriers: tuple[BarrierSlot, ...]
    data_bytes: int  # buffer bytes, excluding padding
    padding_bytes: int  # alignment padding between slots
    barrier_bytes: int
    base_slack: int  # run-time base alignment reserve
    total_bytes: int
    zero_offset: int = 0  # the zero row for padded loads (0 bytes when there is none)
    zero_bytes: int = 0

    def buffer(self, name: str) -> BufferSlot | None:
        return next((b for b in self.buffers if b.name == name), None)


def buffer_alignment(decl: SmemDecl, tensor_map: bool = False) -> int:
    """The larger of the declared alignment, the swizzle repeat and 16; at least 128 for a
    buffer a tensor-map copy fills or drains (`tensor_map`: its shared-memory address must
    be 128-byte aligned, cakegov/lower/tma.py)."""
    return max(decl.align, SWIZZLE_REPEAT.get(decl.swizzle, 0), BASE_ALIGN,
               TMA_SMEM_ALIGN if tensor_map else 0)


def _round_up(value: int, align: int) -> int:
    return -(-value // align) * align


def zero_row_bytes(schedule: Schedule) -> int:
    """Bytes of the zero row: the widest row of a buffer that a `pad=True` load fills on
    the row-wise path, rounded up to 16 (0 when no such load pads)."""
    widest = max((decl.row_bytes for decl in needs_zero_row(schedule)), default=0)
    return _round_up(widest, BASE_ALIGN)


def smem_layout(schedule: Schedule) -> SmemLayout:
    """The shared-memory layout of `schedule`."""
    tma = tensor_map_buffers(schedule)
    need: dict[str, int] = {}
    for decl in schedule.resources:
        if isinstance(decl, SmemDecl):
            need[decl.name] = buffer_alignment(decl, decl.name in tma)
            # a root is aligned for the tensor-map copies of the views that alias it (the
            # other alignments an alias needs are the schedule's to meet: rule R010)
            if decl.alias in need and decl.name in tma:
                need[decl.alias] = max(need[decl.alias], TMA_SMEM_ALIGN)
    offset = 0
    buffers: list[BufferSlot] = []
    padding = 0
    max_align = BASE_ALIGN
    slots: dict[str, BufferSlot] = {}
    for decl in schedule.resources:
        if not isinstance(decl, SmemDecl):
            continue
        root = slots.get(decl.alias) if decl.alias else None
        if root is not None:
            # an alias starts at its root's offset and takes no storage of its own; one
            # larger than its root (rule R010) still ends inside the layout
            slot = BufferSlot(decl.name, root.offset, decl.stage_bytes, decl.stages,
                              need[decl.name], 0, alias=root.name)
            buffers.append(slot)
            slots[decl.name] = slot
            max_align = max(max_align, slot.align)
            offset = max(offset, slot.offset + slot.bytes)
            continue
        align = need[decl.name]
        max_align = max(max_align, align)
        start = _round_up(offset, align)
        padding += start - offset
        slot = BufferSlot(decl.name, start, decl.stage_bytes, decl.stages, align,
                          start - offset)
        buffers.append(slot)
        slots[decl.name] = slot
        offset = start + decl.stage_bytes * decl.stages
    start = _round_up(offset, MBARRIER_BYTES)
    padding += start - offset
    offset = start
    barriers: list[BarrierSlot] = []
    for decl in schedule.resources:
        if isinstance(decl, MBarrierDecl):
            barriers.append(BarrierSlot(decl.name, offset, decl.stages))
            offset += MBARRIER_BYTES * decl.stages
        elif isinstance(decl, PipelineDecl):
            for side in ("full", "empty"):
                barriers.append(BarrierSlot(f"{decl.name}.{side}", offset, decl.stages))
                offset += MBARRIER_BYTES * decl.stages
    zero_bytes = zero_row_bytes(schedule)
    zero_offset = 0
    if zero_bytes:
        zero_offset = _round_up(offset, BASE_ALIGN)
        padding += zero_offset - offset
        offset = zero_offset + zero_bytes
    # the union counts once: an alias's bytes beyond its root's (R010) are counted too
    data = sum(b.bytes for b in buffers if b.alias is None) + sum(
        max(0, b.bytes - slots[b.alias].bytes) for b in buffers if b.alias is not None)
    barrier_bytes = sum(b.count for b in barriers) * MBARRIER_BYTES
    slack = max_align - BASE_ALIGN
    return SmemLayout(tuple(buffers), tuple(barriers), data, padding, barrier_bytes, slack,
                      offset + slack, zero_offset, zero_bytes)
