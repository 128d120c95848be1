"""Bulk copies (`load`, `store_async`) must be supported and move whole, aligned 16-byte units.

## What it does
Every `<smem>.load(src, at=...)` lowers to one `cp.async.bulk` per tile row, and every
`<smem>.store_async(dst, at=...)` to one bulk store per tile row (one for the whole tile
when a one-column tile goes to a rank-1 tensor, which is contiguous on both sides). The
rule checks, for both directions:
- the target has bulk copies (`bulk_copy_supported`); otherwise one finding at the target;
- each tile row (innermost extent x dtype bytes) is a multiple of `bulk_copy_multiple`;
- the global start of every row is `bulk_copy_align`-aligned: the innermost coordinate of
  `at` times the element size must be a multiple of it for every value it takes. The rule
  first tries to prove it (the coordinate's guaranteed divisor, from constants, loop
  starts and steps, and `divisible=`); if it cannot, it searches loop iterations, block
  indices and check shapes for a concrete misaligned value and reports that witness;
- the row pitch of the global tensor (innermost extent x element size) is aligned for
  every launch the schedule accepts: every check shape of the workload, with the sizes
  the schedule fixes (`sizes=`) or constrains (`divisible=`) applied;
- a masked bulk store into a rank-1 tensor copies what is left of the tensor in the last
  tile: its extent must be a multiple of 16 bytes for every size the schedule accepts
  (a fixed size, or `divisible=`).

## Why is this bad?
`cp.async.bulk` requires a size that is a multiple of 16 bytes and 16-byte aligned shared
and global addresses. A misaligned copy is undefined behaviour (in practice a misaligned
address error that kills the context); a target without bulk copies cannot compile the
schedule at all.

## Failing example
`corpus/invalid/scale/bulk_copy_on_sm80.cake`:
```python
@cake.schedule(target="sm_80", workload="scale")
```

## Passing example
`corpus/valid/scale/tile_1stage.cake`:
```python
@cake.schedule(target="sm_90a", workload="scale", divisible={"N": 4})
x_s[0].load(X, at=(m0, n0), barrier=full[0], pad=True)
```
"""

import contextlib
import itertools
import math

from cakegov.ir.dtypes import dtype_bytes
from cakegov.ir.expr import (
    BinOp,
    Const,
    Env,
    EvalError,
    Size,
    Var,
    evaluate,
    free_symbols,
    render,
    step_expr,
)
from cakegov.ir.nodes import SmemDecl
from cakegov.lower.fragments import view_2d

CODE = "H002"
NAME = "bulk-copy-size"
VERSION = "1.2.1"
SEVERITY = "blocking"
CATEGORY = "hardware"
STATUS = "stable"
MOTIVATED_BY = (
    "corpus/invalid/scale/bulk_copy_on_sm80.cake",
    "corpus/invalid/scale/row_pitch_unaligned.cake",
)

_VALUES_PER_SYMBOL = 16  # alignment of linear expressions repeats within 16 steps
_MAX_COMBINATIONS = 4096


def divisor(expr, schedule, loops):
    """A number that divides every value of `expr` (0: the value is always 0)."""
    if isinstance(expr, Const):
        return abs(expr.value)
    if isinstance(expr, Size):
        return schedule.divisible.get(expr.name, 1)
    if isinstance(expr, Var):
        loop = next((lp for lp in loops if lp.var == expr.name), None)
        if loop is None:
            return 1
        return math.gcd(divisor(loop.start, schedule, loops),
                        divisor(step_expr(loop.step), schedule, loops))
    if isinstance(expr, BinOp):
        a = divisor(expr.lhs, schedule, loops)
        b = divisor(expr.rhs, schedule, loops)
        if expr.op == "*":
            return a * b
        if expr.op in ("+", "-", "min", "max", "%"):
            return math.gcd(a, b)
        return 0 if a == 0 else 1
    return 1


def _env(ctx, sizes, vars_=None, blocks=None):
    return Env(sizes=sizes, vars=vars_ or {}, blocks=blocks or {},
               pipeline_stages=ctx.pipeline_stages)


