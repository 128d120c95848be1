"""A view that reuses another view's storage (`alias=`) must fit inside it and meet its
own alignment there.

## What it does
`lm.smem(..., alias=root)` places the view at the root's offset and gives it no storage
of its own (cakegov/lower/layout.py): the union counts once against shared-memory
capacity. This rule checks that the alias's bytes (`stage bytes x stages`) are no more
than the root's, so that the alias ends inside the storage it reuses, and that the
root's offset is a multiple of the alignment the alias itself needs (its `align=`, and
for a swizzled view the swizzle repeat: 1024 bytes for `"128B"`).

## Why is this bad?
An alias larger than its root runs over whatever the layout placed after the root (the
next buffer, or the mbarriers), a silent overlap the schedule did not ask for. A
swizzled alias at an offset that is not a multiple of its swizzle repeat reads and writes
with the wrong bank pattern, and bulk copies need 16-byte aligned shared addresses
(CUDA programming guide, TMA swizzle; PTX ISA, cp.async.bulk).

## Failing example
`corpus/invalid/gemm/epilogue_union_too_large.cake`:
```python
    c_s = lm.smem("f32", (BM, BN), stages=2, alias=a_s)  # expect: R010
```

## Passing example
`corpus/valid/gemm/epilogue_union_s4.cake`:
```python
    c_s = lm.smem("f32", (BM, BN), alias=a_s)                # mainloop / epilogue union
```
"""

from cakegov.ir.nodes import SmemDecl
from cakegov.lower.layout import buffer_alignment

CODE = "R010"
NAME = "smem-alias"
VERSION = "1.0.0"
SEVERITY = "blocking"
CATEGORY = "resources"
STATUS = "stable"
MOTIVATED_BY = ("corpus/invalid/gemm/epilogue_union_too_large.cake",)


def check(ctx):
    decls = {d.name: d for d in ctx.decls(SmemDecl)}
    layout = ctx.layout
    for decl in decls.values():
        if not decl.alias or decl.alias not in decls:
            continue
        root = decls[decl.alias]
        have, need = root.stage_bytes * root.stages, decl.stage_bytes * decl.stages
        if need > have:
            yield ctx.finding(
                decl,
                f"`{decl.name}` reuses the storage of `{root.name}` but needs {need:,} bytes "
                f"and `{root.name}` has {have:,}",
                condition=f"bytes of `{decl.name}` ({decl.stage_bytes:,} x {decl.stages}) <= "
                          f"bytes of `{root.name}` ({root.stage_bytes:,} x {root.stages})",
                hint=f"give `{root.name}` more stages, or make `{decl.name}` smaller (fewer "
                     "stages or a smaller tile)",
                resource=decl.name,
                evidence={"alias_bytes": need, "root_bytes": have},
            )
            continue
        slot = layout.buffer(root.name)
        align = buffer_alignment(decl)
        if slot is not None and slot.offset % align:
            yield ctx.finding(
                decl,
                f"`{decl.name}` needs {align}-byte alignment but the storage of `{root.name}` "
                f"it reuses starts at offset {slot.offset}",
                condition=f"offset of `{root.name}` ({slot.offset}) % alignment of "
                          f"`{decl.name}` ({align}) == 0",
                hint=f"give `{root.name}` at least `align={align}` (or the same swizzle)",
                resource=decl.name,
                evidence={"offset": slot.offset, "alignment": align},
            )
