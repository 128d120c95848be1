"""Persistent kernels in the front end: `lm.grid(axis)`, running counters and loops whose
trip counts depend on the CTA (docs/language.md, "Persistent kernels and tile
schedulers").

A persistent kernel launches a fixed number of CTAs (often one per SM) and lets each one
walk the output tiles with a stride of the grid (CUTLASS's `PersistentTileSchedulerSm90`,
FlashAttention-3's `StaticPersistentTileScheduler`, DeepGEMM's `Scheduler`):

    for tile in lm.range(lm.block(0), TILES, lm.grid(0)):     # tile = b, b + G, ...

so a loop's bounds may use `lm.block(axis)` (its trip count differs between CTAs, and is
zero for a CTA past the last tile) and its step may be an expression over the sizes, such
as `lm.grid(0)`.

`lm.grid(axis)` is the launch's grid extent along `axis` (`gridDim`); the front end
substitutes the launch's own expression, so it needs no node kind of its own and every
consumer of expressions reads it as it reads the launch.

A *counter* (`it = lm.counter()`) is the pipeline state a persistent role carries from
tile to tile (CUTLASS's and FlashAttention-3's `PipelineState`): the loops written
`lm.range(..., counter=it)` advance it by one after each iteration, and inside them `it`
is the number of such iterations the role finished before, so `it % S` and
`(it // S) % 2` are the stage and phase of the ring position even when the inner trip
count changes from tile to tile (causal attention). Every role has its own copy, starting
at 0; a counter cannot bound a loop (trip counts are known when a loop starts)."""

from __future__ import annotations

from cakegov.ir.expr import Const, Counter, Expr, free_symbols


def grid_extent(grid: tuple[Expr, ...], axis: int) -> Expr:
    """`lm.grid(axis)`: the launch's extent along `axis` (1 past its dimensions)."""
    return grid[axis] if axis < len(grid) else Const(value=1)


def counters_in(expr: Expr) -> set[str]:
    """The counters an expression reads."""
    return {s[8:] for s in free_symbols(expr) if s.startswith("counter:")}


def counters_of(body: tuple) -> tuple[str, ...]:
    """The counters a role body (IR statements) advances or reads, in order of first
    appearance: the lowering gives each one an `int` of the role (`LRole.counters`)."""
    from cakegov.ir.nodes import Call, For, Warps

    out: dict[str, None] = {}

    def exprs_of(value) -> list[Expr]:
        kind = getattr(value, "kind", "")
        if kind == "expr":
            return [value.expr]
        if kind == "coord":
            return list(value.items)
        if kind == "smem" and value.stage is not None:
            return [value.stage]
        if kind == "barrier" and value.index is not None:
            return [value.index]
        return []

    def visit(stmts) -> None:
        for stmt in stmts:
            if isinstance(stmt, For):
                if stmt.counter:
                    out.setdefault(stmt.counter, None)
                visit(stmt.body)
            elif isinstance(stmt, Warps):  # a block's loops advance the role's counters
                visit(stmt.body)
            elif isinstance(stmt, Call):
                for value in stmt.args.values():
                    for e in exprs_of(value):
                        for name in sorted(counters_in(e)):
                            out.setdefault(name, None)

    visit(body)
    return tuple(out)


def bad_step(expr: Expr) -> str | None:
    """Why `expr` cannot be a loop step, or None: a step is a positive static integer or
    an expression over workload sizes and the CTA index (the grid's extent)."""
    if isinstance(expr, Const):
        return None if expr.value > 0 else "the loop step must be positive"
    others = {s for s in free_symbols(expr) if not s.startswith(("size:", "block:"))}
    if others:
        return ("a loop step is a positive static integer or an expression over workload "
                "sizes and the grid (`lm.grid(0)`), not over loop variables or counters")
    return None


def is_counter(binding: object) -> bool:
    return isinstance(binding, Counter)
