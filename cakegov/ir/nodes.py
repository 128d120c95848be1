"""Typed IR of a schedule: frozen pydantic models. Every node carries its IR path (such as
`roles.loader.body[3]`) and its source span; neither is part of the schedule's identity."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from cakegov.ir.dtypes import dtype_bytes
from cakegov.ir.expr import Expr


class Span(BaseModel):
    """A source range: 1-based lines and columns, end exclusive."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")
    line: int
    col: int
    end_line: int
    end_col: int


class Node(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")
    path: str
    span: Span


# ---- values passed to primitives -------------------------------------------------------


class _Value(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")
    span: Span


class ExprValue(_Value):
    kind: Literal["expr"] = "expr"
    expr: Expr


class CoordValue(_Value):
    kind: Literal["coord"] = "coord"
    items: tuple[Expr, ...]


class SmemRef(_Value):
    """A shared-memory view, optionally indexed by stage (`a_s[ring.stage(k)]`)."""

    kind: Literal["smem"] = "smem"
    name: str
    stage: Expr | None = None


class SubTile(BaseModel):
    """A window of a fragment's 2-D view (rank 1 `(n,)` is `n x 1`) with static extents:
    rows `row0 .. row0 + rows - 1`, columns `col0 .. col0 + cols - 1`. The origins are
    index expressions and may depend on loop variables (`acc[:, j * 32:(j + 1) * 32]`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    row0: Expr
    rows: int
    col0: Expr
    cols: int


class FragmentRef(_Value):
    """A register fragment, or a sub-tile of it (`tile`: `acc[:, j * 32:(j + 1) * 32]`)."""

    kind: Literal["fragment"] = "fragment"
    name: str
    tile: SubTile | None = None


class TensorRef(_Value):
    """A global-memory tensor of the workload (a parameter of the schedule function)."""

    kind: Literal["tensor"] = "tensor"
    name: str


class BarrierRef(_Value):
    """An mbarrier: a raw one (`full[s]`) or a pipeline's (`ring.full(k)`)."""

    kind: Literal["barrier"] = "barrier"
    name: str
    index: Expr | None = None
    pipeline_side: Literal["full", "empty"] | None = None


class NamedBarrierRef(_Value):
    kind: Literal["named_barrier"] = "named_barrier"
    name: str


class PipelineRef(_Value):
    kind: Literal["pipeline"] = "pipeline"
    name: str


class StrValue(_Value):
    kind: Literal["str"] = "str"
    value: str


class FloatValue(_Value):
    kind: Literal["float"] = "float"
    value: float


class BoolValue(_Value):
    kind: Literal["bool"] = "bool"
    value: bool


Value = Annotated[
    ExprValue
    | CoordValue
    | SmemRef
    | FragmentRef
    | TensorRef
    | BarrierRef
    | NamedBarrierRef
    | PipelineRef
    | StrValue
    | FloatValue
    | BoolValue,
    Field(discriminator="kind"),
]


# ---- declarations ---------------------------------------------------------------------

Swizzle = Literal["none", "32B", "64B", "128B"]
SWIZZLE_BYTES: dict[str, int] = {"none": 0, "32B": 32, "64B": 64, "128B": 128}


class Launch(Node):
    """Grid (expressions over workload sizes), warps per CTA, cluster shape, and whether
    the kernel opts in to a non-portable cluster size (more CTAs than the target's portable
    `cluster_max`; the launcher sets CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED)."""

    grid: tuple[Expr, ...]
    warps: int
    cluster: tuple[int, ...] = (1, 1, 1)
    cluster_nonportable: bool = False

    @property
    def threads(self) -> int:
        return self.warps * 32


class SmemDecl(Node):
    """A shared-memory view: `stages` copies of a `shape` tile of `dtype`."""

    kind: Literal["smem"] = "smem"
    name: str
    dtype: str
    shape: tuple[int, ...]
    stages: int = 1
    swizzle: Swizzle = "none"
    align: int = 16
    alias: str | None = None  # another view whose storage this one reuses (its root)

    @property
    def stage_bytes(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n * dtype_bytes(self.dtype)

    @property
    def row_bytes(self) -> int:
        return self.shape[-1] * dtype_bytes(self.dtype)


class FragmentDecl(Node):
    """A register fragment owned by one role."""

    kind: Literal["fragment"] = "fragment"
    name: str
    dtype: str
    shape: tuple[int, ...]
    role: str


class MBarrierDecl(Node):
    """An array of `stages` mbarriers, each initialised with arrival `count`: by the kernel
    prologue (`init="auto"`) or by the schedule itself (`init="manual"`: `bar[i].init()`,
    `lm.fence_barrier_init()`, `lm.sync_cta()` before any use)."""

    kind: Literal["mbarrier"] = "mbarrier"
    name: str
    count: int
    stages: int = 1
    init: Literal["auto", "manual"] = "auto"


class NamedBarrierDecl(Node):
    """A hardware named barrier (`bar.sync id, threads`)."""

    kind: Literal["named_barrier"] = "named_barrier"
    name: str
    id: int
    threads: int


class PipelineDecl(Node):
    """A ring of `stages` over `buffers` with full/empty barriers whose phases the
    compiler derives. Arrival counts are derived unless given."""

    kind: Literal["pipeline"] = "pipeline"
    name: str
    stages: int
    buffers: tuple[str, ...]
    producer: str
    consumer: str
    full_count: int | None = None
    empty_count: int | None = None


Decl = Annotated[
    SmemDecl | FragmentDecl | MBarrierDecl | NamedBarrierDecl | PipelineDecl,
    Field(discriminator="kind"),
]


# ---- statements -----------------------------------------------------------------------


class Call(Node):
    """A primitive call; `args` are keyed by the primitive's argument names."""

    kind: Literal["call"] = "call"
    primitive: str
    args: dict[str, Value]
    arg_spans: dict[str, Span] = Field(default_factory=dict)


class For(Node):
    """`for var in lm.range(start, stop, step, counter=c)`. The bounds are index
    expressions over sizes, enclosing loop variables and the CTA index (a persistent tile
    loop); `step` is a positive static integer or an expression over sizes and the grid
    (`lm.grid(0)`, a grid-stride loop). `counter`: the running counter this loop advances
    by one after each iteration (docs/language.md, "Persistent kernels")."""

    kind: Literal["for"] = "for"
    var: str
    start: Expr
    stop: Expr
    step: int | Expr = 1
    body: tuple[Stmt, ...]
    counter: str | None = None


class Warps(Node):
    """`with lm.warps(start, stop, step):` inside a role body: only the role's warps
    `start, start + step, ... < stop` (indices counted from the role's first warp) run
    `body`; the others skip it. The role is not split (its `setmaxnreg`, fragments and
    derived counts stay the role's)."""

    kind: Literal["warps"] = "warps"
    start: int
    stop: int
    step: int = 1
    body: tuple[Stmt, ...]

    @property
    def members(self) -> tuple[int, ...]:
        """The role-relative indices of the warps that run the body."""
        return tuple(range(self.start, self.stop, self.step))


Stmt = Annotated[Call | For | Warps, Field(discriminator="kind")]
For.model_rebuild()
Warps.model_rebuild()


class RoleDecl(Node):
    """A warp role: a contiguous warp range, an optional register budget and a body."""

    name: str
    warp_start: int
    warp_stop: int
    regs: int | None = None
    body: tuple[Stmt, ...] = ()

    @property
    def warps(self) -> range:
        return range(self.warp_start, self.warp_stop)


class Unresolved(Node):
    """A name the front end could not resolve; the statement using it was dropped."""

    name: str
    what: str
    suggestions: tuple[str, ...] = ()


class Schedule(Node):
    """A whole schedule: binding, launch, resources and roles."""

    name: str
    doc: str = ""
    target: str
    target_span: Span
    workload: str
    workload_span: Span
    params: tuple[str, ...]
    sizes: dict[str, int] = Field(default_factory=dict)
    divisible: dict[str, int] = Field(default_factory=dict)
    launch: Launch | None = None
    resources: tuple[Decl, ...] = ()
    roles: tuple[RoleDecl, ...] = ()
    unresolved: tuple[Unresolved, ...] = ()

    def resource(self, name: str) -> Decl | None:
        for decl in self.resources:
            if decl.name == name:
                return decl
        return None

    def role(self, name: str) -> RoleDecl | None:
        for role in self.roles:
            if role.name == name:
                return role
        return None
