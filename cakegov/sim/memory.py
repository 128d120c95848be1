"""Memory of one simulated kernel: the CTA's shared memory as ONE byte array at the
lowered offsets, its shadow (who wrote and read each granule, under which proxy), the
global tensors, and the register fragments.

Shared memory is `kernel.smem_bytes` bytes; a buffer stage lives at `LBuffer.offset +
stage * stage_bytes`, its elements where the buffer's lowered layout puts them
(`LBuffer.layout`: row-major, or the swizzled K-major tile a tensor-map copy leaves, by the
layout model: cakegov/analysis/footprint.py `byte_map`), so overlapping buffers, a wrong
stage offset or a wrong layout in the lowering show up as wrong results or races, not as
a second idea of the layout. It starts poisoned
(0xFF, a NaN in every float encoding) except the zero row the kernel prologue writes.

The shadow works on granules of `gcd(element sizes)` bytes (no element is narrower):
`wthr`/`wclk` hold the last writer's vector-clock thread and clock, `wgen` whether that
write went through the generic proxy, `rclk[t]` the clock of thread t's last read. An
access by thread t whose vector clock is V conflicts with the last write when
`wclk > V[wthr]`, and a write conflicts with thread u's read when `rclk[u] > V[u]`
(FastTrack-style detection over a full read vector). Async-proxy reads of bytes whose
last write was generic also need that writer's `fence.proxy.async` between the write and
the hand-off (PTX ISA, "Memory Consistency Model: proxies"; fence.proxy.async), and so
does an async-proxy write (a copy landing in a stage) of bytes other threads read or wrote
through the generic proxy: each of them must have fenced after its access, before the
hand-off that ordered the copy's issue (`rgen[t]`: thread t's last read was generic).

Element encodings follow the device: f32 and i32 as themselves, f16 through numpy's
float16 (round to nearest even) and bf16 as the 16-bit patterns of cakegov/gpu/data.py
(round to nearest even, not truncation)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from cakegov.analysis.footprint import byte_map
from cakegov.analysis.semantics import proxy_fenced
from cakegov.gpu.data import bf16_bits, bf16_values
from cakegov.ir.dtypes import dtype_bytes
from cakegov.ir.fp8 import FORMATS as FP8
from cakegov.ir.fp8 import fp8_bits, fp8_round, fp8_values
from cakegov.lower.fragments import view_2d
from cakegov.lower.kernel import LFragment, LoweredKernel
from cakegov.sim.state import OOB, RACE, UNINIT

NEVER = -1  # granule never written
PROLOGUE = -2  # written by the kernel prologue (ordered before everything)

_STORAGE = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16, "i32": np.int32,
            "u32": np.uint32, "i8": np.int8, "u8": np.uint8, "f64": np.float64,
            "f8e4m3": np.uint8, "f8e5m2": np.uint8}
_INTS = {"i32", "u32", "i8", "u8"}


def values_dtype(dtype: str) -> type[np.generic]:
    """The numpy type holding an element's value: float32 for 16/32-bit floats."""
    if dtype in _INTS:
        return np.int64 if dtype == "u32" else np.int32
    return np.float64 if dtype == "f64" else np.float32


def round_to(dtype: str, values: np.ndarray) -> np.ndarray:
    """`values` rounded to `dtype` (nearest even for floats, C truncation for integers),
    returned as the value type (float32 for f16/bf16)."""
    v = np.asarray(values)
    if dtype == "bf16":
        return bf16_values(bf16_bits(v.astype(np.float32)))
    if dtype in FP8:
        return fp8_round(v, dtype)
    if dtype == "f16":
        with np.errstate(over="ignore"):
            return v.astype(np.float16).astype(np.float32)
    if dtype in _INTS:
        with np.errstate(invalid="ignore"):
            return np.nan_to_num(v, nan=-1).astype(_STORAGE[dtype]).astype(values_dtype(dtype))
    return v.astype(values_dtype(dtype))


