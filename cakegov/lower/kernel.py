"""`LoweredKernel`: the schedule with every mechanical detail derived, as executable data.

Shared-memory offsets, barrier addresses and arrival counts, pipeline stage indices and
phase parities (as index expressions over the loop variables), warp ranges, register
budgets and per-primitive operands live here exactly once. The CUDA emitter prints it,
the CPU simulator interprets it and the protocol analysis reasons about it."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from cakegov.ir.dtypes import dtype_bytes
from cakegov.ir.expr import BinOp, Const, Expr
from cakegov.ir.nodes import Span, Value
from cakegov.lower.layout import MBARRIER_BYTES
from cakegov.lower.swizzle import KMajorTile
from cakegov.lower.swizzle import mode as swizzle_mode
from cakegov.plugin import Access

NAMED_BARRIER_IDS = 16  # hardware named barriers per CTA (PTX ISA, bar)
CLUSTER_BARRIER = -1  # LNamedSync.id of the cluster barrier (barrier.cluster)


class LoweringError(Exception):
    """The schedule cannot be lowered (it should have been rejected by the checker)."""


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


def view_2d(shape: tuple[int, ...]) -> tuple[int, int]:
    """The 2-D view of a fragment or operand tile: rank 1 `(n,)` is `n x 1`; otherwise the
    leading dimensions are flattened into rows."""
    if len(shape) == 1:
        return shape[0], 1
    rows = 1
    for d in shape[:-1]:
        rows *= d
    return rows, shape[-1]


def _affine(offset: int, index: Expr, stride: int) -> Expr:
    """`offset + index * stride` as an expression (folded when `index` is constant)."""
    if isinstance(index, Const):
        return Const(value=offset + index.value * stride)
    return BinOp(op="+", lhs=Const(value=offset),
                 rhs=BinOp(op="*", lhs=index, rhs=Const(value=stride)))


class LBuffer(_Model):
    """One shared-memory view: `stages` copies of `stage_bytes` at `offset`.

    `layout` says where element (r, c) of a stage lives. `row_major`: at byte
    `(r * cols + c) * elem_bytes`. `swizzled`: the K-major tile a tensor-map copy with the
    buffer's `swizzle` leaves (cakegov/lower/swizzle.py `KMajorTile`: panels of the swizzle
    width, then `Swizzle<B, 4, 3>` on the byte address), which wgmma reads through its
    matrix descriptors. A buffer declared with a swizzle keeps the row-major layout when
    something that touches it cannot produce or consume the pattern (a copy from a 1-D
    tensor, a tile shape the pattern does not tile); `note` then says why, and the swizzle
    only raises the alignment (cakegov/lower/tma.py, docs/lowering.md)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    stages: int
    offset: int
    stage_bytes: int
    align: int
    swizzle: str
    alias: str | None = None  # the view whose storage this one reuses (same offset)
    layout: Literal["row_major", "swizzled"] = "row_major"
    note: str = ""  # why a declared swizzle is not applied (empty: it is, or none declared)

    def stage_offset(self, stage: Expr) -> Expr:
        """Byte offset of stage `stage` from the aligned shared-memory base."""
        return _affine(self.offset, stage, self.stage_bytes)

    def tile(self, base: int = 0) -> KMajorTile | None:
        """The layout model of one stage starting at byte `base` (None: row-major)."""
        if self.layout != "swizzled":
            return None
        rows, cols = view_2d(self.shape)
        return KMajorTile(base=base, rows=rows, cols=cols, elem_bytes=dtype_bytes(self.dtype),
                          swizzle=swizzle_mode(self.swizzle))

    def element_offset(self, row: int, col: int) -> int:
        """Byte offset of element (row, col) from the stage start, by `layout`."""
        tile = self.tile()
        if tile is not None:
            return tile.address(row, col)
        return (row * view_2d(self.shape)[1] + col) * dtype_bytes(self.dtype)


