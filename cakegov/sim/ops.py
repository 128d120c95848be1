"""`OpSim`: what a primitive plugin's `simulate(op, sim)` sees when the simulator executes
one of its calls for one warp (or, for an asynchronous operation, for the async proxy on
one warp's behalf).

A plugin computes the whole tile with numpy from `sim.tile(...)` and writes it with
`sim.put(...)` or `sim.store(...)`; the simulator keeps only the elements the executing
warp holds or is given (cakegov/sim/placement.py) and rounds every value to the
destination's dtype (round to nearest even for f16 and bf16). Shared-memory checks
(races, uninitialised bytes, proxy fences) are made by the machine for the op's declared
effects before or after the plugin runs; `tile` of a register fragment checks that the
warp's elements were written. Numerics never loop over elements in Python.

The methods a plugin may call:

- `value(arg)`: a scalar argument (bool, int, float or enum string), evaluated with the
  loop variables (`init=(k == 0)` is True on the first iteration);
- `tile(arg)`: the operand's values as a 2-D array (float32 for floats, int32 for
  integers); `dtype(arg)`, `shape(arg)`;
- `put(arg, values)`: write an operand tile;
- `coord(arg)`: a coordinate argument as its 2-D origin `(row, col)`;
- `store(dst, at, values, guard, src=...)`: write a tile into a global tensor at `at`;
  with `guard`, elements outside the tensor are skipped (a tail guard), without they are
  an out-of-bounds write; `src` names the operand whose distribution decides which
  elements this warp writes;
- for `load` (an `LCopy`): `index(expr)`, `gather(...)` and `put_stage(...)`;
- for an `mma_async` lowered to wgmma (`op.wgmma`): `wgmma_operands()`, both operands as
  the hardware reads them through the lowered matrix descriptors."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from cakegov.ir.dtypes import dtype_bytes
from cakegov.ir.expr import Expr
from cakegov.lower.fragments import view_2d
from cakegov.lower.wgmma import WGMMA_K_BYTES, WGMMA_M, MatrixDescriptor, encode_field
from cakegov.sim.memory import decode
from cakegov.sim.state import OOB

if TYPE_CHECKING:
    from cakegov.sim.machine import Machine, Warp


class OpSim:
    """One execution of one primitive call by one warp (or the async proxy)."""

    def __init__(self, machine: Machine, warp: Warp, op: Any, vars_: dict[str, int],
                 engine: bool = False, dest: Machine | None = None):
        self.m = machine
        self.dest = dest or machine  # the CTA a (multicast) copy lands in
        self.warp = warp
        self.op = op
        self.vars = vars_
        self.engine = engine  # the async proxy: the whole tile, no per-warp share

    # ---- arguments --------------------------------------------------------------------

    def index(self, expr: Expr) -> int:
        return self.m.eval(expr, self.vars, self.op)

    def value(self, name: str) -> Any:
        v = self.op.args.get(name)
        if v is None:
            return None
        kind = getattr(v, "kind", None)
        if kind == "expr":
            return self.index(v.expr)
        return getattr(v, "value", None)

    def coord(self, name: str) -> tuple[int, int]:
        items = [self.index(e) for e in self.op.args[name].items]
        return (items[0], 0) if len(items) == 1 else (items[0], items[1])

    def dtype(self, name: str) -> str:
        v = self.op.args[name]
        if v.kind == "smem":
            return self.m.kernel.buffer(v.name).dtype
        if v.kind == "fragment":
            return self.m.kernel.fragment(v.name).dtype
        return self.m.kernel.tensors[v.name][0]

    def shape(self, name: str) -> tuple[int, int]:
        v = self.op.args[name]
        if getattr(v, "tile", None) is not None:  # a fragment sub-tile
            return v.tile.rows, v.tile.cols
        decl = self.m.kernel.buffer(v.name) if v.kind == "smem" else self.m.kernel.fragment(v.name)
        return view_2d(decl.shape)

    # ---- operands ---------------------------------------------------------------------

    def tile(self, name: str) -> np.ndarray:
        v = self.op.args[name]
        if v.kind == "smem":
            start = self.m.stage_of(v, self.vars, self.op)
            return self.m.smem.read_tile(v.name, start)
        return self.m.read_fragment(self.warp, v.name, self.op,
                                    self.m.window(v, self.vars, self.op))

    def put(self, name: str, values: np.ndarray) -> None:
        v = self.op.args[name]
        values = np.asarray(values)
        if v.kind == "smem":
            start = self.m.stage_of(v, self.vars, self.op)
            elements = None if self.engine else self.m.share(self.warp, self.op, v.name,
                                                             write=True, vars_=self.vars)
            self.m.smem.write_tile(v.name, start, values, elements)
            return
        elements = self.m.placement.fragment(v.name, self.warp.rwarp)
        window = self.m.window(v, self.vars, self.op)
        if window is not None:  # a sub-tile: place the values in its window
            whole = np.zeros(elements.shape, dtype=values.dtype)
            whole[window] = values
            inside = np.zeros_like(elements)
            inside[window] = elements[window]
            values, elements = whole, inside
        self.m.frags.write(self.warp.role.name, v.name, values, elements)

    def store(self, dst: str, at: str, values: np.ndarray, guard: bool, src: str) -> None:
        row, col = self.coord(at)
        tensor = self.op.args[dst].name
        values = np.asarray(values)
        if self.engine:
            elements = np.ones(values.shape, dtype=bool)
        else:
            v = self.op.args[src]
            if v.kind == "fragment":
                elements = self.m.placement.fragment(v.name, self.warp.rwarp)
                window = self.m.window(v, self.vars, self.op)
                if window is not None:
                    elements = elements[window]
            else:
                elements = self.m.share(self.warp, self.op, v.name, write=False,
                                        vars_=self.vars)
        self.m.write_global(tensor, row, col, values, elements, guard, self.op)

    # ---- wgmma operands -------------------------------------------------------------------

    def wgmma_operands(self) -> tuple[np.ndarray, np.ndarray]:
        """A (M x K) and B (N x K, K-major) as `wgmma.mma_async` reads them: for every
        instruction of the lowering (warpgroup, block, K step) the 64-bit descriptor the
        emitted code builds (`hi | (address & 0x3FFFF) >> 4`, address = stage start +
        the derived start offset + warpgroup stride), decoded, and every element of its
        64 (A) or N (B) rows by 32 bytes of K fetched from the byte
        `MatrixDescriptor.address(row, kbyte)` names (PTX ISA canonical layouts). The
        addresses are cached per operand and stage."""
        w = self.op.wgmma
        out = []
        for side, groups, blocks, block_rows in (("a", w.groups_m, w.blocks_m, WGMMA_M),
                                                 ("b", w.groups_n, w.blocks_n, w.n)):
            ref = self.op.args[side]
            start = self.m.stage_of(ref, self.vars, self.op)
            buf = self.m.kernel.buffer(ref.name)
            key = ("wgmma", self.op.path, side, start)
            cache = self.m.placement.cache
            if key not in cache:
                cache[key] = _descriptor_addresses(getattr(w, side), start, groups, blocks,
                                                   block_rows, w.k_steps, buf)
            addrs = cache[key].reshape(-1)
            outside = (addrs < 0) | (addrs >= self.m.smem.data.size)
            if outside.any():
                line = self.op.span.line
                raise self.m.defect(OOB, f"line {line}: the wgmma descriptors of `{ref.name}` "
                                    f"read shared byte {int(addrs[np.argmax(outside)])}, "
                                    f"outside the CTA's {self.m.smem.data.size} bytes", line)
            raw = self.m.smem.data[addrs]
            rows, cols = view_2d(buf.shape)
            out.append(decode(buf.dtype, raw).reshape(rows, cols))
        return out[0], out[1]

    # ---- bulk copies (load) -------------------------------------------------------------

    def gather(self, tensor: str, view: tuple[int, int], row0: int, col0: int, rows: int,
               cols: int, pad: bool) -> np.ndarray:
        return self.m.read_global(tensor, view, row0, col0, rows, cols, pad, self.op)

    def put_stage(self, buffer: str, stage: int, values: np.ndarray) -> None:
        """Write a landed copy's tile into the stage of the CTA it lands in (a multicast
        copy lands once in each destination CTA of the cluster)."""
        start = self.dest.smem.stage_start(buffer, stage)
        assert start is not None  # checked when the copy was issued
        self.dest.smem.write_tile(buffer, start, np.asarray(values), None)


def _descriptor_addresses(operand, start: int, groups: int, blocks: int, block_rows: int,
                          k_steps: int, buf) -> np.ndarray:
    """Byte addresses (rows x cols x element bytes) of every operand element as the
    descriptors of `operand` (an `LWgmmaOperand`) make wgmma read them from a stage at
    `start`; -1 for an element no instruction reads (there is none in a valid lowering:
    the decode below then fails loudly)."""
    rows, cols = view_2d(buf.shape)
    size = dtype_bytes(buf.dtype)
    out = np.full((rows, cols, size), -1, dtype=np.int64)
    per_step = WGMMA_K_BYTES // size
    for g in range(groups):
        for b in range(blocks):
            for s in range(k_steps):
                address = start + operand.starts[b][s] + g * operand.group_stride
                desc = MatrixDescriptor.decode(operand.hi | encode_field(address, "start"))
                row0 = g * (rows // groups) + b * block_rows
                for r in range(block_rows):
                    for e in range(per_step):
                        at = desc.address(r, e * size)
                        out[row0 + r, s * per_step + e] = np.arange(at, at + size)
    if (out < 0).any():
        raise ValueError("the wgmma descriptors leave operand elements unread")
    return out
