"""The CTAs of the grid must write every output element exactly once, and stay inside it.

## What it does
For each check shape of the workload (those whose output has at most 2^26 elements, or
the smallest one; tiles are counted on the index space compressed to their boundaries,
so the cost grows with the number of tiles, not with the output's size), it evaluates the
launch grid, every CTA's index (`lm.block(axis)`), every value of the loops around each
store and the store's `at` coordinates, and counts with numpy how often each element of
each output tensor (`lm.store`, bulk `store_async`) is written, tile by tile (a store's
tile has its source's shape; a fragment sub-tile `acc[:, a:b]` stores its window). It
reports:
- an output no role stores at all: at the schedule;
- elements written 0 times (a hole): at `lm.launch` when a larger grid along the axes
  the stores use would cover them (the grid is too small, e.g. `M // BM` instead of
  `lm.cdiv(M, BM)`), otherwise at the store;
- elements written more than once (two CTAs, or two stores, write the same tile): at
  the store, naming an example element and the CTAs that write it;
- stores without `mask=True` whose tile reaches outside the tensor for some CTA, when
  the tile-divisibility rule (H005) has not already asked for a tail strategy there.

## Why is this bad?
A hole leaves part of the output uninitialised (or with whatever the buffer held, which
may happen to pass a test); a doubly written element is a race between CTAs whose
outcome depends on scheduling, or work done twice; an unmasked out-of-bounds tile writes
memory that belongs to another tensor or faults.

## Failing example
`corpus/invalid/gemm/grid_floor_division.cake`:
```python
lm.launch(grid=(lm.M // BM, lm.cdiv(lm.N, BN)), warps=12)  # expect: P017
```

## Passing example
`corpus/valid/gemm/ws_pipeline_s4.cake`:
```python
lm.launch(grid=(lm.cdiv(lm.M, BM), lm.cdiv(lm.N, BN)), warps=12)
lm.store(C, at=(m0, n0), src=acc, mask=True)
```
"""

from cakegov.analysis.grid import (
    Store,
    choose_shapes,
    count,
    out_of_bounds,
    tiles,
    vec_eval,
    writers,
)
from cakegov.ir.expr import EvalError
from cakegov.ir.nodes import BoolValue, CoordValue, ExprValue
from cakegov.plugin import operand_shape

CODE = "P017"
NAME = "grid-coverage"
VERSION = "1.3.0"
SEVERITY = "blocking"
PHASE = "final"  # after the protocol rules: a hole their finding explains is not a second
CATEGORY = "protocol"
STATUS = "stable"
MOTIVATED_BY = (
    "corpus/invalid/gemm/grid_floor_division.cake",
    "corpus/invalid/kmeans_assign/row_offset_overlap.cake",
    "corpus/invalid/scale/grid_overshoot_unmasked.cake",
)

_EXTRA = 8  # how far the grid is grown to test whether it is too small


def _masked(value):
    if isinstance(value, BoolValue):
        return value.value
    return isinstance(value, ExprValue) and getattr(value.expr, "value", 0) == 1


def _stores(ctx):
    out = []
    for site in ctx.calls():
        call = site.call
        at, src = call.args.get("at"), call.args.get("src")
        tensors = [a.name for a in ctx.effects(call).writes if a.space == "global"]
        if not tensors or not isinstance(at, CoordValue) or src is None:
            continue
        shape = tuple(operand_shape(src, ctx.view)) if hasattr(src, "name") else ()
        if len(shape) != len(at.items):
            continue
        out.append(Store(call.path, call.span.line, site.role.name, tensors[0], at.items,
                         shape, _masked(call.args.get("mask")), site.loops))
    return out


def _fmt(idx):
    return "[" + ", ".join(str(i) for i in idx) + "]"


def _cta(cta, ndim):
    return "(" + ", ".join(str(c) for c in cta[:max(ndim, 1)]) + ")"