def _loop_values(ctx, loops, sizes, bound=None, blocks=None):
    """Assignments of the loop variables (the first values of each loop), outer first;
    `blocks`: the CTA index, for loops whose bounds depend on it (persistent loops)."""
    bound = bound or {}
    if len(bound) == len(loops):
        yield dict(bound)
        return
    loop = loops[len(bound)]
    try:
        env = _env(ctx, sizes, bound, blocks)
        start, stop = evaluate(loop.start, env), evaluate(loop.stop, env)
        step = evaluate(step_expr(loop.step), env)
    except EvalError:
        return
    if step <= 0:
        return
    for value in itertools.islice(range(start, stop, step), _VALUES_PER_SYMBOL):
        yield from _loop_values(ctx, loops, sizes, {**bound, loop.var: value}, blocks)


def _block_values(ctx, expr, sizes, loops=()):
    """Candidate values of each block index in `expr` (and in the bounds of `loops`)
    under `sizes`."""
    symbols = set(free_symbols(expr))
    for loop in loops:
        symbols |= free_symbols(loop.start) | free_symbols(loop.stop) | \
            free_symbols(step_expr(loop.step))
    axes = sorted(int(s.split(":")[1]) for s in symbols if s.startswith("block:"))
    launch = ctx.schedule.launch
    choices = []
    for axis in axes:
        extent = _VALUES_PER_SYMBOL
        if launch is not None and axis < len(launch.grid):
            with contextlib.suppress(EvalError):
                extent = min(extent, ctx.evaluate(launch.grid[axis], sizes))
        choices.append([(axis, b) for b in range(max(extent, 0))])
    return [dict(c) for c in itertools.product(*choices)]


def _relevant_loops(expr, loops):
    """The enclosing loops whose variables `expr` (or their bounds) depends on."""
    needed = set(free_symbols(expr))
    for loop in reversed(loops):
        if loop.var in needed:
            needed |= free_symbols(loop.start) | free_symbols(loop.stop) | \
                free_symbols(step_expr(loop.step))
    return tuple(lp for lp in loops if lp.var in needed)


def misaligned_witness(ctx, expr, loops, elem_bytes, align):
    """A (sizes, loop values, block values, value) where `expr * elem_bytes` is not a
    multiple of `align`, or None if none is found."""
    relevant = _relevant_loops(expr, loops)
    for sizes in ctx.shapes or [{}]:
        blocks = _block_values(ctx, expr, sizes, relevant)
        combos = ((vars_, blk) for blk in blocks
                  for vars_ in _loop_values(ctx, relevant, sizes, blocks=blk))
        for vars_, blk in itertools.islice(combos, _MAX_COMBINATIONS):
            try:
                value = evaluate(expr, _env(ctx, sizes, vars_, blk))
            except EvalError:
                continue
            if (value * elem_bytes) % align:
                return sizes, vars_, blk, value
    return None


def _unsupported(ctx, loads):
    lines = [str(s.call.span.line) for s in loads]
    first = loads[0].call
    buffer = (first.args.get("dst") if first.primitive == "load" else first.args.get("src"))
    where = f"line {lines[0]}" if len(lines) == 1 else f"lines {', '.join(lines)}"
    return ctx.finding(
        ctx.schedule.target_span,
        f"target {ctx.target.name} has no bulk copies (`cp.async.bulk`), but the schedule "
        f"copies tiles with `{first.primitive}` ({where})",
        condition="bulk_copy_supported == 1",
        hint="use `target=\"sm_90a\"` (Hopper), which has bulk copies and TMA",
        resource=buffer.name if buffer is not None else None,
        evidence={"bulk_copy_supported": ctx.target["bulk_copy_supported"],
                  "source": ctx.target.source("bulk_copy_supported"),
                  "load_lines": [s.call.span.line for s in loads]},
    )


