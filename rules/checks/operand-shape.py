"""The tile operands of a primitive must have the shapes its operation relates.

## What it does
Compares, for every call, the shapes of the tiles it names (one stage of a shared-memory
buffer, a register fragment, or the window of a fragment sub-tile `acc[:, a:b]`; a 1-D
shape `(n,)` counts as `n` rows of one column):
- `lm.elementwise(dst, src)`: `dst` and `src` have the same shape;
- `lm.rowwise(dst, src, vec)`: `src` has the shape of `dst`, and `vec` holds one value
  per row of `dst` (`(rows,)`);
- `lm.reduce(dst, src, axis=a)`: `dst` has the shape of `src` without axis `a`;
- `lm.sqdist(dst, x, c)`: `x` is (R, D), `c` is (C, D) and `dst` is (R, C);
- `lm.topk(dst, src, k=k)`: `dst` is (rows of `src`, k) and `k` is at most the columns
  of `src`;
- `lm.argmin_update(best, index, src, ...)`: `best` and `index` hold one value per row
  of `src`;
- `lm.scale_accumulate(acc, src, row_scale, ...)`: `src` has the shape of `acc`, and
  `row_scale` holds at least one scale per row of `acc`.
The finding points at the argument whose shape disagrees, names both shapes and the
elements that would be read or written outside a tile.

## Why is this bad?
The CUDA templates index one operand with the coordinates of the other
(`Smem::for_each` visits the destination's elements and reads the source at the same
(row, column); a fragment's `for_each` writes the shared tile at its own coordinates).
Shapes that disagree make those coordinates run past the smaller tile: a read past a
shared-memory stage returns the neighbouring buffer's bytes, a write past it corrupts
that buffer, silently (shared memory has no bounds check below the CTA's allocation;
CUDA C++ Programming Guide, "Shared Memory"). Nothing in the barrier protocol is wrong,
so no protocol rule can see it, and the result is wrong data of the right size.

## Failing example
`corpus/invalid/scale/operand_shape.cake`:
```python
lm.elementwise(y, x_s[0], op="scale", alpha=2.5)  # expect: H008
```

## Passing example
`corpus/valid/scale/tile_1stage.cake`:
```python
lm.elementwise(y, x_s[0], op="scale", alpha=2.5)
```
"""

from cakegov.ir.expr import Const
from cakegov.plugin import operand_shape

CODE = "H008"
NAME = "operand-shape"
VERSION = "1.0.0"
SEVERITY = "blocking"
CATEGORY = "hardware"
STATUS = "stable"
MOTIVATED_BY = ("corpus/invalid/scale/operand_shape.cake",)

_TILES = ("smem", "fragment")


def _tile(ctx, call, arg):
    """(name, 2-D shape, written shape) of a tile argument, or None."""
    value = call.args.get(arg)
    if getattr(value, "kind", None) not in _TILES or ctx.decl(value.name) is None:
        return None
    shape = tuple(operand_shape(value, ctx.view))
    if len(shape) == 1:
        return value.name, (shape[0], 1), shape
    if len(shape) == 2:
        return value.name, shape, shape
    return None


def _int(call, arg):
    value = call.args.get(arg)
    expr = getattr(value, "expr", None)
    if isinstance(expr, Const):
        return int(expr.value)
    raw = getattr(value, "value", None)
    return raw if isinstance(raw, int) and not isinstance(raw, bool) else None


def _text(shape):
    return " x ".join(str(d) for d in shape)


def _finding(ctx, call, arg, tile, message, condition, hint, **evidence):
    return ctx.finding(
        call, message, condition=condition, hint=hint, resource=tile[0],
        span=call.arg_spans.get(arg),
        evidence={**{k: list(v) if isinstance(v, tuple) else v for k, v in evidence.items()},
                  "primitive": call.primitive},
    )


def _window(ctx, call, *tiles):
    """`, or pass ...`: the sub-tile of the larger operand, when it is a 2-D fragment
    that holds the smaller one."""
    (_, small), (big_arg, big) = sorted(tiles, key=lambda t: t[1][1][0] * t[1][1][1])
    if (getattr(call.args.get(big_arg), "kind", None) != "fragment" or len(big[2]) != 2
            or small[1][0] > big[1][0] or small[1][1] > big[1][1]):
        return ""
    return (f", or pass the part of `{big[0]}` it means as a sub-tile "
            f"(`{big[0]}[0:{small[1][0]}, 0:{small[1][1]}]`)")


def _same(ctx, call, arg, other, why):
    """`arg` must have the 2-D shape of `other`."""
    mine, theirs = _tile(ctx, call, arg), _tile(ctx, call, other)
    if mine is None or theirs is None or mine[1] == theirs[1]:
        return None
    over = [f"{'rows' if i == 0 else 'columns'} ({a} against {b})"
            for i, (a, b) in enumerate(zip(mine[1], theirs[1], strict=True)) if a != b]
    return _finding(
        ctx, call, arg, mine,
        f"`lm.{call.primitive}` operands disagree in shape: `{arg}` (`{mine[0]}`) is "
        f"{_text(mine[2])} but `{other}` (`{theirs[0]}`) is {_text(theirs[2])}: {why} "
        f"(they differ in {' and '.join(over)})",
        f"{arg}.shape == {other}.shape",
        f"declare `{mine[0]}` as {tuple(theirs[2])} (or `{theirs[0]}` as "
        f"{tuple(mine[2])})" + _window(ctx, call, (arg, mine), (other, theirs)),
        **{arg: mine[2], other: theirs[2]})