class LBarrier(_Model):
    """An array of `stages` mbarriers at `offset` (8 bytes apart), each initialised with
    `count` arrivals. Pipeline barriers record their ring and side; a full barrier in
    transaction mode also records the bytes its producer arms per phase."""

    name: str
    origin: Literal["raw", "pipeline_full", "pipeline_empty"]
    pipeline: str | None = None
    stages: int
    count: int
    offset: int
    tx_bytes: int | None = None
    # "auto": initialised in the kernel prologue; "manual": by LInit ops in role bodies.
    init: Literal["auto", "manual"] = "auto"

    def slot_offset(self, index: Expr) -> Expr:
        """Byte offset of mbarrier `index` of this array from the shared-memory base."""
        return _affine(self.offset, index, MBARRIER_BYTES)


class LNamedBarrier(_Model):
    name: str
    id: int
    threads: int


class LSubsetBarrier(_Model):
    """The named barrier the lowering reserves to synchronise the warps of one
    `with lm.warps(...)` subset of a role among themselves (before a bulk copy or store
    they issue, after a bulk-group wait): `bar.sync id, 32 x len(warps)`."""

    role: str
    warps: tuple[int, ...]
    id: int


class LFragLayout(_Model):
    """How a fragment's elements are spread over the threads of its role.

    Every fragment is seen as a 2-D tile `rows x cols` (a 1-D fragment of n elements is
    `n x 1`). `flat`: element `e = r * cols + c` is held by role thread `e % threads` in
    slot `e // threads`. `rows`: row `r` is held whole by role thread `r % threads`, in
    slots `(r // threads) * cols + c` (reductions along a row stay in one thread).
    `mma`: the accumulator layout of `mma.sync.m16n8k16`: the role's warps form a
    `warps_m x warps_n` grid, warp `w` owns the `rows / warps_m x cols / warps_n` block at
    `(w // warps_n, w % warps_n)`, split into `tiles_m x tiles_n` tiles of 16 x 8; lane
    `l` holds rows `l // 4` and `l // 4 + 8`, columns `2 * (l % 4)` and `+ 1`, of each tile
    (4 slots per tile, PTX ISA "Matrix fragments for mma.m16n8k16").
    `wgmma`: the accumulator of `wgmma.mma_async.m64nNk16` (PTX ISA 9.7.15.5, Figure 149,
    cakegov/lower/wgmma.py `accumulator_element`): the role's warpgroups form a
    `groups_m x groups_n` grid, warpgroup g owns the block at `(g // groups_n,
    g % groups_n)`, split into `blocks_m x blocks_n` instruction tiles of 64 x `inst_n`;
    thread t of the warpgroup holds register i of every tile in slot
    `(mi * blocks_n + ni) * inst_n / 2 + i`."""

    kind: Literal["flat", "rows", "mma", "wgmma"]
    rows: int
    cols: int
    threads: int
    slots: int  # elements (registers of the element type) per thread
    warps_m: int = 1
    warps_n: int = 1
    tiles_m: int = 0
    tiles_n: int = 0
    groups_m: int = 0  # wgmma: warpgroup grid, instruction tiles per warpgroup, tile N
    groups_n: int = 0
    blocks_m: int = 0
    blocks_n: int = 0
    inst_n: int = 0


class LFragment(_Model):
    name: str
    dtype: str
    shape: tuple[int, ...]
    role: str
    layout: LFragLayout | None = None  # None only when the owning role does not exist


class _Op(_Model):
    path: str  # IR path of the statement this op comes from
    span: Span
    # The warps of the role that execute the op, counted from the role's first warp
    # (`with lm.warps(...)`, docs/language.md "Part of a role"); None: every warp. An op
    # done by one elected thread (`per="role"` arrives, bulk copies and stores, inits) is
    # done by lane 0 of the first of these warps.
    subset: tuple[int, ...] | None = None


class LBox(_Model):
    """One tensor-map copy of part of a stage: the box whose origin is tile element
    (`row`, `col`), landing at byte `offset` of the stage (cakegov/lower/tma.py)."""

    offset: int
    row: int
    col: int


class LTensorMap(_Model):
    """One `CUtensorMap` kernel parameter (`const __grid_constant__`): the host encodes it
    with `cuTensorMapEncodeTiled` over the 2-D view `rows x cols` of `tensor` (row-major,
    innermost dimension `cols`), box `box_rows x box_cols`, the swizzle of the shared
    buffers it serves, out-of-bounds elements filled with zeros (docs/gpu.md)."""

    name: str
    tensor: str
    dtype: str
    rows: Expr
    cols: Expr
    box_rows: int
    box_cols: int
    swizzle: str  # "none" | "32B" | "64B" | "128B"


