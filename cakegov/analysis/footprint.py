"""Which thread of a role touches which bytes of a shared-memory operand.

A primitive's effects say how its operand elements are shared out among the role's
threads (`cakegov.plugin.Spread`), in the terms of the runtime its CUDA template calls
(`Smem::for_each`, the fragment layouts of `LFragLayout`, the `mma.sync.m16n8k16` operand
loads). This module turns that into concrete (byte, thread) pairs of one stage, computed
once per operand with numpy, the bytes where the buffer's lowered layout puts the
elements (swizzled buffers: `byte_map`), and answers the two questions the protocol analysis asks:
which bytes an access touches (a bit mask), and whether two accesses of the same role
touch a byte from *different* threads, and then from different lanes of one warp only or
from different warps (which decides the synchronisation that orders them: `__syncwarp`
or a barrier over the role)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

from cakegov.analysis.arrays import unique_sorted
from cakegov.ir.dtypes import dtype_bytes
from cakegov.lower.fragments import view_2d
from cakegov.lower.kernel import LBuffer, LFragLayout, LoweredKernel
from cakegov.lower.wgmma import accumulator_owner
from cakegov.plugin import Access

WARP = 32
# Elements of one operand or fragment the analysis computes per-thread pairs for. A real
# fragment is far smaller (the register file of an SM holds 65,536 32-bit registers) and
# shared-memory operands are bounded by R001 before any analysis; past this bound the
# analysis is incomplete (TooLarge), never clean and never a crash.
MAX_ELEMENTS = 1 << 22
ALL = -1  # every thread of the role touches every element
ENGINE = -2  # the asynchronous proxy (copy engine, tensor cores), not a thread


@dataclass(frozen=True, eq=False)  # identity: footprints are cached per operand
class Footprint:
    """The bytes of one stage an operand access touches, and by which role threads.

    `pairs` is None for the two uniform cases (`who` = ALL or ENGINE); otherwise an
    (n, 2) array of (byte, thread) with every byte repeated for each thread touching it."""

    nbytes: int  # bytes of the stage
    mask: int  # bit b set: byte b is touched
    who: int  # ALL, ENGINE, or 0 for a per-thread footprint in `pairs`
    pairs: np.ndarray | None = None


@cache
def _byte_map(rows: int, cols: int, dtype: str, swizzle: str, layout: str) -> np.ndarray | None:
    buf = LBuffer(name="", dtype=dtype, shape=(rows, cols), stages=1, offset=0,
                  stage_bytes=rows * cols * dtype_bytes(dtype), align=16, swizzle=swizzle,
                  layout=layout)  # type: ignore[arg-type]
    if buf.tile() is None:
        return None
    size = dtype_bytes(dtype)
    starts = np.array([buf.element_offset(r, c) for r in range(rows) for c in range(cols)],
                      dtype=np.int64)
    out = (starts[:, None] + np.arange(size)[None, :]).ravel()
    out.setflags(write=False)
    return out


def byte_map(buf: LBuffer) -> np.ndarray | None:
    """Where each byte of a stage lives: `map[b]` is the stage byte holding byte `b` of
    the row-major tile (element `b // size`, byte `b % size` of it), by the buffer's
    lowered layout (`LBuffer.element_offset`, the layout model); None for a row-major
    buffer (the identity). Elements never straddle a 16-byte chunk, so a swizzle moves
    them whole."""
    rows, cols = view_2d(buf.shape)
    return _byte_map(rows, cols, buf.dtype, buf.swizzle, buf.layout)


@cache
def _wgmma_owners(rows: int, cols: int, gm: int, gn: int, bm: int, bn: int, n: int
                  ) -> np.ndarray:
    block = np.array([[accumulator_owner(r, c, n)[0] for c in range(n)] for r in range(64)],
                     dtype=np.int64)  # thread of the warpgroup, PTX ISA Figure 149
    out = np.empty((rows, cols), dtype=np.int64)
    for g in range(gm * gn):
        gr, gc = (g // gn) * (rows // gm), (g % gn) * (cols // gn)
        for mi in range(bm):
            for ni in range(bn):
                r0, c0 = gr + 64 * mi, gc + n * ni
                out[r0:r0 + 64, c0:c0 + n] = g * 128 + block
    out.setflags(write=False)
    return out


class TooLarge(Exception):
    """An operand or fragment has more elements than MAX_ELEMENTS."""


def _bounded(what: str, n: int) -> None:
    if n > MAX_ELEMENTS:
        raise TooLarge(f"{what} has {n:,} elements, more than the analysis computes "
                       f"thread footprints for ({MAX_ELEMENTS:,})")


def owners(layout: LFragLayout) -> np.ndarray:
    """The role thread holding each element (row-major over `rows x cols`) of a fragment
    in `layout` (the runtime's FragFlat, FragRows, FragMma, FragWgmma)."""
    if layout.kind == "wgmma":
        return _wgmma_owners(layout.rows, layout.cols, layout.groups_m, layout.groups_n,
                             layout.blocks_m, layout.blocks_n, layout.inst_n).ravel()
    r, c = np.meshgrid(np.arange(layout.rows), np.arange(layout.cols), indexing="ij")
    if layout.kind == "flat":
        return ((r * layout.cols + c) % layout.threads).ravel()
    if layout.kind == "rows":
        return (r % layout.threads).ravel()
    bm, bn = layout.rows // layout.warps_m, layout.cols // layout.warps_n
    warp = (r // bm) * layout.warps_n + (c // bn)
    lane = (r % bm % 8) * 4 + (c % bn % 8) // 2
    return (warp * WARP + lane).ravel()


def _mma_loads(layout: LFragLayout, rows: int, cols: int, operand: str, transpose: bool
               ) -> tuple[np.ndarray, np.ndarray]:
    """(element, thread) pairs of the operand loads of `mma.sync.m16n8k16` for an
    accumulator in `layout` (the `mma` template: per 16-wide k step, lane l loads columns
    k + 2(l % 4) + {0, 1, 8, 9} of rows l / 4 (+ 8) of each 16-row A tile, and of row
    l / 4 of each 8-column B tile)."""
    threads = np.arange(layout.threads)
    warp, lane = threads // WARP, threads % WARP
    bm, bn = layout.rows // layout.warps_m, layout.cols // layout.warps_n
    k_depth = cols if operand == "a" or transpose else rows
    kk = np.arange(0, k_depth, 16)
    kcols = (2 * (lane % 4))[:, None, None] + kk[None, :, None] + \
        np.array([0, 1, 8, 9])[None, None, :]  # (threads, ksteps, 4)
    kcols = kcols.reshape(len(threads), -1)
    if operand == "a":
        mi = np.arange(layout.tiles_m)
        base = ((warp // layout.warps_n) * bm + lane // 4)[:, None] + 16 * mi[None, :]
        mrows = np.concatenate([base, base + 8], axis=1)  # (threads, 2 * tiles_m)
        elem = mrows[:, :, None] * cols + kcols[:, None, :]
    else:
        ni = np.arange(layout.tiles_n)
        n = ((warp % layout.warps_n) * bn + lane // 4)[:, None] + 8 * ni[None, :]
        if transpose:  # b is N x K
            elem = n[:, :, None] * cols + kcols[:, None, :]
        else:  # b is K x N
            elem = kcols[:, None, :] * cols + n[:, :, None]
    owner = np.broadcast_to(threads[:, None, None], elem.shape)
    elem, owner = elem.ravel(), owner.ravel()
    keep = (elem >= 0) & (elem < rows * cols)
    return elem[keep], owner[keep]


def _element_pairs(access: Access, shape: tuple[int, ...], threads: int,
                   layouts: dict[str, LFragLayout], origin: tuple[int, int] | None = None
                   ) -> tuple[int, np.ndarray | None, np.ndarray | None]:
    rows, cols = view_2d(shape)
    n = rows * cols
    spread = access.spread
    if spread.kind == "engine":
        return ENGINE, None, None
    if spread.kind == "all":
        return ALL, None, None
    _bounded(f"the operand `{access.name}`", n)
    if spread.kind == "each":
        elem = np.arange(n)
        return 0, elem, elem % threads
    layout = layouts.get(spread.fragment or "")
    if layout is None:  # no layout to follow: every thread may touch everything
        return ALL, None, None
    if spread.kind in ("mma_a", "mma_b"):
        if layout.kind != "mma":
            return ALL, None, None
        elem, who = _mma_loads(layout, rows, cols, spread.kind[-1], spread.transpose)
        return 0, elem, who
    _bounded(f"the fragment `{spread.fragment}`", layout.rows * layout.cols)
    own = owners(layout).reshape(layout.rows, layout.cols)
    if spread.tile is not None:  # the operand meets a window of the fragment
        r0, c0 = origin or (0, 0)
        t = spread.tile
        if r0 < 0 or c0 < 0 or r0 + t.rows > layout.rows or c0 + t.cols > layout.cols:
            return ALL, None, None  # out of range: H006 reports it
        own = own[r0:r0 + t.rows, c0:c0 + t.cols]
    if spread.kind == "owner":
        if own.shape != (rows, cols):
            return ALL, None, None
        return 0, np.arange(n), own.ravel()
    # rows_of: row r of the operand by the holders of row r of the fragment;
    # cols_of: row j of the operand by the holders of column j of the fragment
    holders = own if spread.kind == "rows_of" else own.T
    if holders.shape[0] != rows:
        return ALL, None, None
    elems, whos = [], []
    for r in range(rows):
        ts = unique_sorted(holders[r])
        row = np.arange(r * cols, (r + 1) * cols)
        elems.append(np.repeat(row, len(ts)))
        whos.append(np.tile(ts, cols))
    return 0, np.concatenate(elems), np.concatenate(whos)


def _to_mask(flags: np.ndarray) -> int:
    return int.from_bytes(np.packbits(flags, bitorder="little").tobytes(), "little")


def tile_origin(access: Access, evaluate) -> tuple[int, int] | None:
    """The origin of the fragment window an access's spread follows (`Spread.tile`),
    evaluated with `evaluate(expr)`; None when it follows a whole fragment."""
    tile = access.spread.tile
    if tile is None:
        return None
    return evaluate(tile.row0), evaluate(tile.col0)


def footprint(access: Access, dtype: str, shape: tuple[int, ...], threads: int,
              layouts: dict[str, LFragLayout], origin: tuple[int, int] | None = None,
              where: np.ndarray | None = None) -> Footprint:
    """The footprint of one shared-memory operand access on one stage (`origin`: of the
    fragment window the access follows, `tile_origin`); `where` maps row-major bytes to
    the stage bytes of the buffer's layout (`byte_map`)."""
    size = dtype_bytes(dtype)
    rows, cols = view_2d(shape)
    nbytes = rows * cols * size
    who, elem, owner = _element_pairs(access, shape, threads, layouts, origin)
    if elem is None or owner is None:
        return Footprint(nbytes, (1 << nbytes) - 1, who)
    byte = (elem[:, None] * size + np.arange(size)[None, :]).ravel()
    if where is not None:
        byte = where[byte]
    thread = np.repeat(owner, size)
    flags = np.zeros(nbytes, dtype=bool)
    flags[byte] = True
    return Footprint(nbytes, _to_mask(flags), 0, np.stack([byte, thread], axis=1))


# ---- the ordering two accesses of one role need --------------------------------------

SAME, LANES, WARPS = 0, 1, 2
ORDER_NAMES = ("the same thread", "different lanes of one warp", "different warps")


def _span(fp: Footprint, nbytes: int, threads: int) -> tuple[np.ndarray, np.ndarray]:
    """Per byte: the lowest and highest thread touching it (threads + 1 / -1: none)."""
    lo = np.full(nbytes, threads + 1, dtype=np.int64)
    hi = np.full(nbytes, -1, dtype=np.int64)
    if fp.who == ALL:
        lo[:fp.nbytes], hi[:fp.nbytes] = 0, threads - 1
    elif fp.pairs is not None:
        np.minimum.at(lo, fp.pairs[:, 0], fp.pairs[:, 1])
        np.maximum.at(hi, fp.pairs[:, 0], fp.pairs[:, 1])
    return lo, hi


def crossing(a: Footprint, b: Footprint, shift: int, threads: int) -> int:
    """How far apart the threads are that touch a common byte in `a` and in `b` (b's
    bytes sit `shift` bytes after a's): SAME when every common byte is touched by one
    and the same thread in both, LANES when only lanes of one warp differ, else WARPS.
    Engine footprints are not threads of the role and never cross."""
    if a.who == ENGINE or b.who == ENGINE:
        return SAME
    start = min(0, shift)
    size = max(a.nbytes, shift + b.nbytes) - start
    alo, ahi = _shifted(a, -start, size, threads)
    blo, bhi = _shifted(b, shift - start, size, threads)
    common = (ahi >= 0) & (bhi >= 0)
    if not common.any():
        return SAME
    lo = np.minimum(alo, blo)[common]
    hi = np.maximum(ahi, bhi)[common]
    if (lo == hi).all():
        return SAME
    return LANES if (lo // WARP == hi // WARP).all() else WARPS


def _shifted(fp: Footprint, offset: int, size: int, threads: int
             ) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = _span(fp, fp.nbytes, threads)
    out_lo = np.full(size, threads + 1, dtype=np.int64)
    out_hi = np.full(size, -1, dtype=np.int64)
    out_lo[offset:offset + fp.nbytes] = lo
    out_hi[offset:offset + fp.nbytes] = hi
    return out_lo, out_hi


class Footprints:
    """Footprints of every shared-memory operand access of one lowered kernel, computed
    on first use and cached by (statement, operand)."""

    def __init__(self, kernel: LoweredKernel):
        self.kernel = kernel
        self.layouts = {f.name: f.layout for f in kernel.fragments if f.layout is not None}
        self.threads = {r.name: r.warps * WARP for r in kernel.roles}
        self._cache: dict[tuple, Footprint] = {}
        self._restricted: dict[tuple[Footprint, tuple[int, ...]], Footprint] = {}
        # per kernel, never per process: footprints compare by identity, so a process-wide
        # cache would keep every footprint (and its pairs array) of every schedule alive
        self._crossings: dict[tuple[Footprint, Footprint, int, int], int] = {}

    def of(self, role: str, path: str, index: int, write: bool, access: Access,
           origin: tuple[int, int] | None = None) -> Footprint:
        key = (path, index, write) if origin is None else (path, index, write, origin)
        if key not in self._cache:
            buf = self.kernel.buffer(access.name)
            assert buf is not None
            self._cache[key] = footprint(access, buf.dtype, buf.shape,
                                         self.threads.get(role, WARP), self.layouts, origin,
                                         byte_map(buf))
        return self._cache[key]

    def restrict(self, fp: Footprint, warps: tuple[int, ...]) -> Footprint:
        """The part of `fp` that the role's warps `warps` touch (a class of a role split by
        `with lm.warps(...)`); thread numbers stay the role's."""
        if fp.who in (ALL, ENGINE) or fp.pairs is None:
            return fp
        key = (fp, warps)
        if key not in self._restricted:
            keep = np.isin(fp.pairs[:, 1] // WARP, np.asarray(warps))
            pairs = fp.pairs[keep]
            flags = np.zeros(fp.nbytes, dtype=bool)
            flags[pairs[:, 0]] = True
            self._restricted[key] = Footprint(fp.nbytes, _to_mask(flags), 0, pairs)
        return self._restricted[key]

    def engine(self, buffer: str) -> Footprint:
        """A whole stage written or read by the asynchronous proxy (bulk copies)."""
        key = (f"engine:{buffer}", 0, False)
        if key not in self._cache:
            buf = self.kernel.buffer(buffer)
            assert buf is not None
            self._cache[key] = Footprint(buf.stage_bytes, (1 << buf.stage_bytes) - 1, ENGINE)
        return self._cache[key]

    def crossing(self, a: Footprint, b: Footprint, shift: int, threads: int) -> int:
        key = (a, b, shift, threads)
        if key not in self._crossings:
            self._crossings[key] = crossing(a, b, shift, threads)
        return self._crossings[key]
