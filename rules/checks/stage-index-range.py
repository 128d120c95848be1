"""Stage indices of shared-memory views and raw mbarriers, and the windows of fragment
sub-tiles, must stay inside what was declared.

## What it does
- For every stage-indexed shared-memory view (`a_s[k % S]`) and raw mbarrier
  (`full[k % S]`) used by a call, it bounds the index over every loop iteration and check
  shape and reports an index that can leave `[0, stages)`, with the range it found.
- A view or mbarrier array with more than one stage used without an index is reported:
  which stage is meant is undefined.
- Every buffer of a pipeline must have the pipeline's number of stages; a mismatch is
  reported at the pipeline declaration (uses through `ring.stage(k)` are then not reported
  again).
- A fragment sub-tile (`acc[:, j * 32:(j + 1) * 32]`) whose origin depends on loop
  variables is bounded the same way: its rows and columns must stay inside the
  fragment's for every iteration (a constant origin out of range is already an input
  error, E103).

## Why is this bad?
An index past the last stage addresses the next buffer (or the mbarriers that follow the
buffers in the layout): the copy overwrites data another role is reading, or an arrive
lands on the wrong barrier. The result is a race or a deadlock that depends on the
iteration count, so it often survives small tests. A sub-tile past the fragment's edge
reads or writes registers the fragment does not have: the emitted predicate selects no
element there, so the staging buffer keeps stale data and the output is silently wrong.

## Failing example
`corpus/invalid/gemm/pipeline_buffer_stages.cake`:
```python
ring = lm.pipeline(stages=4, buffers=[a_s, b_s], producer=loader, consumer=math)
```

## Passing example
`corpus/valid/gemm/ws_pipeline_s4.cake`:
```python
ring = lm.pipeline(stages=4, buffers=[a_s, b_s], producer=loader, consumer=math)
```
"""

from cakegov.ir.expr import EvalError, StageOf, render
from cakegov.ir.nodes import (
    BarrierRef,
    FragmentDecl,
    FragmentRef,
    MBarrierDecl,
    PipelineDecl,
    SmemDecl,
    SmemRef,
)
from cakegov.lower.fragments import view_2d

CODE = "H006"
NAME = "stage-index-range"
VERSION = "1.2.0"
SEVERITY = "blocking"
CATEGORY = "hardware"
STATUS = "stable"
MOTIVATED_BY = (
    "corpus/invalid/gemm/pipeline_buffer_stages.cake",
    "corpus/invalid/kmeans_assign/barrier_index_out_of_range.cake",
)


def _pipeline_findings(ctx, pipe):
    for name in pipe.buffers:
        decl = ctx.decl(name)
        if isinstance(decl, SmemDecl) and decl.stages != pipe.stages:
            yield ctx.finding(
                pipe, f"pipeline `{pipe.name}` has {pipe.stages} stages but its buffer "
                f"`{name}` is declared with {decl.stages}: `{pipe.name}.stage(k)` ranges "
                f"over 0..{pipe.stages - 1}",
                condition=f"{name}.stages == {pipe.name}.stages",
                hint=f"declare `{name}` with `stages={pipe.stages}` (or give the pipeline "
                     f"`stages={decl.stages}`)",
                resource=name,
                evidence={"pipeline_stages": pipe.stages, "buffer_stages": decl.stages},
            )


def _covered_by_pipeline(ctx, name, index):
    """True when `index` is `ring.stage(k)` of a pipeline that owns `name`."""
    if not isinstance(index, StageOf):
        return False
    pipe = ctx.decl(index.pipeline)
    return isinstance(pipe, PipelineDecl) and name in pipe.buffers


def _what(kind):
    return "shared-memory view" if kind == "smem" else "mbarrier array"