class LTma(_Model):
    """A copy (load or store) lowered to tensor-map instructions: one
    `cp.async.bulk.tensor.2d` per box through the parameter `map`, issued by one thread."""

    map: str
    boxes: tuple[LBox, ...]


class LCopy(_Op):
    """A bulk copy global -> shared of `rows` rows of `row_bytes`, issued by the lanes of
    the first warp of the role right after a role synchronisation (an explicit op before
    it); completes asynchronously by delivering `bytes` to `barrier[barrier_index]`.

    The source is seen as a row-major 2-D tensor of `src_rows x src_cols` elements (a 1-D
    tensor of n elements is `1 x n`), and tile row `r` comes from tensor row `row0 + r`,
    columns `col0 ..`. With `pad`, the part of a row outside the tensor is copied from the
    kernel's zero row instead, so the barrier still receives exactly `bytes`."""

    kind: Literal["copy"] = "copy"
    buffer: str
    stage: Expr
    tensor: str
    at: tuple[Expr, ...]
    bytes: int
    rows: int
    row_bytes: int
    barrier: str
    barrier_index: Expr
    pad: bool
    elem_bytes: int = 0
    src_rows: Expr = Const(value=1)
    src_cols: Expr = Const(value=1)
    row0: Expr = Const(value=0)
    col0: Expr = Const(value=0)
    # Thread-block clusters: a CTA mask over the cluster's ranks; the copy lands at the
    # same offset in every CTA of the mask and completes on each one's barrier (None:
    # this CTA only). cakegov/analysis/cluster.py
    multicast: Expr | None = None
    # Tensor-map lowering (one elected thread, one instruction per box); None: row-wise
    # cp.async.bulk, `note` saying why (cakegov/lower/tma.py).
    tma: LTma | None = None
    note: str = ""

    @property
    def row_elems(self) -> int:
        return self.row_bytes // self.elem_bytes if self.elem_bytes else 0


class LArrive(_Op):
    """`arrivals` arrivals on `barrier[index]`, each first adding `tx` transaction bytes
    (`arrive.expect_tx` when `expects`). `tx` is an index expression: a byte count that
    depends on the CTA (a tail tile) or on the sizes is evaluated where it runs."""

    kind: Literal["arrive"] = "arrive"
    barrier: str
    index: Expr
    arrivals: int
    tx: Expr = Const(value=0)
    expects: bool = False
    per: Literal["thread", "warp", "role"]
    source: str  # primitive that produced it (e.g. pipeline_release)
    # The cluster rank of the CTA whose barrier receives the arrivals (a remote arrive
    # through mapa); None: this CTA's own barrier.
    cta: Expr | None = None

    @property
    def tx_each(self) -> int | None:
        """Transaction bytes each arrival arms, when static (None: depends on the CTA or
        the sizes)."""
        return self.tx.value if isinstance(self.tx, Const) else None

    @property
    def tx_bytes(self) -> int:
        """Static bytes armed by all `arrivals` together (0 when none or not static)."""
        each = self.tx_each
        return each * self.arrivals if each else 0


class LWait(_Op):
    """Wait until the phase of `barrier[index]` with parity `parity` has completed."""

    kind: Literal["wait"] = "wait"
    barrier: str
    index: Expr
    parity: Expr
    source: str


class LNamedSync(_Op):
    """`bar.sync id, threads` (`wait`) or `bar.arrive id, threads`. `derived` names the
    operation the lowering inserted it for (a role sync before a bulk copy, ...); empty
    for the schedule's own named barriers and `lm.sync_cta()`. Id CLUSTER_BARRIER is
    `lm.sync_cluster()` (`barrier.cluster.arrive` + `wait`), `threads` then counting every
    thread of every CTA of the cluster."""

    kind: Literal["named"] = "named"
    barrier: str
    id: int
    threads: int
    wait: bool  # bar.sync (True) or bar.arrive (False)
    derived: str = ""