def _row_size(ctx, call, decl, multiple):
    row = decl.row_bytes
    if row % multiple == 0:
        return None
    elem = dtype_bytes(decl.dtype)
    step = multiple // math.gcd(multiple, elem)
    below = decl.shape[-1] // step * step
    options = " or ".join(str(v) for v in (below, below + step) if v > 0)
    return ctx.finding(
        call, f"bulk copy into `{decl.name}` moves rows of {decl.shape[-1]} x {decl.dtype} "
        f"= {row} bytes, not a multiple of {multiple} bytes",
        condition=f"tile row bytes {row} % bulk_copy_multiple {multiple} == 0",
        hint=f"make the innermost extent of `{decl.name}` a multiple of {step} elements "
             f"(e.g. {options})",
        resource=decl.name,
        evidence={"row_bytes": row, "multiple": multiple,
                  "source": ctx.target.source("bulk_copy_multiple")},
    )


def _coordinate(ctx, site, tensor, elem, align, item=-1, resource=None):
    call = site.call
    items = call.args["at"].items
    if not items:
        return None
    expr = items[item]
    if divisor(expr, ctx.schedule, site.loops) * elem % align == 0:
        return None
    witness = misaligned_witness(ctx, expr, site.loops, elem, align)
    if witness is None:
        return None
    sizes, vars_, blocks, value = witness
    where = ", ".join([*(f"{k} = {v}" for k, v in vars_.items()),
                       *(f"lm.block({a}) = {b}" for a, b in blocks.items())])
    shape = ", ".join(f"{k}={v}" for k, v in sizes.items())
    need = align // math.gcd(align, elem)
    return ctx.finding(
        call.arg_spans.get("at", call.span),
        f"bulk copy of `{tensor}` starts at element `{render(expr)}` = {value}"
        f"{f' ({where})' if where else ''}{f' for shape {shape}' if shape else ''}: "
        f"{value} x {elem} bytes = {value * elem} is not {align}-byte aligned",
        condition=f"innermost coordinate x {elem} bytes % bulk_copy_align {align} == 0 "
                  "for every value",
        hint=f"make the innermost coordinate a multiple of {need} elements (tile origins "
             f"`k * BK` with BK a multiple of {need}), or declare the sizes it depends on "
             "with `divisible=`",
        resource=resource or call.args["dst"].name,
        evidence={"value": value, "bytes": value * elem, "align": align,
                  "loop_values": vars_, "blocks": {str(k): v for k, v in blocks.items()},
                  "sizes": sizes, "source": ctx.target.source("bulk_copy_align")},
    )


def _pitch(ctx, call, tensor, elem, align):
    dims = ctx.view.tensor_dims(tensor)
    if len(dims) < 2:
        return None
    name = dims[-1]
    need = align // math.gcd(align, elem)
    for sizes in ctx.shapes:
        extent = sizes.get(name)
        if extent is None or extent * elem % align == 0:
            continue
        fixed = name in ctx.schedule.sizes
        fix = (f"fix `sizes=` to a multiple of {need} (e.g. {-(-extent // need) * need})"
               if fixed else f"declare `divisible={{{name!r}: {need}}}` so the schedule is "
               f"only launched with {name} a multiple of {need}")
        return ctx.finding(
            call, f"rows of `{tensor}` are {name} = {extent} x {elem} bytes = "
            f"{extent * elem} bytes apart, so row starts after the first are not {align}-byte "
            "aligned for bulk copies",
            condition=f"{name} x {elem} bytes % bulk_copy_align {align} == 0 for every "
                      "launch the schedule accepts",
            hint=f"bulk copies need {name} to be a multiple of {need}: {fix}",
            resource=tensor,
            evidence={"extent": extent, "pitch_bytes": extent * elem, "align": align,
                      "sizes": sizes, "source": ctx.target.source("bulk_copy_align")},
        )
    return None