def _index_finding(ctx, site, value, decl, kind):
    call = site.call
    span = value.span
    index = value.stage if kind == "smem" else value.index
    stages = decl.stages
    if index is None:
        if stages <= 1:
            return None
        return ctx.finding(
            call, f"{_what(kind)} `{decl.name}` has {stages} stages but is used without a "
            "stage index", condition=f"`{decl.name}` is indexed: {decl.name}[s], 0 <= s < "
            f"{stages}",
            hint=f"index it: `{decl.name}[k % {stages}]` (or `{decl.name}[ring.stage(k)]` "
                 "through a pipeline)",
            resource=decl.name, role=site.role.name, span=span,
            evidence={"stages": stages},
        )
    if _covered_by_pipeline(ctx, decl.name, index):
        return None
    try:
        found = ctx.value_range(index, site.loops)
    except EvalError:
        return None
    if found is None or (found[0] >= 0 and found[1] < stages):
        return None
    lo, hi = found
    values = f"is {lo}" if lo == hi else f"takes values {lo}..{hi}"
    count = ctx.spelling(decl, "stages") or str(stages)  # `S` where the source says so
    if stages == 1:
        fix = f"use `{decl.name}[0]` (its only stage)"
    else:
        fix = f"index with `% {count}` (e.g. `{decl.name}[k % {count}]`)"
    return ctx.finding(
        call, f"{_what(kind)} `{decl.name}` has "
        f"{'1 stage (index 0)' if stages == 1 else f'{stages} stages (0..{stages - 1})'} "
        f"but its index `{_index_text(ctx, value, index)}` {values}",
        condition=f"0 <= index < stages {stages} for every iteration and check shape",
        hint=f"{fix}, or declare `{decl.name}` with `stages={max(hi + 1, stages)}`",
        resource=decl.name, role=site.role.name, stage=hi if hi >= stages else lo,
        span=span, evidence={"stages": stages, "range": [lo, hi]},
    )


def _index_text(ctx, value, index):
    """The index as the schedule writes it (`k % S` in `a_s[k % S]`), else the IR's."""
    written = ctx.spelling(value) or ""
    if written.endswith("]") and "[" in written:
        return written[written.index("[") + 1:-1]
    return render(index)


def _tile_finding(ctx, site, value):
    """A fragment sub-tile whose window leaves the fragment for some iteration."""
    decl = ctx.decl(value.name)
    if not isinstance(decl, FragmentDecl):
        return None
    tile = value.tile
    rows, cols = view_2d(decl.shape)
    for axis, origin, size, extent in (("row", tile.row0, tile.rows, rows),
                                       ("column", tile.col0, tile.cols, cols)):
        try:
            found = ctx.value_range(origin, site.loops)
        except EvalError:
            continue
        if found is None or (found[0] >= 0 and found[1] + size <= extent):
            continue
        lo, hi = found
        return ctx.finding(
            site.call, f"sub-tile `{ctx.spelling(value) or value.name}` of fragment "
            f"`{decl.name}` ({rows} x {cols}) starts at {axis} `{render(origin)}` = "
            f"{lo}..{hi} and spans {size} {axis}s: {axis}s up to {hi + size - 1} are "
            f"outside 0..{extent - 1}",
            condition=f"0 <= {axis} origin and origin + {size} <= {extent} for every "
                      "iteration and check shape",
            hint=f"bound the loop so that the window ends at {axis} {extent}, or shift it",
            resource=decl.name, role=site.role.name, span=value.span,
            evidence={"extent": extent, "size": size, "origin_range": [lo, hi]},
        )
    return None


def check(ctx):
    for pipe in ctx.decls(PipelineDecl):
        yield from _pipeline_findings(ctx, pipe)
    for site in ctx.calls():
        for value in site.call.args.values():
            if isinstance(value, FragmentRef) and value.tile is not None:
                finding = _tile_finding(ctx, site, value)
                if finding is not None:
                    yield finding
                continue
            if isinstance(value, SmemRef):
                decl, kind = ctx.decl(value.name), "smem"
                if not isinstance(decl, SmemDecl):
                    continue
            elif isinstance(value, BarrierRef) and value.pipeline_side is None:
                decl, kind = ctx.decl(value.name), "mbarrier"
                if not isinstance(decl, MBarrierDecl):
                    continue
            else:
                continue
            finding = _index_finding(ctx, site, value, decl, kind)
            if finding is not None:
                yield finding