class LFence(_Op):
    """A fence or warp synchronisation; `derived` as for LNamedSync."""

    kind: Literal["fence"] = "fence"
    scope: Literal["proxy_async", "warp", "mbarrier_init"]
    derived: str = ""


class LInit(_Op):
    """`mbarrier.init` of `barrier[index]` with `count` arrivals (manual initialisation)."""

    kind: Literal["init"] = "init"
    barrier: str
    index: Expr
    count: int
    source: str


class LGroupWait(_Op):
    """Wait until at most `pending` of the role's most recent asynchronous groups of
    `group` are in flight (`wgmma.wait_group`, `cp.async.bulk.wait_group.read`)."""

    kind: Literal["group_wait"] = "group_wait"
    group: Literal["wgmma", "bulk"]
    pending: int
    source: str
    # wgmma: the role's mma_async calls are real wgmma groups (False: they run as
    # synchronous mma.sync and nothing is in flight); the accumulators the wait hands back.
    wgmma: bool = False
    fragments: tuple[str, ...] = ()


class LWgmmaOperand(_Model):
    """The shared-memory matrix descriptors of one wgmma operand (K-major, PTX ISA
    "Matrix Descriptor Format"): `hi` holds every field but the start address (leading and
    stride byte offsets, swizzle mode), and instruction (block b, K step s) of warpgroup
    row/column g starts at byte `starts[b][s] + g * group_stride` of the stage. Derived
    with cakegov/lower/wgmma.py `kmajor_descriptor` (cakegov/lower/warpgroup.py)."""

    buffer: str
    hi: int
    lbo: int
    sbo: int
    swizzle: str
    starts: tuple[tuple[int, ...], ...]
    group_stride: int


class LWgmma(_Model):
    """`mma_async` as `wgmma.mma_async.sync.aligned.m64n{n}k{k}`: per warpgroup,
    `blocks_m x blocks_n` instructions per K step, `k_steps` K steps, between
    `wgmma.fence` and `wgmma.commit_group`."""

    dtype: str  # operand type (bf16, f16, f8e4m3, f8e5m2)
    n: int
    k: int
    k_steps: int
    groups_m: int
    groups_n: int
    blocks_m: int
    blocks_n: int
    a: LWgmmaOperand
    b: LWgmmaOperand


class LCompute(_Op):
    """A compute or store primitive with its operands and effects."""

    kind: Literal["compute"] = "compute"
    primitive: str
    args: dict[str, Value]
    reads: tuple[Access, ...]
    writes: tuple[Access, ...]
    flops: int
    global_bytes: int
    # The asynchronous group the op commits (mma_async: wgmma, store_async: bulk): it
    # completes at a later LGroupWait of that group, not at issue.
    group: Literal["wgmma", "bulk"] | None = None
    # mma_async lowered to wgmma (None: mma.sync, `note` says why); store_async lowered to
    # a tensor-map store (None: row-wise cp.async.bulk, `note` says why).
    wgmma: LWgmma | None = None
    tma: LTma | None = None
    note: str = ""


class LFor(_Op):
    """A counted loop; `step` is static or an expression over sizes and the grid (a
    grid-stride tile loop); `counter`: the running counter it advances after each
    iteration (cakegov/ir/persistent.py)."""

    kind: Literal["for"] = "for"
    var: str
    start: Expr
    stop: Expr
    step: int | Expr
    body: tuple[LOp, ...]
    counter: str | None = None


LOp = Annotated[
    LCopy | LArrive | LWait | LNamedSync | LFence | LInit | LGroupWait | LCompute | LFor,
    Field(discriminator="kind"),
]
LFor.model_rebuild()


class LParam(_Model):
    """One kernel parameter, in ABI order: the workload's tensors (in its TENSORS order),
    then one `int` per workload size (in its SIZES order), then one `CUtensorMap` per
    `LoweredKernel.tensor_maps` entry (its `name`; `dims` empty). `rows x cols` is the tensor's
    2-D element view used by compute and store operands (rank 1: `n x 1`)."""

    name: str
    kind: Literal["tensor", "size", "tensor_map"]
    dtype: str = "i32"
    dims: tuple[str, ...] = ()
    output: bool = False
    rows: Expr = Const(value=1)
    cols: Expr = Const(value=1)


