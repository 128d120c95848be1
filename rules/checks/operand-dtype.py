"""The operands of a primitive must agree on their element types; only `cast` converts.

## What it does
Checks the dtypes across the operands of each call:
- `load`: the shared-memory view has the dtype of the global tensor (bulk copies move
  bytes, they do not convert);
- `lm.mma` and `lm.mma_async`: `a` and `b` have the same dtype;
- `lm.store` and `<smem>.store_async`: the source tile has the dtype of the destination
  tensor (convert first with `lm.elementwise(dst, src, op="cast")`);
- `lm.elementwise`: `dst` and `src` have the same dtype unless `op="cast"`;
- `lm.reduce` with `argmin`/`argmax`, and `lm.topk`: the index result is `i32`;
- `lm.sqdist`: `x`, `c` and `dst` are floating-point.
The finding points at the offending argument.

## Why is this bad?
A dtype mismatch reinterprets bits: a bf16 tile read as f16, or f32 bytes stored where the
tensor holds f16, produces garbage of the right shape that passes every structural check
and fails only numerically, if at all. Byte counts (transaction bytes, tile rows) are also
computed from the dtype, so a mismatch desynchronises the barrier protocol too.

## Failing example
`corpus/invalid/scale/store_after_downcast.cake`:
```python
lm.store(Y, at=(m0, n0), src=yh, mask=True)
```

## Passing example
`corpus/valid/scale/tile_1stage.cake`:
```python
lm.store(Y, at=(m0, n0), src=y, mask=True)
```
"""

from cakegov.ir.dtypes import FLOAT_DTYPES

CODE = "H004"
NAME = "operand-dtype"
VERSION = "1.1.0"
SEVERITY = "blocking"
CATEGORY = "hardware"
STATUS = "stable"
MOTIVATED_BY = ("corpus/invalid/scale/store_after_downcast.cake",)

_INDEX_DTYPE = "i32"


def _dtype(ctx, value):
    """(name, dtype) of an smem/fragment/tensor operand, or None if unknown."""
    kind = getattr(value, "kind", None)
    if kind in ("smem", "fragment"):
        decl = ctx.decl(value.name)
        return (value.name, decl.dtype) if decl is not None else None
    if kind == "tensor":
        if ctx.workload is None or value.name not in ctx.workload.tensors:
            return None
        return value.name, ctx.view.tensor_dtype(value.name)
    return None


def _mismatch(ctx, call, arg, other, message, hint):
    """A finding when the dtypes of `arg` and `other` differ."""
    mine = _dtype(ctx, call.args.get(arg))
    theirs = _dtype(ctx, call.args.get(other))
    if mine is None or theirs is None or mine[1] == theirs[1]:
        return None
    return ctx.finding(
        call, message.format(a=mine, b=theirs),
        condition=f"{arg}.dtype == {other}.dtype",
        hint=hint.format(a=mine, b=theirs),
        resource=mine[0], span=call.arg_spans.get(arg),
        evidence={arg: mine[1], other: theirs[1]},
    )


def _wanted(ctx, call, arg, allowed, what):
    mine = _dtype(ctx, call.args.get(arg))
    if mine is None or mine[1] in allowed:
        return None
    return ctx.finding(
        call, f"`{call.primitive}` {what}: `{mine[0]}` is {mine[1]}",
        condition=f"{arg}.dtype in ({', '.join(sorted(allowed))})",
        hint=f"declare `{mine[0]}` as {' or '.join(sorted(allowed))}",
        resource=mine[0], span=call.arg_spans.get(arg),
        evidence={arg: mine[1], "allowed": sorted(allowed)},
    )


def _enum(call, arg):
    value = call.args.get(arg)
    return getattr(value, "value", None)


def _findings(ctx, call):
    p = call.primitive
    if p == "load":
        yield _mismatch(
            ctx, call, "dst", "src",
            "bulk copy into `{a[0]}` ({a[1]}) from `{b[0]}` ({b[1]}): bulk copies move "
            "bytes and do not convert",
            "declare `{a[0]}` as {b[1]} and convert after the copy with "
            "`lm.elementwise(..., op=\"cast\")`")
    elif p in ("mma", "mma_async"):
        yield _mismatch(
            ctx, call, "b", "a",
            "mma operands differ: `b` (`{a[0]}`) is {a[1]} but `a` (`{b[0]}`) is {b[1]}",
            "give both operands the same dtype ({b[1]}): declare `{a[0]}` as {b[1]}")
    elif p in ("store", "store_async"):
        yield _mismatch(
            ctx, call, "src", "dst",
            "store of `{a[0]}` ({a[1]}) into `{b[0]}` ({b[1]}) without a conversion",
            "store a {b[1]} tile: declare `{a[0]}` as {b[1]}, or convert into a {b[1]} "
            "fragment with `lm.elementwise(tmp, {a[0]}, op=\"cast\")` and store that")
    elif p == "elementwise" and _enum(call, "op") != "cast":
        yield _mismatch(
            ctx, call, "dst", "src",
            "`elementwise` op=\"" + str(_enum(call, "op")) + "\" writes `{a[0]}` ({a[1]}) "
            "from `{b[0]}` ({b[1]}); only op=\"cast\" changes the dtype",
            "make `{a[0]}` {b[1]}, or convert in a separate `op=\"cast\"` step")
    elif p == "reduce" and _enum(call, "op") in ("argmin", "argmax"):
        yield _wanted(ctx, call, "dst", {_INDEX_DTYPE},
                      f"{_enum(call, 'op')} writes indices, which are {_INDEX_DTYPE}")
    elif p == "topk":
        yield _wanted(ctx, call, "dst", {_INDEX_DTYPE},
                      f"writes indices, which are {_INDEX_DTYPE}")
    elif p == "sqdist":
        for arg in ("x", "c", "dst"):
            yield _wanted(ctx, call, arg, FLOAT_DTYPES,
                          f"`{arg}` must be floating-point")


def check(ctx):
    for site in ctx.calls():
        for finding in _findings(ctx, site.call):
            if finding is not None:
                yield finding