def _holes_fixed_by(stores, holes_at, grid):
    """Per used axis, the grid extent that removes every hole, when growing it does."""
    axes = sorted({a for s in stores for a in s.block_axes() if a < len(grid)})
    if not axes:
        return None
    big = [g + _EXTRA if a in axes else g for a, g in enumerate(grid)]
    left = holes_at(big)
    if left is None or left:
        return None
    need = {}
    for axis in axes:
        for extra in range(0, _EXTRA + 1):
            trial = [g + _EXTRA if a in axes else g for a, g in enumerate(grid)]
            trial[axis] = grid[axis] + extra
            left = holes_at(trial)
            if left == 0:
                need[axis] = grid[axis] + extra
                break
    return need or None


def _check_tensor(ctx, tensor, dims, stores, sizes, grid):
    stages = ctx.pipeline_stages
    shape_text = ", ".join(f"{k}={v}" for k, v in sizes.items())

    def parts_at(g):
        parts = [tiles(s, sizes, g, stages) for s in stores]
        return None if any(p is None for p in parts) else parts

    parts = parts_at(grid)
    if parts is None:
        return
    h005 = {f.path for f in ctx.findings if f.code == "H005"}
    for part in parts:
        if part.store.masked or part.store.path in h005:
            continue
        bad = out_of_bounds(dims, part)
        if bad is not None:
            origin, cta = bad
            ends = [o + t for o, t in zip(origin, part.store.tile, strict=True)]
            yield ctx.finding(
                ctx.node_at(part.store.path),
                f"CTA {_cta(cta, len(grid))} stores a {'x'.join(map(str, part.store.tile))} "
                f"tile of `{tensor}` at {_fmt(origin)} without `mask=True`, reaching "
                f"{_fmt(ends)} outside `{tensor}` of shape {_fmt(dims)} ({shape_text})",
                condition="every unmasked store tile lies inside the tensor for every CTA",
                hint="add `mask=True` to this store, or shrink the grid so that no CTA "
                     "starts a tile outside the tensor",
                resource=tensor, role=part.store.role,
                evidence={"tensor": tensor, "origin": list(origin), "cta": list(cta),
                          "shape": dict(sizes), "grid": list(grid),
                          "anomaly": "out-of-bounds", "witness": _witness(
                              (0, f"launch grid {_fmt(grid)} at {shape_text}"),
                              (part.store.line, f"CTA {_cta(cta, len(grid))} stores its tile "
                                                f"of `{tensor}` at {_fmt(origin)}"),
                              (part.store.line, f"the tile ends at {_fmt(ends)}, outside "
                                                f"{_fmt(dims)}: an unmasked write out of "
                                                "bounds"))},
            )
            return
    cover = count(dims, parts)
    ndup, dup = cover.cells(cover.counts > 1)
    nholes, hole = cover.cells(cover.counts == 0)
    if dup is not None:
        element = dup
        who = writers(element, parts)
        culprit = who[-1][0] if who else stores[0]
        names = ", ".join(f"CTA {_cta(c, len(grid))} (line {s.line})" for s, c in who)
        extra = f"; {nholes} element(s) are never written" if nholes else ""
        yield ctx.finding(
            ctx.node_at(culprit.path),
            f"`{tensor}`{_fmt(element)} is written {cover.at(element)} times, by {names}: "
            f"{ndup} element(s) of `{tensor}` are written more than once ({shape_text})"
            f"{extra}",
            condition="every output element is written by exactly one CTA's tile",
            hint="make the store's `at` advance by the tile extent per CTA index and loop "
                 "iteration (the tiles of different CTAs must not overlap)",
            resource=tensor, role=culprit.role,
            evidence={"tensor": tensor, "element": list(element), "writes": ndup,
                      "holes": nholes, "ctas": [list(c) for _, c in who],
                      "shape": dict(sizes), "grid": list(grid), "anomaly": "double-write",
                      "witness": _witness((0, f"launch grid {_fmt(grid)} at {shape_text}"),
                                          *((st.line, f"CTA {_cta(c, len(grid))} writes "
                                                      f"`{tensor}`{_fmt(element)}")
                                            for st, c in who))},
        )
        return
    if hole is None:
        return
    element = hole

    def holes_at(g):
        p = parts_at(g)
        return None if p is None else count(dims, p).cells(count(dims, p).counts == 0)[0]

    need = _holes_fixed_by(stores, holes_at, grid)
    need = {a: n for a, n in (need or {}).items() if n != grid[a]}
    launch = ctx.schedule.launch
    if need and launch is not None:
        axes = ", ".join(f"axis {a} has {grid[a]} CTA(s) but needs {n}"
                         for a, n in need.items())
        yield ctx.finding(
            launch,
            f"the grid {_fmt(grid)} leaves {nholes} element(s) of `{tensor}` unwritten, "
            f"e.g. `{tensor}`{_fmt(element)} ({shape_text}): {axes}",
            condition="the grid has enough CTAs to cover every output element",
            hint="size the grid with `lm.cdiv(size, tile)` per axis so the last, partial "
                 "tile gets a CTA (and keep `mask=True` on its stores)",
            resource=tensor,
            evidence={"tensor": tensor, "element": list(element), "holes": nholes,
                      "grid": list(grid), "needed": {str(a): n for a, n in need.items()},
                      "shape": dict(sizes), "anomaly": "hole",
                      "witness": _witness((launch.span.line, f"launch grid {_fmt(grid)} at "
                                                             f"{shape_text}"),
                                          (launch.span.line, f"no CTA's tile covers "
                                                             f"`{tensor}`{_fmt(element)}"))},
        )
        return
    yield ctx.finding(
        ctx.node_at(stores[0].path),
        f"{nholes} element(s) of `{tensor}` are never written, e.g. "
        f"`{tensor}`{_fmt(element)} ({shape_text}); no CTA's tile covers them",
        condition="the stores of all CTAs cover every output element",
        hint="make the tiles of the CTAs and loop iterations tile the whole tensor: check "
             "the store's `at` and the loop bounds",
        resource=tensor, role=stores[0].role,
        evidence={"tensor": tensor, "element": list(element), "holes": nholes,
                  "grid": list(grid), "shape": dict(sizes), "anomaly": "hole",
                  "witness": _witness((0, f"launch grid {_fmt(grid)} at {shape_text}"),
                                      (stores[0].line, f"no CTA's tile covers "
                                                       f"`{tensor}`{_fmt(element)}"))},
    )


