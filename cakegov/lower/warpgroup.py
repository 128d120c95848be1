"""Which `mma_async` calls lower to wgmma, and everything their wgmma needs: the warpgroup
grid of the accumulator, the instruction shape, and the shared-memory matrix descriptors
of both operands.

One derivation, recorded in `LCompute.wgmma` and the accumulator's `LFragLayout` (kind
`wgmma`); the emitter prints it, the simulator reads the operands through it. The
descriptors come from the layout model (cakegov/lower/wgmma.py `kmajor_descriptor` over
cakegov/lower/swizzle.py `KMajorTile`), never from a second formula.

A call takes the wgmma path (PTX ISA 9.7.15 "Asynchronous Warpgroup Level Matrix
Multiply-Accumulate") when:
- both operands are shared-memory tiles in the swizzled layout (a tensor-map copy leaves
  it; wgmma cannot read a plain row-major tile: its canonical no-swizzle layout is made of
  8 x 16-byte core matrices), K-major: `a` is M x K and `b` is N x K (`transpose_b=True`);
- the operands are bf16 or f16 (m64nNk16) or one fp8 format (m64nNk32), the accumulator f32;
- the role is whole warpgroups (its first warp a multiple of 4, a multiple of 4 warps;
  wgmma is `.sync.aligned` over the 4 warps of a warpgroup);
- the accumulator splits into 64-row instruction tiles over the role's warpgroups.
Everything else keeps the synchronous `mma.sync` lowering, with the reason in the lowered
kernel (`LCompute.note`). Two things widen a refusal: an accumulator (with the fragments
that share its layout) is wgmma only when *every* mma on it is, and a role's mma_async
calls are wgmma all together or not at all, because `wgmma.wait_group N` counts real
wgmma groups while the schedule's `mma_wait(pending=N)` counts all of its mma_async calls."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from cakegov.ir.dtypes import dtype_bytes
from cakegov.ir.nodes import (
    Call,
    FragmentDecl,
    FragmentRef,
    RoleDecl,
    Schedule,
    SmemDecl,
    SmemRef,
)
from cakegov.ir.parse import walk_statements
from cakegov.lower.fragments import linked_groups, view_2d
from cakegov.lower.kernel import LFragLayout, LoweringError, LWgmma, LWgmmaOperand
from cakegov.lower.swizzle import KMajorTile, LayoutError
from cakegov.lower.swizzle import mode as swizzle_mode
from cakegov.lower.tma import BufferLayout
from cakegov.lower.wgmma import (
    VALID_N,
    WARPGROUP_THREADS,
    WGMMA_K_BYTES,
    WGMMA_M,
    MatrixDescriptor,
    kmajor_descriptor,
)

WARPGROUP_WARPS = WARPGROUP_THREADS // 32
MAX_N = VALID_N[-1]
# Operand type -> K of one instruction (32 bytes of K: PTX ISA, "Matrix Shape").
WGMMA_K = {"bf16": 16, "f16": 16, "f8e4m3": 32, "f8e5m2": 32}


@dataclass
class WgmmaPlan:
    """The wgmma lowering of a schedule: per call path its `LWgmma` or why not; per
    accumulator its layout."""

    calls: dict[str, LWgmma] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    accumulators: dict[str, LFragLayout] = field(default_factory=dict)


def warpgroup_grid(rows: int, cols: int, groups: int) -> tuple[int, int] | None:
    """(groups_m, groups_n): warpgroups along M when the rows split into 64-row tiles per
    warpgroup, else along N (64-row tiles, at least 8 columns each)."""
    if rows % (WGMMA_M * groups) == 0:
        return groups, 1
    if rows % WGMMA_M == 0 and cols % (8 * groups) == 0:
        return 1, groups
    return None


def instruction_n(cols: int) -> tuple[int, int]:
    """(blocks_n, n): the fewest instructions that cover `cols` columns with one N of
    8..256 (a multiple of 8)."""
    blocks = -(-cols // MAX_N)
    while cols % blocks or (cols // blocks) % 8:
        blocks += 1
    return blocks, cols // blocks


def _operand(buffer: str, decl: SmemDecl, rows_per_group: int, groups: int,
             block_rows: int, blocks: int, k_steps: int) -> LWgmmaOperand:
    """The descriptors of one operand read in `blocks` blocks of `block_rows` rows per
    warpgroup, `groups` warpgroups along its rows, `k_steps` 32-byte K slices."""
    rows, cols = view_2d(decl.shape)
    tile = KMajorTile(base=0, rows=rows, cols=cols, elem_bytes=dtype_bytes(decl.dtype),
                      swizzle=swizzle_mode(decl.swizzle))
    table = [[[kmajor_descriptor(tile, s, g * rows_per_group + b * block_rows)
               for s in range(k_steps)] for b in range(blocks)] for g in range(groups)]
    first = table[0][0][0]
    stride = table[1][0][0].start - first.start if groups > 1 else 0
    for g, per_group in enumerate(table):
        for b, per_block in enumerate(per_group):
            for s, d in enumerate(per_block):
                if (d.lbo, d.sbo, d.swizzle) != (first.lbo, first.sbo, first.swizzle) or \
                        d.start != table[0][b][s].start + g * stride:
                    raise LoweringError(f"the descriptors of `{buffer}` are not one "
                                        "pattern over its warpgroups")
    hi = MatrixDescriptor(0, first.lbo, first.sbo, first.swizzle).encode()
    return LWgmmaOperand(buffer=buffer, hi=hi, lbo=first.lbo, sbo=first.sbo,
                         swizzle=first.swizzle.name,
                         starts=tuple(tuple(d.start for d in per_block)
                                      for per_block in table[0]),
                         group_stride=stride)


class _Planner:
    def __init__(self, schedule: Schedule, layouts: Mapping[str, BufferLayout]):
        self.schedule = schedule
        self.layouts = layouts
        self.decls = {d.name: d for d in schedule.resources}
        self.roles = {r.name: r for r in schedule.roles}

    def calls(self) -> list[tuple[Call, RoleDecl]]:
        out = []
        for role in self.schedule.roles:
            for stmt, _ in walk_statements(role.body):
                if isinstance(stmt, Call) and stmt.primitive in ("mma", "mma_async"):
                    out.append((stmt, role))
        return out

    def candidate(self, call: Call, role: RoleDecl) -> tuple[LWgmma, LFragLayout] | str:
        """The wgmma lowering of one mma_async call, or why it keeps mma.sync."""
        a, b, acc = call.args.get("a"), call.args.get("b"), call.args.get("acc")
        if not isinstance(a, SmemRef):
            return "operand a is a register fragment (wgmma with A in registers is not lowered)"
        if not isinstance(b, SmemRef) or not isinstance(acc, FragmentRef):
            return "its operands are not shared-memory tiles"
        if not getattr(call.args.get("transpose_b"), "value", False):
            return ("b is stored K x N (MN-major); the wgmma lowering reads K-major operands "
                    "(b stored N x K, transpose_b=True)")
        da, db, dacc = self.decls.get(a.name), self.decls.get(b.name), \
            self.decls.get(acc.name)
        if not (isinstance(da, SmemDecl) and isinstance(db, SmemDecl)
                and isinstance(dacc, FragmentDecl)):
            return "its operands are not declared"
        for ref in (a, b):
            layout = self.layouts.get(ref.name)
            if layout is None or not layout.swizzled:
                why = layout.note if layout is not None and layout.note else \
                    "declared without a swizzle"
                return (f"operand `{ref.name}` is not in the swizzled layout wgmma reads "
                        f"through its descriptors ({why})")
        if da.dtype != db.dtype or da.dtype not in WGMMA_K:
            return (f"operands {da.dtype} x {db.dtype}: the wgmma lowering takes bf16, f16 "
                    "or one fp8 format on both sides")
        if dacc.dtype != "f32":
            return f"the accumulator is {dacc.dtype}; the wgmma lowering accumulates in f32"
        m, k = view_2d(da.shape)
        n, kb = view_2d(db.shape)
        if view_2d(dacc.shape) != (m, n) or k != kb:
            return f"shapes a {m}x{k}, b {n}x{kb}, acc {view_2d(dacc.shape)} do not match"
        warps = role.warp_stop - role.warp_start
        if role.warp_start % WARPGROUP_WARPS or warps % WARPGROUP_WARPS:
            return (f"role `{role.name}` (warps {role.warp_start}..{role.warp_stop - 1}) is "
                    "not whole warpgroups")
        if k * dtype_bytes(da.dtype) % WGMMA_K_BYTES:
            return f"K = {k} is not a multiple of the instruction's {WGMMA_K[da.dtype]}"
        groups = warps // WARPGROUP_WARPS
        grid = warpgroup_grid(m, n, groups)
        if grid is None:
            return (f"a {m} x {n} accumulator does not split into 64-row tiles over "
                    f"{groups} warpgroup(s)")
        gm, gn = grid
        blocks_m = m // gm // WGMMA_M
        blocks_n, inst_n = instruction_n(n // gn)
        k_steps = k * dtype_bytes(da.dtype) // WGMMA_K_BYTES
        try:
            op_a = _operand(a.name, da, m // gm, gm, WGMMA_M, blocks_m, k_steps)
            op_b = _operand(b.name, db, n // gn, gn, inst_n, blocks_n, k_steps)
        except LayoutError as exc:
            return f"the layout model refuses its descriptors: {exc}"
        lay = LFragLayout(kind="wgmma", rows=m, cols=n, threads=warps * 32,
                          slots=blocks_m * blocks_n * inst_n // 2, groups_m=gm, groups_n=gn,
                          blocks_m=blocks_m, blocks_n=blocks_n, inst_n=inst_n)
        return LWgmma(dtype=da.dtype, n=inst_n, k=WGMMA_K[da.dtype], k_steps=k_steps,
                      groups_m=gm, groups_n=gn, blocks_m=blocks_m, blocks_n=blocks_n,
                      a=op_a, b=op_b), lay

    def plan(self) -> WgmmaPlan:
        calls = self.calls()
        roots = linked_groups(self.schedule)

        def group(name: str) -> str:
            return roots.get(name, name)

        out = WgmmaPlan()
        chosen: dict[str, tuple[LWgmma, LFragLayout]] = {}
        for call, role in calls:
            if call.primitive != "mma_async":
                continue
            got = self.candidate(call, role)
            if isinstance(got, str):
                out.notes[call.path] = got
            else:
                chosen[call.path] = got
        changed = True
        while changed:  # refusals spread over accumulator groups and roles
            changed = False
            for call, role in calls:
                if call.path in chosen:
                    continue
                acc = call.args.get("acc")
                name = group(acc.name) if isinstance(acc, FragmentRef) else None
                for other, other_role in calls:
                    if other.path not in chosen:
                        continue
                    other_acc = other.args["acc"]
                    why = None
                    if name is not None and group(other_acc.name) == name:
                        kind = "mma.sync" if call.primitive == "mma" else "an mma_async " \
                            "that keeps mma.sync"
                        why = (f"its accumulator `{other_acc.name}` is also written by "
                               f"{kind} at line {call.span.line}")
                    elif call.primitive == "mma_async" and other_role.name == role.name:
                        why = (f"the mma_async at line {call.span.line} of role "
                               f"`{role.name}` keeps mma.sync, and a role's mma_async groups "
                               "are wgmma all together or not at all (wgmma.wait_group "
                               "counts real groups)")
                    if why is not None:
                        del chosen[other.path]
                        out.notes[other.path] = why
                        changed = True
        layouts: dict[str, LFragLayout] = {}
        for call, _role in calls:
            if call.path not in chosen:
                continue
            wg, lay = chosen[call.path]
            acc = call.args["acc"].name
            if layouts.setdefault(acc, lay) != lay:
                raise LoweringError(f"accumulator `{acc}` gets two wgmma layouts")
            out.calls[call.path] = wg
        out.accumulators = layouts
        return out


def plan_wgmma(schedule: Schedule, layouts: Mapping[str, BufferLayout]) -> WgmmaPlan:
    """Which mma_async calls of `schedule` lower to wgmma (module docstring)."""
    return _Planner(schedule, layouts).plan()
