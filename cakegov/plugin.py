"""The stable API that plugin files (`rules/checks`, `rules/primitives`) import.

Plugins are data plus small functions. A primitive declares how it is spelled, its
argument schema and its effects; a rule declares its metadata and yields findings from
`check(ctx)`. Nothing in here may import from plugins."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from cakegov.ir.expr import Expr

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


class _Data(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Access(_Data):
    """A read or write of a memory object by a primitive."""

    space: Literal["smem", "global", "reg"]
    name: str
    stage: Expr | None = None
    proxy: Literal["generic", "async"] = "generic"
    bytes: int = 0


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


def access(value: Any, view: Any, proxy: Literal["generic", "async"] = "generic") -> Access:
    """The memory access a primitive makes through one operand value."""
    kind = getattr(value, "kind", None)
    if kind == "smem":
        decl = view.decl(value.name)
        size = decl.stage_bytes if decl is not None else 0
        return Access(space="smem", name=value.name, stage=value.stage, proxy=proxy,
                      bytes=size)
    if kind == "fragment":
        decl = view.decl(value.name)
        return Access(space="reg", name=value.name, bytes=view.bytes_of(decl))
    if kind == "tensor":
        return Access(space="global", name=value.name, proxy=proxy)
    raise ValueError(f"not a memory operand: {kind}")


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
    """Shape of the tile an operand value denotes (one stage of an smem view)."""
    decl = view.decl(value.name)
    return tuple(decl.shape) if decl is not None else ()


def elements(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