def _witness(*steps):
    return [{"line": line, "text": text} for line, text in steps]


def check(ctx):
    launch, workload = ctx.schedule.launch, ctx.workload
    if launch is None or workload is None or ctx.schedule.unresolved:
        return
    if any(f.severity == "blocking" and f.code.startswith("P") for f in ctx.findings):
        return  # a protocol defect (a loop cut short, ...) explains the schedule
    stores = _stores(ctx)
    for tensor in workload.outputs:
        mine = [s for s in stores if s.tensor == tensor]
        dim_names = workload.tensors[tensor][1]
        if not mine:
            yield ctx.finding(
                ctx.schedule,
                f"no role stores the output `{tensor}`: every element of it is left "
                "unwritten",
                condition="the stores of all CTAs cover every output element",
                hint=f"store the result tile into `{tensor}` (`lm.store({tensor}, at=..., "
                     "src=..., mask=True)`) from the role that computes it",
                resource=tensor, evidence={
                    "tensor": tensor, "anomaly": "hole", "witness": _witness(
                        (0, f"no statement of any role stores `{tensor}`"))},
            )
            continue
        for sizes in choose_shapes(ctx.shapes, dim_names):
            try:
                grid = tuple(int(vec_eval(g, sizes, {}, {}, ctx.pipeline_stages))
                             for g in launch.grid)
                dims = tuple(sizes[d] for d in dim_names)
                found = list(_check_tensor(ctx, tensor, dims, mine, sizes, grid))
            except (EvalError, KeyError, ValueError):
                continue
            if found:
                yield found[0]
                break