def encode(dtype: str, values: np.ndarray) -> np.ndarray:
    """Bytes of `values` in the device encoding of `dtype`."""
    v = round_to(dtype, values)
    if dtype in FP8:
        raw = fp8_bits(v, dtype)
    else:
        raw = bf16_bits(v) if dtype == "bf16" else np.ascontiguousarray(v, dtype=_STORAGE[dtype])
    return raw.reshape(-1).view(np.uint8)


def decode(dtype: str, raw: np.ndarray) -> np.ndarray:
    """Values of device-encoded bytes."""
    typed = np.ascontiguousarray(raw).view(_STORAGE[dtype])
    if dtype == "bf16":
        return bf16_values(typed)
    if dtype in FP8:
        return fp8_values(typed, dtype)
    return typed.astype(values_dtype(dtype))


def granule(kernel: LoweredKernel) -> int:
    """Bytes per shadow granule: the gcd of the buffers' element sizes."""
    sizes = [dtype_bytes(b.dtype) for b in kernel.buffers] or [4]
    return math.gcd(*sizes)


def relative_granules(byte_idx: np.ndarray, gran: int) -> np.ndarray | slice:
    """The granules of some bytes of a stage, relative to the stage (a slice when they
    are contiguous)."""
    g = np.unique(byte_idx // gran)
    if len(g) and g[-1] - g[0] + 1 == len(g):
        return slice(int(g[0]), int(g[-1]) + 1)
    return g


@dataclass
class Conflict:
    """A shadow check that failed: the kind and what the other access was."""

    kind: str  # race | uninitialised read | proxy | proxy-war
    other: int  # vector-clock thread of the other access (-1 none)
    clock: int
    write: bool  # the other access is a write
    granule: int


class SharedMemory:
    """The shared memory of one CTA and its shadow."""

    def __init__(self, kernel: LoweredKernel, threads: int):
        self.kernel = kernel
        size = max(kernel.smem_bytes, kernel.zero_offset + kernel.zero_bytes, 16)
        self.data = np.full(size, 0xFF, dtype=np.uint8)
        self.gran = granule(kernel)
        n = -(-size // self.gran)
        self.wthr = np.full(n, NEVER, dtype=np.int32)
        self.wclk = np.zeros(n, dtype=np.int64)
        self.wgen = np.zeros(n, dtype=bool)
        self.rclk = np.zeros((threads, n), dtype=np.int64)
        self.rgen = np.zeros((threads, n), dtype=bool)  # thread t's last read was generic
        self.fences: list[list[int]] = [[] for _ in range(threads)]  # proxy fence clocks
        self.inclusive: set[int] = set()  # group clocks whose fence covers its own clock
        if kernel.zero_bytes:
            lo = kernel.zero_offset
            self.data[lo:lo + kernel.zero_bytes] = 0
            self.wthr[lo // self.gran:(lo + kernel.zero_bytes) // self.gran] = PROLOGUE
        self.buffers = {b.name: b for b in kernel.buffers}

    def stage_start(self, buffer: str, stage: int) -> int | None:
        """Byte offset of one stage, or None when the stage does not exist."""
        buf = self.buffers[buffer]
        if not 0 <= stage < buf.stages:
            return None
        return buf.offset + stage * buf.stage_bytes

    def granules(self, start: int, nbytes: int, rel: np.ndarray | slice | None
                 ) -> np.ndarray | slice:
        """Granules of a stage at `start`: all of them (None) or the relative granules
        `rel` (relative_granules). Stage offsets are multiples of the granule."""
        base = start // self.gran
        if rel is None:
            return slice(base, base + -(-nbytes // self.gran))
        if isinstance(rel, slice):
            return slice(base + rel.start, base + rel.stop)
        return base + rel

    # ---- data -------------------------------------------------------------------------

    def read_tile(self, buffer: str, stage_start: int) -> np.ndarray:
        buf = self.buffers[buffer]
        raw = self.data[stage_start:stage_start + buf.stage_bytes]
        where = byte_map(buf)
        if where is not None:
            raw = raw[where]
        return decode(buf.dtype, raw).reshape(view_2d(buf.shape))

    def write_tile(self, buffer: str, stage_start: int, values: np.ndarray,
                   elements: np.ndarray | None) -> None:
        """Write `values` (the whole tile) into the stage, only the selected elements."""
        buf = self.buffers[buffer]
        esize = dtype_bytes(buf.dtype)
        shape = view_2d(buf.shape)
        values = np.asarray(values)
        # a copy's rows may be shaped differently from the view (a 1-D buffer is n x 1):
        # the bytes are row-major either way
        values = values.reshape(shape) if values.size == shape[0] * shape[1] else \
            np.broadcast_to(values, shape)
        raw = encode(buf.dtype, values)
        region = self.data[stage_start:stage_start + buf.stage_bytes]
        where = byte_map(buf)
        if where is None:
            where = slice(None)
        if elements is None:
            region[where] = raw
        else:
            sel = np.repeat(elements.reshape(-1), esize)
            region[where[sel] if isinstance(where, np.ndarray) else sel] = raw[sel]

    # ---- shadow ------------------------------------------------------------------------

    def check(self, t: int, vc: np.ndarray, g: np.ndarray | slice, write: bool,
              async_: bool) -> Conflict | None:
        """Check one access of thread `t` (vector clock `vc`) to granules `g`, then
        record it. Returns the first conflict (race, uninitialised read, missing proxy
        fence) or None."""
        wthr = self.wthr[g]
        if wthr.size == 0:
            return None
        wclk = self.wclk[g]
        gidx = np.arange(g.start, g.stop) if isinstance(g, slice) else g
        written = wthr >= 0
        if written.any():
            late = written & (wthr != t)
            late &= wclk > vc[np.where(written, wthr, 0)]
            if late.any():
                j = int(np.argmax(late))
                return Conflict(RACE, int(wthr[j]), int(wclk[j]), True, int(gidx[j]))
        if write:
            reads = self.rclk[:, g]
            late = reads > vc[:, None]
            late[t] = False
            if late.any():
                u, j = np.unravel_index(int(np.argmax(late)), late.shape)
                return Conflict(RACE, int(u), int(reads[u, j]), False, int(gidx[j]))
            if async_:  # axiom A19: generic accesses before an async-proxy write
                unfenced = self._unfenced_before_async_write(t, vc, g, gidx, reads)
                if unfenced is not None:
                    return unfenced
            self.wthr[g] = t
            self.wclk[g] = vc[t]
            self.wgen[g] = not async_
            self.rclk[:, g] = 0
            self.rgen[:, g] = False
            return None
        never = wthr == NEVER
        if never.any():
            return Conflict(UNINIT, -1, 0, True, int(gidx[np.argmax(never)]))
        if async_:
            generic = written & self.wgen[g]
            if generic.any():
                pairs = np.unique(np.stack([wthr[generic], wclk[generic]]), axis=1)
                for w, c in pairs.T:
                    if not self._fenced(int(w), int(c), int(vc[w])):
                        j = np.flatnonzero(generic & (wthr == w) & (wclk == c))[0]
                        return Conflict("proxy", int(w), int(c), True, int(gidx[j]))
        self.rclk[t, g] = vc[t]
        self.rgen[t, g] = not async_
        return None

    def _unfenced_before_async_write(self, t: int, vc: np.ndarray, g: np.ndarray | slice,
                                     gidx: np.ndarray, reads: np.ndarray) -> Conflict | None:
        """An async-proxy write by `t` (vector clock `vc`) of granules `g`, every earlier
        access of which is already ordered before it: the first generic read or write of
        another thread that its thread did not fence (fence.proxy.async after the access,
        known to `vc`), or None (cakegov/analysis/semantics.py `proxy_fenced`)."""
        wthr, wclk = self.wthr[g], self.wclk[g]
        generic = (wthr >= 0) & (wthr != t) & self.wgen[g]
        if generic.any():
            pairs = np.unique(np.stack([wthr[generic], wclk[generic]]), axis=1)
            for w, c in pairs.T:
                if not self._fenced(int(w), int(c), int(vc[w])):
                    j = np.flatnonzero(generic & (wthr == w) & (wclk == c))[0]
                    return Conflict("proxy-war", int(w), int(c), True, int(gidx[j]))
        greads = (reads > 0) & self.rgen[:, g]
        greads[t] = False
        for u in np.flatnonzero(greads.any(axis=1)):
            for c in np.unique(reads[u][greads[u]]):
                if not self._fenced(int(u), int(c), int(vc[u])):
                    j = np.flatnonzero(greads[u] & (reads[u] == c))[0]
                    return Conflict("proxy-war", int(u), int(c), False, int(gidx[j]))
        return None

    def fence(self, t: int, clock: int, covers_own_clock: bool = False) -> None:
        """Thread `t` executed fence.proxy.async at `clock`. `covers_own_clock`: `t` is an
        MMA group's clock (the ordinal of the last group its warp retired before fencing),
        so the fence also covers the accesses stamped with that clock itself."""
        if covers_own_clock:
            self.inclusive.add(t)
        if not self.fences[t] or self.fences[t][-1] <= clock:
            self.fences[t].append(clock)

    def _fenced(self, w: int, c: int, known: int) -> bool:
        """Did thread w fence after its access at clock c, with the fence known (clock <=
        `known`) to the other accessor?"""
        return proxy_fenced(self.fences[w], c - 1 if w in self.inclusive else c, known)

    def where(self, granule: int) -> str:
        """`buffer stage s byte b` for a granule (or a raw offset)."""
        byte = granule * self.gran
        for buf in self.kernel.buffers:
            lo, hi = buf.offset, buf.offset + buf.stages * buf.stage_bytes
            if lo <= byte < hi:
                s, off = divmod(byte - lo, buf.stage_bytes)
                return f"{buf.name} stage {s} byte {off}"
        return f"shared byte {byte}"


@dataclass
class Tensor:
    """One global tensor: flat values, and for outputs which CTA wrote each element."""

    name: str
    dtype: str
    values: np.ndarray  # flat, value type
    output: bool
    owner: np.ndarray | None = None  # flat int32 CTA ordinal, -1 never written


class GlobalMemory:
    """The kernel's global tensors (inputs as drawn, outputs poisoned)."""

    def __init__(self, tensors: Mapping[str, Tensor]):
        self.tensors = dict(tensors)

    def read(self, name: str, view: tuple[int, int], r0: int, c0: int, rows: int,
             cols: int, pad: bool, fill: np.ndarray | None) -> tuple[np.ndarray, str | None]:
        """The `rows x cols` tile at (r0, c0) of the `view` (rows x cols) of tensor `name`.
        With `pad`, the part outside the view is `fill` (the zero row); without, an
        element outside the view is an out-of-bounds read (the message says where)."""
        t = self.tensors[name]
        vr, vc = view
        r = r0 + np.arange(rows)[:, None]
        c = c0 + np.arange(cols)[None, :]
        inside = (r >= 0) & (r < vr) & (c >= 0) & (c < vc)
        flat = r * vc + c
        out = np.zeros((rows, cols), dtype=t.values.dtype)
        if fill is not None:
            out[:] = np.resize(fill, cols)[None, :].astype(t.values.dtype)
        ok = inside & (flat < t.values.size)
        out[ok] = t.values[flat[ok]]
        if not pad and not inside.all():
            i, j = np.argwhere(~inside)[0]
            beyond = not (0 <= flat[i, j] < t.values.size)
            return out, (f"{OOB}: reads {name}[{int(r[i, 0])}, {int(c[0, j])}] outside its "
                         f"{vr} x {vc} view" + (" and beyond the allocation" if beyond else
                                                " (the next row's data)"))
        return out, None

    def write(self, name: str, view: tuple[int, int], r0: int, c0: int, values: np.ndarray,
              elements: np.ndarray, guard: bool, cta: int,
              cta_name: Callable[[int], str]) -> str | None:
        """Store the selected elements of the tile `values` at (r0, c0); with `guard`
        elements outside the view are skipped, without they are out of bounds. A write to
        an element another CTA already wrote is a race between CTAs."""
        t = self.tensors[name]
        vr, vc = view
        rows, cols = values.shape
        r = r0 + np.arange(rows)[:, None]
        c = c0 + np.arange(cols)[None, :]
        inside = (r >= 0) & (r < vr) & (c >= 0) & (c < vc)
        sel = elements.reshape(rows, cols)
        if not guard and (sel & ~inside).any():
            i, j = np.argwhere(sel & ~inside)[0]
            return (f"{OOB}: writes {name}[{int(r[i, 0])}, {int(c[0, j])}] outside its "
                    f"{vr} x {vc} view (no mask)")
        sel = sel & inside
        flat = (r * vc + c)[sel]
        if t.owner is not None:
            prev = t.owner[flat]
            clash = (prev >= 0) & (prev != cta)
            if clash.any():
                k = int(np.argmax(clash))
                e = int(flat[k])
                return (f"{RACE}: {name}[{e // vc}, {e % vc}] is written by {cta_name(cta)} "
                        f"and by {cta_name(int(prev[k]))}, which nothing orders")
            t.owner[flat] = cta
        t.values[flat] = round_to(t.dtype, values[sel])
        return None


class Fragments:
    """The register fragments of one CTA. Registers belong to threads: every role's
    threads hold their own copy of a fragment (the emitted kernel declares it in every
    thread), so a write by one role's threads never reaches another role's copy, and a
    read of an element the reading role's threads never wrote is an uninitialised read
    (a role that reads a fragment another role wrote reads garbage on the GPU)."""

    def __init__(self, fragments: tuple[LFragment, ...]):
        self.shapes = {f.name: view_2d(f.shape) for f in fragments}
        self.dtypes = {f.name: f.dtype for f in fragments}
        self.owners = {f.name: f.role for f in fragments}
        self.values: dict[tuple[str, str], np.ndarray] = {}  # (role, fragment) -> values
        self.written: dict[tuple[str, str], np.ndarray] = {}

    def _copy(self, role: str, name: str) -> tuple[np.ndarray, np.ndarray]:
        key = (role, name)
        if key not in self.values:
            dtype = self.dtypes[name]
            self.values[key] = np.full(self.shapes[name], np.nan if dtype not in _INTS
                                       else -1, dtype=values_dtype(dtype))
            self.written[key] = np.zeros(self.shapes[name], dtype=bool)
        return self.values[key], self.written[key]

    def read(self, role: str, name: str, elements: np.ndarray
             ) -> tuple[np.ndarray, str | None]:
        values, written = self._copy(role, name)
        missing = elements & ~written
        if missing.any():
            r, c = np.argwhere(missing)[0]
            others = sorted(k[0] for k, w in self.written.items()
                            if k[1] == name and k[0] != role and w[r, c])
            why = (f"; only the threads of {', '.join(others)} wrote it, and registers "
                   "belong to the threads that hold them") if others else ""
            return values, (f"fragment {name}[{int(r)}, {int(c)}] (declared for "
                            f"role {self.owners[name]}) is read by role {role} before its "
                            f"threads wrote it{why}")
        return values, None

    def write(self, role: str, name: str, values: np.ndarray, elements: np.ndarray) -> None:
        mine, written = self._copy(role, name)
        v = round_to(self.dtypes[name], np.broadcast_to(values, elements.shape))
        mine[elements] = v[elements]
        written |= elements