def _store_unit(ctx, call, decl, unit, what, multiple):
    if unit % multiple == 0:
        return None
    elem = dtype_bytes(decl.dtype)
    need = multiple // math.gcd(multiple, elem)
    return ctx.finding(
        call, f"bulk store from `{decl.name}` moves {what} of {unit} bytes, not a multiple "
        f"of {multiple} bytes",
        condition=f"bulk copy bytes {unit} % bulk_copy_multiple {multiple} == 0",
        hint=f"make the tile's innermost extent a multiple of {need} elements, or store it "
             "with `lm.store` (no bulk copy)",
        resource=decl.name,
        evidence={"bytes": unit, "multiple": multiple,
                  "source": ctx.target.source("bulk_copy_multiple")})


def _store_tail(ctx, call, decl, tensor, name, elem, multiple):
    """A masked contiguous store copies `extent - start` elements in the last tile."""
    need = multiple // math.gcd(multiple, elem)
    if name in ctx.schedule.sizes:
        bad = ctx.schedule.sizes[name] % need != 0
    else:
        bad = ctx.schedule.divisible.get(name, 1) % need != 0
    if not bad:
        return None
    return ctx.finding(
        call, f"masked bulk store from `{decl.name}` into `{tensor}` copies the last tile's "
        f"{name} - start elements, which is not a multiple of {need} ({multiple} bytes) "
        f"for every {name} the schedule accepts",
        condition=f"{name} x {elem} bytes % bulk_copy_multiple {multiple} == 0 for every "
                  "launch the schedule accepts",
        hint=f"declare `divisible={{{name!r}: {need}}}`, or store the labels with "
             "`lm.store(..., mask=True)`",
        resource=tensor,
        evidence={"size": name, "multiple": multiple, "elements": need,
                  "source": ctx.target.source("bulk_copy_multiple")})


def _stores(ctx, multiple, align):
    pitched = set()
    for site in ctx.calls("store_async"):
        call = site.call
        decl = ctx.decl(call.args["src"].name)
        tensor = call.args["dst"].name
        if not isinstance(decl, SmemDecl) or ctx.workload is None or \
                tensor not in ctx.workload.tensors:
            continue
        dims = ctx.view.tensor_dims(tensor)
        elem = dtype_bytes(ctx.view.tensor_dtype(tensor))
        rows, cols = view_2d(decl.shape)
        masked = bool(getattr(call.args.get("mask"), "value", False))
        if cols == 1 and len(dims) == 1:
            found = _store_unit(ctx, call, decl, rows * elem, "a tile", multiple)
            if found is None and masked:
                found = _store_tail(ctx, call, decl, tensor, dims[0], elem, multiple)
            if found is None:
                found = _coordinate(ctx, site, tensor, elem, align, item=0,
                                    resource=decl.name)
            if found is not None:
                yield found
            continue
        found = _store_unit(ctx, call, decl, cols * elem, "rows", multiple)
        if found is None:
            found = _coordinate(ctx, site, tensor, elem, align, resource=decl.name)
        if found is None and tensor not in pitched:
            pitched.add(tensor)
            found = _pitch(ctx, call, tensor, elem, align)
        if found is not None:
            yield found


def check(ctx):
    if ctx.target is None:
        return
    loads = list(ctx.calls("load"))
    stores = list(ctx.calls("store_async"))
    if not loads and not stores:
        return
    if not ctx.target.get("bulk_copy_supported", 0):
        yield _unsupported(ctx, loads or stores)
        return
    multiple = ctx.target["bulk_copy_multiple"]
    align = ctx.target["bulk_copy_align"]
    pitched = set()
    for site in loads:
        call = site.call
        decl = ctx.decl(call.args["dst"].name)
        if not isinstance(decl, SmemDecl):
            continue
        row = _row_size(ctx, call, decl, multiple)
        if row is not None:
            yield row
        tensor = call.args["src"].name
        if ctx.workload is None or tensor not in ctx.workload.tensors:
            continue
        elem = dtype_bytes(ctx.view.tensor_dtype(tensor))
        found = _coordinate(ctx, site, tensor, elem, align)
        if found is not None:
            yield found
        if tensor not in pitched:
            pitched.add(tensor)
            found = _pitch(ctx, call, tensor, elem, align)
            if found is not None:
                yield found
    yield from _stores(ctx, multiple, align)