def _per_row(ctx, call, arg, rows_of, at_least=False):
    """`arg` holds one value per row of `rows_of` (a vector: (rows,) or (rows, 1))."""
    mine, theirs = _tile(ctx, call, arg), _tile(ctx, call, rows_of)
    if mine is None or theirs is None:
        return None
    rows = theirs[1][0]
    count = mine[1][0] * mine[1][1]
    if at_least:
        if count >= rows:
            return None
        return _finding(
            ctx, call, arg, mine,
            f"`lm.{call.primitive}` reads one value of `{arg}` (`{mine[0]}`) per row of "
            f"`{rows_of}` (`{theirs[0]}`, {rows} rows), but `{mine[0]}` holds {count}: rows "
            f"{count}..{rows - 1} would read past it",
            f"{arg} elements >= {rows_of} rows",
            f"declare `{mine[0]}` with {rows} elements (`({rows},)`)",
            **{arg: mine[2], rows_of: theirs[2]})
    if mine[1] == (rows, 1):
        return None
    return _finding(
        ctx, call, arg, mine,
        f"`lm.{call.primitive}` needs one value of `{arg}` per row of `{rows_of}` "
        f"(`{theirs[0]}` is {_text(theirs[2])}), but `{mine[0]}` is {_text(mine[2])}",
        f"{arg}.shape == ({rows_of}.rows,)",
        f"declare `{mine[0]}` with shape ({rows},)",
        **{arg: mine[2], rows_of: theirs[2]})


def _reduce(ctx, call):
    dst, src, axis = _tile(ctx, call, "dst"), _tile(ctx, call, "src"), _int(call, "axis")
    if dst is None or src is None or axis not in (0, 1) or len(src[2]) != 2:
        return None
    want = (src[2][0],) if axis == 1 else (src[2][1],)
    if dst[1] == (want[0], 1):
        return None
    return _finding(
        ctx, call, "dst", dst,
        f"`lm.reduce` over axis {axis} of `{src[0]}` ({_text(src[2])}) gives {want[0]} "
        f"values, but `dst` (`{dst[0]}`) is {_text(dst[2])}",
        "dst.shape == src.shape without axis",
        f"declare `{dst[0]}` with shape {want}", dst=dst[2], src=src[2], axis=axis)


def _sqdist(ctx, call):
    dst, x, c = (_tile(ctx, call, a) for a in ("dst", "x", "c"))
    if dst is None or x is None or c is None:
        return None
    want = (x[1][0], c[1][0])
    if x[1][1] != c[1][1]:
        return _finding(
            ctx, call, "c", c,
            f"`lm.sqdist` sums over the columns of `x` (`{x[0]}`, {_text(x[2])}) and `c` "
            f"(`{c[0]}`, {_text(c[2])}): their column counts (the dimension D) differ",
            "x.cols == c.cols", f"give `{c[0]}` {x[1][1]} columns (D)",
            x=x[2], c=c[2], dst=dst[2])
    if dst[1] == want:
        return None
    return _finding(
        ctx, call, "dst", dst,
        f"`lm.sqdist` of `{x[0]}` ({x[1][0]} rows) against `{c[0]}` ({c[1][0]} rows) is "
        f"{_text(want)}, but `dst` (`{dst[0]}`) is {_text(dst[2])}",
        "dst.shape == (x.rows, c.rows)", f"declare `{dst[0]}` with shape {want}",
        x=x[2], c=c[2], dst=dst[2])


def _topk(ctx, call):
    dst, src, k = _tile(ctx, call, "dst"), _tile(ctx, call, "src"), _int(call, "k")
    if dst is None or src is None or k is None:
        return None
    if k > src[1][1]:
        return _finding(
            ctx, call, "k", src,
            f"`lm.topk` selects k = {k} of the {src[1][1]} columns of `{src[0]}`",
            "k <= src.cols", f"select at most {src[1][1]} (or widen `{src[0]}`)",
            src=src[2], k=k)
    want = (src[1][0], k)
    if dst[1] == want:
        return None
    return _finding(
        ctx, call, "dst", dst,
        f"`lm.topk` writes {_text(want)} indices (k = {k} per row of `{src[0]}`), but "
        f"`dst` (`{dst[0]}`) is {_text(dst[2])}",
        "dst.shape == (src.rows, k)", f"declare `{dst[0]}` with shape {want}",
        dst=dst[2], src=src[2], k=k)


def _findings(ctx, call):
    p = call.primitive
    if p == "elementwise":
        yield _same(ctx, call, "src", "dst",
                    "the copy visits the elements of one at the coordinates of the other, "
                    "past the end of the smaller tile")
    elif p == "rowwise":
        yield _same(ctx, call, "src", "dst", "element (r, c) of `dst` is computed from "
                                             "element (r, c) of `src`")
        yield _per_row(ctx, call, "vec", "dst")
    elif p == "reduce":
        yield _reduce(ctx, call)
    elif p == "sqdist":
        yield _sqdist(ctx, call)
    elif p == "topk":
        yield _topk(ctx, call)
    elif p == "argmin_update":
        yield _per_row(ctx, call, "best", "src")
        yield _per_row(ctx, call, "index", "src")
    elif p == "scale_accumulate":
        yield _same(ctx, call, "src", "acc", "element (r, c) of `src` is added to element "
                                             "(r, c) of `acc`")
        yield _per_row(ctx, call, "row_scale", "acc", at_least=True)


def check(ctx):
    for site in ctx.calls():
        for finding in _findings(ctx, site.call):
            if finding is not None:
                yield finding
