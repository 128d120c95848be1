"""Which warp, and which lanes of it, touch which elements of an operand: the simulator's
reading of cakegov/analysis/footprint.py (the same (byte, thread) pairs the protocol
analysis uses), split per warp of the role and into lane 0 and lanes 1-31.

Each warp of a role executes a compute primitive for the elements its threads hold or
are given (the CUDA runtime's `for_each`, the fragment layouts, the mma operand loads).
The simulator therefore computes a primitive's whole tile with numpy and keeps, for the
executing warp, only the elements this module assigns to it; its shared-memory checks
cover exactly the bytes the warp's lanes touch."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cakegov.analysis.footprint import ALL, ENGINE, Footprint, Footprints, byte_map, owners
from cakegov.ir.dtypes import dtype_bytes
from cakegov.lower.fragments import view_2d
from cakegov.lower.kernel import LoweredKernel
from cakegov.plugin import Access
from cakegov.sim.memory import granule, relative_granules

WARP = 32


@dataclass(frozen=True)
class Share:
    """One warp's part of one operand access.

    `elements`: boolean mask over the operand's 2-D elements the warp touches;
    `lane0` / `lanes`: the shadow granules (relative to the stage,
    cakegov/sim/memory.py) touched by lane 0 and by lanes 1-31 (None: every granule of
    the stage; an empty array: none). `warp`: every granule the warp touches. `engine`:
    the async proxy touches the whole tile on the role's behalf."""

    elements: np.ndarray
    lane0: np.ndarray | slice | None
    lanes: np.ndarray | slice | None
    warp: np.ndarray | slice | None = None
    engine: bool = False


class Placement:
    """Per-warp shares of every operand access of one kernel, computed on first use."""

    def __init__(self, kernel: LoweredKernel, footprints: Footprints):
        self.kernel = kernel
        self.fp = footprints
        self.layouts = {f.name: f.layout for f in kernel.fragments if f.layout is not None}
        self._cache: dict[tuple, Share] = {}
        self.cache: dict[tuple, np.ndarray] = {}  # other derived data (wgmma addresses)
        self.gran = granule(kernel)

    def fragment(self, name: str, warp: int) -> np.ndarray:
        """Elements of fragment `name` held by warp `warp` of its role."""
        key = ("frag", name, warp)
        if key not in self._cache:
            layout = self.layouts.get(name)
            frag = self.kernel.fragment(name)
            assert frag is not None
            shape = view_2d(frag.shape)
            if layout is None:
                mask = np.ones(shape, dtype=bool)
            else:
                mask = (owners(layout) // WARP == warp).reshape(shape)
            self._cache[key] = Share(mask, None, None)
        return self._cache[key].elements

    def smem(self, role: str, path: str, index: int, write: bool, access: Access,
             warp: int, origin: tuple[int, int] | None = None) -> Share:
        """Warp `warp`'s share of shared-memory access `index` of the op at `path`
        (`origin`: of the fragment sub-tile the access follows, when it does)."""
        key = ("smem", path, index, write, warp, origin)
        if key in self._cache:
            return self._cache[key]
        buf = self.kernel.buffer(access.name)
        assert buf is not None
        shape = view_2d(buf.shape)
        fp: Footprint = self.fp.of(role, path, index, write, access, origin)
        if fp.who == ENGINE:
            share = Share(np.ones(shape, dtype=bool), None, None, engine=True)
        elif fp.who == ALL or fp.pairs is None:
            share = Share(np.ones(shape, dtype=bool), None, None)
        else:
            byte, thread = fp.pairs[:, 0], fp.pairs[:, 1]  # stage bytes of the layout
            mine = thread // WARP == warp
            esize = dtype_bytes(buf.dtype)
            where = byte_map(buf)
            logical = byte if where is None else np.argsort(where)[byte]
            elements = np.zeros(shape[0] * shape[1], dtype=bool)
            elements[np.unique(logical[mine] // esize)] = True
            zero = thread % WARP == 0
            share = Share(elements.reshape(shape), self._rel(byte[mine & zero]),
                          self._rel(byte[mine & ~zero]), self._rel(byte[mine]))
        self._cache[key] = share
        return share

    def _rel(self, byte: np.ndarray) -> np.ndarray | slice:
        if len(byte) == 0:
            return np.zeros(0, dtype=np.int64)
        return relative_granules(byte, self.gran)

    def of_operand(self, role: str, path: str, index: int, write: bool, access: Access,
                   warp: int) -> np.ndarray:
        """Elements of an operand (fragment or shared tile) warp `warp` touches."""
        if access.space == "reg":
            return self.fragment(access.name, warp)
        return self.smem(role, path, index, write, access, warp).elements
