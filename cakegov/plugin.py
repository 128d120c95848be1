"""The stable API that plugin files (`rules/checks`, `rules/primitives`) import.

Plugins are data plus small functions. A primitive declares how it is spelled, its
argument schema and its effects; a rule declares its metadata and yields findings from
`check(ctx)`. Nothing in here may import from plugins."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from cakegov.ir.expr import Expr
from cakegov.ir.nodes import SubTile

ArgKind = Literal[
    "smem",  # shared-memory view, optionally stage-indexed
    "fragment",  # register fragment
    "operand",  # smem view or register fragment
    "tensor",  # global tensor of the workload
    "mbarrier",  # raw mbarrier element or pipeline full/empty barrier
    "named_barrier",
    "pipeline",
    "index",  # integer expression (may depend on loop variables and block indices)
    "coord",  # tuple of integer expressions
    "int",  # integer known when the schedule is parsed
    "float",  # numeric literal
    "bool",  # True/False or a comparison of index expressions
    "enum",  # one string of `choices`
]


@dataclass(frozen=True)
class Arg:
    """One argument of a primitive."""

    name: str
    kind: ArgKind
    doc: str = ""
    required: bool = True
    default: object = None
    choices: tuple[str, ...] = ()
    # a fragment argument that also takes a sub-tile (`acc[:, j * 32:(j + 1) * 32]`)
    sliceable: bool = False


class _Data(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")


SpreadKind = Literal["each", "owner", "rows_of", "cols_of", "all", "mma_a", "mma_b", "engine"]


class Spread(_Data):
    """Which of the role's threads touch which elements of one operand (row-major over its
    2-D view: rank 1 `(n,)` is `n x 1`), as the primitive's CUDA template does it:

    - `each`: element `e` by role thread `e % threads` (the runtime's `Smem::for_each`);
    - `owner`: element `(r, c)` by the thread that holds element `(r, c)` of `fragment`;
    - `rows_of`: row `r` (every column) by the threads holding row `r` of `fragment`;
    - `cols_of`: row `j` (every column) by the threads holding column `j` of `fragment`;
    - `all`: every element by every thread;
    - `mma_a` / `mma_b`: the operand loads of `mma.sync.m16n8k16` for accumulator
      `fragment` (`transpose`: b is stored N x K);
    - `engine`: the asynchronous proxy (copy engine, tensor cores) reads or writes the
      whole tile on behalf of the role.

    `tile`: the fragment operand is a sub-tile (`acc[:, j * 32:(j + 1) * 32]`): element
    `(r, c)` of the operand meets element `(row0 + r, col0 + c)` of `fragment`."""

    kind: SpreadKind = "each"
    fragment: str | None = None
    transpose: bool = False
    tile: SubTile | None = None


class Access(_Data):
    """A read or write of a memory object by a primitive. `spread` says which threads
    touch which elements; `collective`: the access is consumed by a warp-collective
    `.sync.aligned` instruction (such as `mma.sync`), so every lane of a warp has completed
    it once any lane has executed that instruction (PTX ISA, mma: "the executing thread
    waits until all threads in the warp execute the same mma instruction")."""

    space: Literal["smem", "global", "reg"]
    name: str
    stage: Expr | None = None
    proxy: Literal["generic", "async"] = "generic"
    bytes: int = 0
    spread: Spread = Spread()
    collective: bool = False


class BarrierAction(_Data):
    """What a primitive does to an mbarrier or named barrier."""

    op: Literal["arrive", "expect_tx", "complete_tx", "wait", "sync", "bar_arrive", "fence",
                "init", "commit_group", "wait_group"]
    barrier: str | None = None
    index: Expr | None = None
    pipeline_side: Literal["full", "empty"] | None = None
    bytes: int = 0
    parity: Expr | None = None


class Effects(_Data):
    """Static effects of one primitive call."""

    reads: tuple[Access, ...] = ()
    writes: tuple[Access, ...] = ()
    barriers: tuple[BarrierAction, ...] = ()
    global_bytes: int = 0
    flops: int = 0
    asynchronous: bool = False
    notes: tuple[str, ...] = Field(default_factory=tuple)


def access(value: Any, view: Any, proxy: Literal["generic", "async"] = "generic", *,
           spread: Spread | None = None, collective: bool = False) -> Access:
    """The memory access a primitive makes through one operand value. Shared-memory
    accesses through the async proxy are made by the `engine` unless `spread` says
    otherwise; generic ones default to `each`."""
    kind = getattr(value, "kind", None)
    if kind == "smem":
        decl = view.decl(value.name)
        size = decl.stage_bytes if decl is not None else 0
        if spread is None:
            spread = Spread(kind="engine") if proxy == "async" else Spread()
        return Access(space="smem", name=value.name, stage=value.stage, proxy=proxy,
                      bytes=size, spread=spread, collective=collective)
    if kind == "fragment":
        decl = view.decl(value.name)
        size = view.bytes_of(decl)
        tile = getattr(value, "tile", None)
        if tile is not None and decl is not None:  # the sub-tile's share of the registers
            size = size * tile.rows * tile.cols // max(1, elements(tuple(decl.shape)))
        return Access(space="reg", name=value.name, bytes=size)
    if kind == "tensor":
        return Access(space="global", name=value.name, proxy=proxy)
    raise ValueError(f"not a memory operand: {kind}")


def spread_by(value: Any, kind: SpreadKind = "owner", transpose: bool = False
              ) -> Spread | None:
    """`Spread(kind, fragment=value)` when `value` is a register fragment, else None (the
    default spread applies)."""
    if getattr(value, "kind", None) == "fragment":
        return Spread(kind=kind, fragment=value.name, transpose=transpose,
                      tile=getattr(value, "tile", None))
    return None


def barrier_action(op: str, value: Any, **extra: Any) -> BarrierAction:
    """A barrier action on a BarrierRef, NamedBarrierRef or PipelineRef value."""
    return BarrierAction(
        op=op,  # type: ignore[arg-type]
        barrier=value.name,
        index=getattr(value, "index", None),
        pipeline_side=getattr(value, "pipeline_side", None),
        **extra,
    )


def operand_shape(value: Any, view: Any) -> tuple[int, ...]:
    """Shape of the tile an operand value denotes (one stage of an smem view; the window
    of a fragment sub-tile, in the fragment's rank)."""
    decl = view.decl(value.name)
    if decl is None:
        return ()
    tile = getattr(value, "tile", None)
    if tile is not None:
        return (tile.rows,) if len(decl.shape) == 1 else (tile.rows, tile.cols)
    return tuple(decl.shape)


def elements(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


# ---- repairs: what a rule proposes, the engine applies and re-checks -------------------

RepairKind = Literal["set_arg", "set_parity", "insert", "delete", "move_after", "declare",
                     "copy_bound", "insert_wait_like", "insert_pipeline_op", "carry_phase",
                     "reindex_last", "like_loop", "restage"]


@dataclass(frozen=True)
class Repair:
    """One change to a schedule that a protocol rule proposes as the fix of an anomaly.

    Rules see the typed IR, never the source: they name statements and declarations by IR
    path and write new code only from IR names. The engine applies the change to the
    source text, in the schedule's own spelling, re-analyses the result and tells the rule
    whether the anomaly went away. Kinds:

    - `set_arg(path, arg, text)`: the argument `arg` of the call at `path` (a statement or
      a declaration) becomes `text` (added as a keyword when absent);
    - `set_parity(path, form)`: the `parity=` of the wait at `path` becomes `flip` (the
      opposite parity), `ring` / `ring+1` (`(E // m) % 2` or `(E // m + 1) % 2` for its
      barrier index `E % m`), `ordinal` / `ordinal+1` (from its loop variable), `0` or `1`;
    - `insert(path, text, after)`: a new statement before (or after) `path`;
    - `delete(path)`; `move_after(path, other)`: move statement `path` after `other`
      (with `arg`: the consecutive statements from `arg` through `path`);
    - `declare(text)`: a new declaration after the last one;
    - `copy_bound(path, other)`: loop `path` gets the stop bound of loop `other`;
    - `insert_wait_like(path, other, form)`: before `path`, a wait on the barrier that the
      statement `other` names (its receiver or `barrier=`), with parity `form`;
    - `insert_pipeline_op(path, text=ring, form=op)`: before `path`, `ring.op(i)` for the
      iteration `i` that `path` itself names through `ring`;
    - `carry_phase(path, text=counter)`: loop `path` advances the running counter `text`
      (`lm.range(..., counter=text)`) and every ring position its body derives from the
      loop variable (barrier and buffer indices, `parity=`, pipeline iterations) uses the
      counter instead, so the phase carries from one pass of the loop to the next;
    - `reindex_last(path, other=loop, form)`: the barrier index of the arrive at `path`
      (after loop `other`) becomes the stage of the loop's last iteration: `release` takes
      the index of the loop's own arrive on that barrier at the loop's stop value (a
      release that trails its read by one iteration), `wait` the index of the loop's first
      wait at its last value (the stage the last iteration read);
    - `like_loop(path, other=loop, form)`: the call at `path` (after loop `other`, a
      peeled iteration) becomes the loop's first call on the same receiver with the same
      method, its loop variable replaced by the loop's stop (`form="next"`: the position
      after the loop's last) or stop - 1 (`"last"`);
    - `restage(path, arg=selector, other, form=selector)`: the ring position the call at
      `path` names at `arg` becomes the one the statement `other` names at `form`; a
      selector is `recv` (`E` of `bar[E].wait(...)` or of `ring.wait(E)`), `barrier`
      (`E` of `barrier=bar[E]` or `barrier=ring.full(E)`) or `view:<buffer>` (`E` of
      `buffer[E]` or of `buffer[ring.stage(E)]`)."""

    kind: RepairKind
    path: str = ""
    arg: str = ""
    text: str = ""
    form: str = ""
    other: str = ""
    after: bool = False


# ---- numpy semantics: helpers for primitives' `simulate(op, sim)` ----------------------
# (cakegov/sim/ops.py documents the `sim` object; docs/simulator.md the contract.)


def sequential_sum(x: Any, axis: int = -1) -> Any:
    """The f32 sum of `x` along `axis` added left to right, as a kernel's accumulation
    loop does (numpy's `sum` adds pairwise, in another order)."""
    import numpy as np

    return np.cumsum(np.asarray(x, dtype=np.float32), axis=axis, dtype=np.float32).take(
        -1, axis=axis)


def mma_accumulate(acc: Any, a: Any, b: Any, k_step: int) -> Any:
    """`acc + a @ b` in f32, one `k_step`-wide slice of K at a time in increasing k (the
    order of a loop of `mma.sync` instructions); `b` is K x N."""
    import numpy as np

    out = np.asarray(acc, dtype=np.float32).copy()
    a = np.asarray(a, dtype=np.float32)
    b = np.asarray(b, dtype=np.float32)
    for kk in range(0, a.shape[1], k_step):  # K / k_step steps, each a whole-tile product
        out += a[:, kk:kk + k_step] @ b[kk:kk + k_step, :]
    return out
