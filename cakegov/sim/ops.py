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
- for `load` (an `LCopy`): `index(expr)`, `gather(...)` and `put_stage(...)`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from cakegov.ir.expr import Expr
from cakegov.lower.fragments import view_2d

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
