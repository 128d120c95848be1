"""A swizzled shared-memory view must fit its swizzle width and sit on its swizzle repeat.

## What it does
For every `lm.smem(..., swizzle="32B" | "64B" | "128B")` it checks:
- the tile's inner row (innermost extent x dtype bytes) is at most the swizzle width
  (32/64/128 bytes; equal is the normal case);
- an explicitly declared `align=` is not smaller than the swizzle repeat of the target
  (`swizzle_repeat_32B/64B/128B`, 256/512/1024 bytes on sm_90a): the author asserted an
  alignment the swizzle cannot work with (the layout raises it silently, which hides the
  mistake from whoever reads the declaration). `align=16` is the default and cannot be
  told apart from an omitted `align`, so it is not reported;
- every stage of a multi-stage view starts on the repeat: the stage size is a multiple of
  it.
Each finding points at the declaration.

## Why is this bad?
The TMA/bulk swizzle modes permute 16-byte chunks within rows of the swizzle width and
repeat the pattern every 8 rows; the hardware computes the pattern from address bits, so a
row wider than the width, or a buffer (or stage) that does not start on the repeat,
scrambles the data: the MMA reads the wrong elements and the result is silently wrong.

## Failing example
`corpus/invalid/kmeans_assign/swizzle_row_too_wide.cake`:
```python
x_s = lm.smem("f32", (BR, 64), stages=2, swizzle="128B")
```

## Passing example
`corpus/valid/gemm/ws_pipeline_s4.cake`:
```python
a_s = lm.smem("bf16", (BM, BK), stages=4, swizzle="128B")
```
"""

from cakegov.ir.dtypes import dtype_bytes
from cakegov.ir.nodes import SWIZZLE_BYTES, SmemDecl

CODE = "H003"
NAME = "swizzle-alignment"
VERSION = "1.1.0"
SEVERITY = "blocking"
CATEGORY = "hardware"
STATUS = "stable"
MOTIVATED_BY = (
    "corpus/invalid/kmeans_assign/swizzle_row_too_wide.cake",
    "corpus/invalid/gemm/swizzle_align_too_small.cake",
)

_DEFAULT_ALIGN = 16  # what `lm.smem` records when `align=` is omitted


def _row_too_wide(ctx, decl, width):
    elem = dtype_bytes(decl.dtype)
    fits = max(width // elem, 1)
    wider = [name for name, w in SWIZZLE_BYTES.items() if w >= decl.row_bytes]
    other = f", or use swizzle=\"{wider[0]}\"" if wider else ""
    return ctx.finding(
        decl, f"`{decl.name}` rows are {decl.shape[-1]} x {decl.dtype} = {decl.row_bytes} "
        f"bytes, wider than its {decl.swizzle} swizzle ({width} bytes)",
        condition=f"row bytes {decl.row_bytes} <= swizzle width {width}",
        hint=f"split the tile so its innermost extent is {fits} elements ({width} bytes)"
             f"{other}, or drop the swizzle",
        resource=decl.name,
        evidence={"row_bytes": decl.row_bytes, "swizzle_bytes": width},
    )


def _align_too_small(ctx, decl, repeat, key):
    return ctx.finding(
        decl, f"`{decl.name}` declares align={decl.align}, but its {decl.swizzle} swizzle "
        f"repeats every {repeat} bytes on {ctx.target.name} and needs a {repeat}-byte "
        "aligned buffer",
        condition=f"align {decl.align} >= {key} {repeat}",
        hint=f"write `align={repeat}` (or omit `align=`; the layout then aligns swizzled "
             "buffers to their repeat)",
        resource=decl.name,
        evidence={"align": decl.align, "repeat": repeat, "source": ctx.target.source(key)},
    )


def _stage_off_repeat(ctx, decl, repeat, key):
    return ctx.finding(
        decl, f"`{decl.name}` stages are {decl.stage_bytes} bytes, not a multiple of its "
        f"{decl.swizzle} swizzle repeat ({repeat} bytes): stage 1 starts at offset "
        f"{decl.stage_bytes}, off the swizzle pattern",
        condition=f"stage bytes {decl.stage_bytes} % {key} {repeat} == 0",
        hint=f"make each stage a multiple of {repeat} bytes (more rows per tile), or use "
             "a narrower swizzle",
        resource=decl.name, stage=1,
        evidence={"stage_bytes": decl.stage_bytes, "repeat": repeat,
                  "source": ctx.target.source(key)},
    )


def check(ctx):
    if ctx.target is None:
        return
    for decl in ctx.decls(SmemDecl):
        width = SWIZZLE_BYTES.get(decl.swizzle, 0)
        if not width:
            continue
        if decl.row_bytes > width:
            yield _row_too_wide(ctx, decl, width)
        key = f"swizzle_repeat_{decl.swizzle}"
        repeat = ctx.target.get(key)
        if repeat is None:
            continue
        if decl.align != _DEFAULT_ALIGN and decl.align < repeat:
            yield _align_too_small(ctx, decl, repeat, key)
        if decl.stages > 1 and decl.stage_bytes % repeat:
            yield _stage_off_repeat(ctx, decl, repeat, key)
