"""A tile that may hang over the edge of a tensor needs a tail strategy.

## What it does
For every `load`, `lm.store` and `store_async`, it maps the tile's dimensions onto the
tensor's workload dimensions (gemm `A` is (M, K), so an `a_s` tile (BM, BK) covers M with
BM rows and K with BK columns). When a workload size is not guaranteed to be a multiple of
the tile extent (neither fixed by `sizes=` to a multiple nor declared in `divisible=` with
a multiple of the extent) and the access has no tail strategy (`pad=True` on a load,
`mask=True` on a store), it reports the dimension, the tile extent, the size and a check
shape of the workload on which the last tile crosses the edge.

## Why is this bad?
For a size that is not a tile multiple, the last tile of each row or column reaches past
the end of the tensor: a load reads another row's data (or faults), a store overwrites
memory that belongs to someone else. The schedule is then correct only on the shapes
someone happened to test.

## Failing example
`corpus/invalid/kmeans_assign/labels_store_unmasked.cake`:
```python
lm.store(labels, at=(r0 + t * BR,), src=lab)
```

## Passing example
`corpus/valid/kmeans_assign/rows_pipelined_s2.cake`:
```python
lm.store(labels, at=(r0 + t * BR,), src=lab, mask=True)
```
"""

from cakegov.ir.expr import Const
from cakegov.ir.nodes import BoolValue, ExprValue, FragmentDecl, SmemDecl
from cakegov.plugin import operand_shape

CODE = "H005"
NAME = "tile-divisibility"
VERSION = "1.2.0"
SEVERITY = "blocking"
CATEGORY = "hardware"
STATUS = "stable"
MOTIVATED_BY = (
    "corpus/invalid/kmeans_assign/labels_store_unmasked.cake",
    "corpus/invalid/gemm/load_without_pad.cake",
)

# primitive -> (tensor argument, tile argument, tail-strategy flag)
_ACCESSES = {
    "load": ("src", "dst", "pad"),
    "store": ("dst", "src", "mask"),
    "store_async": ("dst", "src", "mask"),
}


def _enabled(value):
    """Whether a bool argument is statically true."""
    if isinstance(value, BoolValue):
        return value.value
    if isinstance(value, ExprValue) and isinstance(value.expr, Const):
        return bool(value.expr.value)
    return False


def _guaranteed(schedule, size, extent):
    if size in schedule.sizes:
        return schedule.sizes[size] % extent == 0
    if size in schedule.divisible:
        return schedule.divisible[size] % extent == 0
    return False


def _breaking_shape(ctx, size, extent):
    """A check shape on which `size` is not a multiple of `extent`, or None."""
    for shape in ctx.shapes:
        if size in shape and shape[size] % extent:
            return shape
    return None


def _finding(ctx, site, tensor, tile, size, extent, flag):
    call = site.call
    shape = _breaking_shape(ctx, size, extent)
    if shape is not None:
        value = shape[size]
        where = (f"for the check shape {', '.join(f'{k}={v}' for k, v in shape.items())} "
                 f"the last tile covers {size} {value // extent * extent}.."
                 f"{value // extent * extent + extent - 1} but {size} = {value}")
    else:
        value = extent + 1
        where = f"e.g. {size} = {value} leaves a partial last tile"
    fix = "`pad=True` (zero-fill outside the tensor)" if flag == "pad" else \
        "`mask=True` (bounds-check every element)"
    verb = "loads" if call.primitive == "load" else "stores"
    return ctx.finding(
        call,
        f"`{call.primitive}` {verb} `{tensor}` in tiles of {extent} along {size} (tile "
        f"`{tile}`), but lm.{size} is not guaranteed to be a multiple of {extent}: {where}",
        condition=f"{size} % {extent} == 0 (sizes=/divisible=) or {flag}=True",
        hint=f"add {fix} to this call, or declare `divisible={{\"{size}\": {extent}}}` in "
             "`@cake.schedule` if every size you run is a multiple",
        resource=tile, role=site.role.name,
        evidence={"dim": size, "extent": extent, "tensor": tensor,
                  "shape": shape, "tail_flag": flag},
    )


def check(ctx):
    if ctx.workload is None:
        return
    for name, (tensor_arg, tile_arg, flag) in _ACCESSES.items():
        for site in ctx.calls(name):
            call = site.call
            if _enabled(call.args.get(flag)):
                continue
            tensor = call.args[tensor_arg].name
            tile = call.args[tile_arg].name
            decl = ctx.decl(tile)
            dims = ctx.view.tensor_dims(tensor)
            shape = operand_shape(call.args[tile_arg], ctx.view)  # a sub-tile: its window
            if not isinstance(decl, SmemDecl | FragmentDecl) or len(dims) != len(shape):
                continue
            for size, extent in zip(dims, shape, strict=True):
                if extent > 1 and not _guaranteed(ctx.schedule, size, extent):
                    yield _finding(ctx, site, tensor, tile, size, extent, flag)