class LRole(_Model):
    name: str
    warp_start: int
    warp_stop: int
    regs: int | None
    setmaxnreg: Literal["inc", "dec"] | None
    body: tuple[LOp, ...]
    counters: tuple[str, ...] = ()  # running counters the body advances or reads

    @property
    def warps(self) -> int:
        return self.warp_stop - self.warp_start

    @property
    def thread_start(self) -> int:
        return self.warp_start * 32

    @property
    def thread_stop(self) -> int:
        return self.warp_stop * 32


class LoweredKernel(_Model):
    """Everything the emitter, simulator and protocol analysis need, derived once."""

    name: str
    schedule_sha256: str
    target: str
    workload: str
    sizes: dict[str, int]
    divisible: dict[str, int]
    grid: tuple[Expr, ...]
    warps: int
    threads: int
    cluster: tuple[int, ...]
    launch_regs: int
    smem_bytes: int
    smem_base_align: int
    buffers: tuple[LBuffer, ...]
    fragments: tuple[LFragment, ...]
    barriers: tuple[LBarrier, ...]
    named_barriers: tuple[LNamedBarrier, ...]
    roles: tuple[LRole, ...]
    tensors: dict[str, tuple[str, tuple[str, ...]]]
    # Kernel ABI (docs/lowering.md); empty when lowered without the workload's sizes.
    params: tuple[LParam, ...] = ()
    # Zero row that padded loads copy from (offset from the aligned base; 0 bytes: none).
    zero_offset: int = 0
    zero_bytes: int = 0
    # Named barriers reserved for multi-warp subsets of roles (after the role barriers).
    subset_barriers: tuple[LSubsetBarrier, ...] = ()
    # Tensor maps the kernel takes as parameters (after the sizes), in ABI order.
    tensor_maps: tuple[LTensorMap, ...] = ()
    # The launcher sets CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED (a cluster of
    # more CTAs than the target's portable size; the schedule opted in)
    cluster_nonportable: bool = False

    def tensor_map(self, name: str) -> LTensorMap | None:
        return next((t for t in self.tensor_maps if t.name == name), None)

    def barrier(self, name: str) -> LBarrier | None:
        return next((b for b in self.barriers if b.name == name), None)

    def buffer(self, name: str) -> LBuffer | None:
        return next((b for b in self.buffers if b.name == name), None)

    def fragment(self, name: str) -> LFragment | None:
        return next((f for f in self.fragments if f.name == name), None)

    def param(self, name: str) -> LParam | None:
        return next((p for p in self.params if p.name == name), None)

    def role_barrier(self, role: str) -> int | None:
        """The named-barrier id that synchronises the threads of one multi-warp role among
        themselves (`role_barrier_id`)."""
        return role_barrier_id([n.id for n in self.named_barriers],
                               [(r.name, r.warps) for r in self.roles], role)


def free_barrier_ids(named_ids: list[int], roles: list[tuple[str, int]]) -> list[int]:
    """Hardware named-barrier ids left after id 0, the schedule's named barriers and the
    role barriers (`role_barrier_id`), in increasing order."""
    taken = {0, *named_ids}
    free = [i for i in range(1, NAMED_BARRIER_IDS) if i not in taken]
    return free[sum(1 for _, warps in roles if warps > 1):]


def role_barrier_id(named_ids: list[int], roles: list[tuple[str, int]], role: str
                    ) -> int | None:
    """The hardware named-barrier id reserved for synchronising the threads of one
    multi-warp role among themselves (`bar.sync id, role threads`), or None for a
    single-warp role (`__syncwarp()` suffices). Ids are handed out from 1 upwards to the
    multi-warp roles in declaration order, skipping 0 (`__syncthreads`) and every id the
    schedule's named barriers use; None also when none is left."""
    taken = {0, *named_ids}
    free = [i for i in range(1, NAMED_BARRIER_IDS) if i not in taken]
    multi = [name for name, warps in roles if warps > 1]
    if role not in multi:
        return None
    index = multi.index(role)
    return free[index] if index < len(free) else None

