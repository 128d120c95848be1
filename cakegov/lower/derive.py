"""The lowering pass: `Schedule` -> `LoweredKernel`.

Pipeline operations become raw barrier operations with derived stage indices and phase
parities: for iteration `k` of a ring with `S` stages the stage is `k % S`, the consumer
waits on the full barrier with parity `(k // S) % 2` and the producer waits on the empty
barrier with the opposite parity `(k // S + 1) % 2` (its first pass finds every stage
free). A producer whose bulk loads complete on `ring.full(k)` arms the full barrier with
the bytes of those loads in `acquire` (transaction mode); otherwise `commit` arrives."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cakegov.ir.canonical import schedule_sha256
from cakegov.ir.cluster import cluster_size
from cakegov.ir.dtypes import dtype_bytes
from cakegov.ir.expr import BinOp, Compare, Const, Expr, Size, StageOf
from cakegov.ir.nodes import (
    BarrierRef,
    Call,
    CoordValue,
    ExprValue,
    For,
    FragmentDecl,
    MBarrierDecl,
    NamedBarrierDecl,
    PipelineDecl,
    RoleDecl,
    Schedule,
    SmemDecl,
    SmemRef,
    Stmt,
    Warps,
)
from cakegov.ir.parse import walk_statements
from cakegov.ir.persistent import counters_of
from cakegov.lower.fragments import fragment_layouts
from cakegov.lower.kernel import (
    CLUSTER_BARRIER,
    LArrive,
    LBarrier,
    LBox,
    LBuffer,
    LCompute,
    LCopy,
    LFence,
    LFor,
    LFragment,
    LGroupWait,
    LInit,
    LNamedBarrier,
    LNamedSync,
    LOp,
    LoweredKernel,
    LoweringError,
    LParam,
    LRole,
    LSubsetBarrier,
    LTensorMap,
    LTma,
    LWait,
    free_barrier_ids,
    role_barrier_id,
)
from cakegov.lower.layout import smem_layout
from cakegov.lower.registers import REGISTERS_PER_SM, REGISTERS_PER_THREAD, launch_registers
from cakegov.lower.tma import BufferLayout, TilePlan, buffer_layouts, copy_plan
from cakegov.lower.warpgroup import WgmmaPlan, plan_wgmma
from cakegov.plugin import Effects

__all__ = ["LoweringError", "lower"]


def stage_expr(iteration: Expr, stages: int) -> Expr:
    return BinOp(op="%", lhs=iteration, rhs=Const(value=stages))


def consumer_parity(iteration: Expr, stages: int) -> Expr:
    """Parity of the full-barrier phase that iteration `k` consumes: (k // S) % 2."""
    return BinOp(op="%", lhs=BinOp(op="//", lhs=iteration, rhs=Const(value=stages)),
                 rhs=Const(value=2))


def producer_parity(iteration: Expr, stages: int) -> Expr:
    """Parity the producer waits for on the empty barrier: (k // S + 1) % 2."""
    return BinOp(op="%", lhs=BinOp(op="+", lhs=BinOp(op="//", lhs=iteration,
                 rhs=Const(value=stages)), rhs=Const(value=1)), rhs=Const(value=2))


def resolve_stages(expr: Expr, stages: Mapping[str, int]) -> Expr:
    """Replace `ring.stage(k)` by `k % S`."""
    if isinstance(expr, StageOf):
        return stage_expr(resolve_stages(expr.iter, stages), stages[expr.pipeline])
    if isinstance(expr, BinOp | Compare):
        return expr.model_copy(update={"lhs": resolve_stages(expr.lhs, stages),
                                       "rhs": resolve_stages(expr.rhs, stages)})
    return expr


def _resolve_value(value: Any, stages: Mapping[str, int]) -> Any:
    if isinstance(value, SmemRef) and value.stage is not None:
        return value.model_copy(update={"stage": resolve_stages(value.stage, stages)})
    if isinstance(value, ExprValue):
        return value.model_copy(update={"expr": resolve_stages(value.expr, stages)})
    if isinstance(value, CoordValue):
        return value.model_copy(update={"items": tuple(resolve_stages(e, stages)
                                                        for e in value.items)})
    if isinstance(value, BarrierRef) and value.index is not None:
        return value.model_copy(update={"index": resolve_stages(value.index, stages)})
    return value


class _Lowerer:
    def __init__(self, schedule: Schedule, effects: Callable[[Call], Effects],
                 tensors: Mapping[str, tuple[str, tuple[str, ...]]] | None = None):
        self.schedule = schedule
        self.effects = effects
        self.tensors = dict(tensors or {})
        self.decls = {d.name: d for d in schedule.resources}
        self.pipelines = {d.name: d for d in schedule.resources if isinstance(d, PipelineDecl)}
        self.stages = {name: p.stages for name, p in self.pipelines.items()}
        self.roles = {r.name: r for r in schedule.roles}
        self.tx_bytes = self._pipeline_tx_bytes()
        self.subset: tuple[int, ...] | None = None  # warps of the `lm.warps` block lowered
        # an issue-only role (`issuing_warp`): every op runs on this warp alone
        self.forced: tuple[int, ...] | None = None
        self._smem_roles: dict[str, bool] = {}
        self._refilled: frozenset[str] | None = None  # buffers async-proxy writes refill
        self._generic: dict[str, tuple[str, ...]] = {}  # role -> refilled, touched generically
        self.subset_ids: dict[tuple[str, tuple[int, ...]], int] = {}
        self.layouts: dict[str, BufferLayout] = buffer_layouts(schedule)
        self.wgmma: WgmmaPlan = plan_wgmma(schedule, self.layouts)
        self.tensor_maps: dict[tuple, LTensorMap] = {}

    def tma(self, decl: SmemDecl, tensor: str, rank: int, view: Mapping[str, Expr]
            ) -> tuple[LTma | None, str]:
        """The tensor-map lowering of one copy of `decl` (cakegov/lower/tma.py), with the
        `CUtensorMap` parameter it goes through; or None and why not."""
        plan = copy_plan(decl, rank, self.layouts[decl.name])
        if isinstance(plan, str):
            return None, f"row-wise cp.async.bulk: {plan}"
        assert isinstance(plan, TilePlan)
        key = (tensor, plan.box_rows, plan.box_cols, plan.swizzle.name)
        if key not in self.tensor_maps:
            self.tensor_maps[key] = LTensorMap(
                name=f"tmap_{tensor}_{len(self.tensor_maps)}", tensor=tensor,
                dtype=decl.dtype, rows=view["src_rows"], cols=view["src_cols"],
                box_rows=plan.box_rows, box_cols=plan.box_cols, swizzle=plan.swizzle.name)
        boxes = tuple(LBox(offset=b.offset, row=b.row, col=b.col) for b in plan.boxes)
        return LTma(map=self.tensor_maps[key].name, boxes=boxes), ""

    def _pipeline_tx_bytes(self) -> dict[str, int]:
        """Bytes each pipeline's producer loads per iteration into its full barrier: one
        stage of every buffer loaded with `ring.full(k)` (counted once per buffer, so a
        producer loop peeled into a prologue and a main loop arms the same bytes)."""
        out: dict[str, int] = {}
        seen: set[tuple[str, str]] = set()
        for role in self.schedule.roles:
            for stmt, _ in walk_statements(role.body):
                if not (isinstance(stmt, Call) and stmt.primitive == "load"):
                    continue
                bar = stmt.args.get("barrier")
                dst = stmt.args.get("dst")
                if isinstance(bar, BarrierRef) and bar.pipeline_side == "full" and \
                        isinstance(dst, SmemRef):
                    decl = self.decls.get(dst.name)
                    if isinstance(decl, SmemDecl) and (bar.name, dst.name) not in seen:
                        seen.add((bar.name, dst.name))
                        out[bar.name] = out.get(bar.name, 0) + decl.stage_bytes
        return out

    def barrier_name(self, ref: BarrierRef) -> str:
        return f"{ref.name}.{ref.pipeline_side}" if ref.pipeline_side else ref.name

    def barrier_index(self, ref: BarrierRef) -> Expr:
        if ref.pipeline_side is not None:
            return stage_expr(resolve_stages(ref.index or Const(value=0), self.stages),
                              self.stages[ref.name])
        return resolve_stages(ref.index, self.stages) if ref.index is not None \
            else Const(value=0)

    def size(self, name: str) -> Expr:
        """A workload size: the constant when the schedule fixes it (`sizes=`)."""
        if name in self.schedule.sizes:
            return Const(value=self.schedule.sizes[name])
        return Size(name=name)

    def copy_view(self, tensor: str, at: tuple[Expr, ...], path: str
                  ) -> dict[str, Expr]:
        """The source of a bulk copy as a row-major 2-D tensor (rank 1: `1 x n`) and the
        tile origin in it."""
        dims = self.tensors[tensor][1] if tensor in self.tensors else ()
        if len(dims) == 1 and len(at) == 1:
            return {"src_rows": Const(value=1), "src_cols": self.size(dims[0]),
                    "row0": Const(value=0), "col0": at[0]}
        if len(dims) == 2 and len(at) == 2:
            return {"src_rows": self.size(dims[0]), "src_cols": self.size(dims[1]),
                    "row0": at[0], "col0": at[1]}
        raise LoweringError(f"{path}: bulk loads read 1-D or 2-D tensors with one coordinate "
                            f"per dimension (`{tensor}` has {len(dims)}, `at` {len(at)})")

    def role_sync(self, role: RoleDecl, base: dict, why: str) -> LOp:
        """The synchronisation of every thread of `role` that the lowering inserts before a
        bulk copy or bulk store (the copy then follows everything the role did) and after
        a bulk-group wait: `bar.sync` on the role's reserved named barrier, or
        `__syncwarp()` for a one-warp role. Inside `with lm.warps(...)` it synchronises
        the warps of the subset only (the others do not reach it): `__syncwarp()` for one
        warp, else a named barrier reserved for the subset."""
        warps = role.warp_stop - role.warp_start
        named = [d.id for d in self.schedule.resources if isinstance(d, NamedBarrierDecl)]
        roles = [(r.name, r.warp_stop - r.warp_start) for r in self.schedule.roles]
        if self.subset is not None:
            if len(self.subset) <= 1:
                return LFence(**base, scope="warp", derived=why)
            key = (role.name, self.subset)
            if key not in self.subset_ids:
                free = free_barrier_ids(named, roles)[len(self.subset_ids):]
                if not free:
                    raise LoweringError(f"no hardware named barrier is left to synchronise "
                                        f"warps {list(self.subset)} of role `{role.name}`")
                self.subset_ids[key] = free[0]
            return LNamedSync(**base, barrier=f"warps {_warp_text(self.subset)} of "
                              f"{role.name}", id=self.subset_ids[key],
                              threads=32 * len(self.subset), wait=True, derived=why)
        if warps <= 1:
            return LFence(**base, scope="warp", derived=why)
        ident = role_barrier_id(named, roles, role.name)
        if ident is None:
            raise LoweringError(f"no hardware named barrier is left to synchronise role "
                                f"`{role.name}` (the schedule uses the others)")
        return LNamedSync(**base, barrier=f"role {role.name}", id=ident, threads=warps * 32,
                          wait=True, derived=why)

    def converges_before(self, role: RoleDecl, per: str) -> bool:
        """Does an elected-lane arrive need `__syncwarp()` before it (docs/language.md,
        "The convergence contract")? One lane arrives for its warp (`per="warp"`, or
        `per="role"` where the role or block is one warp) after the role's threads
        touched shared memory one by one: the lowering converges the warp first, so the
        arrive carries every lane's accesses, reads and writes, as if the warp had
        arrived together."""
        warps = len(self.subset) if self.subset is not None else \
            role.warp_stop - role.warp_start
        if not (per == "warp" or (per == "role" and warps == 1)):
            return False
        if role.name not in self._smem_roles:
            self._smem_roles[role.name] = any(
                isinstance(stmt, Call) and any(
                    x.space == "smem" and not x.collective
                    for x in (*self.effects(stmt).reads, *self.effects(stmt).writes))
                for stmt, _ in walk_statements(role.body)
                if isinstance(stmt, Call) and not stmt.primitive.startswith(
                    ("mbarrier_", "pipeline_", "named_barrier_")))
        return self._smem_roles[role.name]

    def generic_proxy(self, call: Call, proxy: str) -> str:
        """The proxy an access of `call` really goes through: an `mma_async` the lowering
        emits as `mma.sync` (no wgmma for it: cakegov/lower/warpgroup.py) reads its
        shared-memory operands with `ldmatrix`, the generic proxy."""
        if proxy == "async" and call.primitive == "mma_async" and \
                call.path not in self.wgmma.calls:
            return "generic"
        return proxy

    def refill_fenced(self, role: RoleDecl) -> tuple[str, ...]:
        """The buffers an async-proxy write refills (a bulk or TMA copy lands in them) that
        `role` reads or writes through the generic proxy. Non-empty: every release of the
        role (pipeline `release`, mbarrier `arrive`) and the role sync before each of its
        own bulk copies are preceded by `fence.proxy.async`, so the refill the hand-off
        enables is ordered after the role's generic accesses (axiom A19; PTX ISA, memory
        consistency model: proxies)."""
        if self._refilled is None:
            self._refilled = frozenset(
                x.name for r in self.schedule.roles for stmt, _ in walk_statements(r.body)
                if isinstance(stmt, Call)
                for x in self.effects(stmt).writes if x.space == "smem" and x.proxy == "async")
        if role.name not in self._generic:
            self._generic[role.name] = tuple(sorted({
                x.name for stmt, _ in walk_statements(role.body)
                if isinstance(stmt, Call) and not stmt.primitive.startswith(
                    ("mbarrier_", "pipeline_", "named_barrier_"))
                for x in (*self.effects(stmt).reads, *self.effects(stmt).writes)
                if x.space == "smem" and x.name in self._refilled
                and self.generic_proxy(stmt, x.proxy) == "generic"}))
        return self._generic[role.name]

    def release_fence(self, role: RoleDecl, base: dict, why: str) -> list[LOp]:
        """`fence.proxy.async` before a release of a role that touches refilled buffers
        through the generic proxy (`refill_fenced`), else nothing."""
        names = self.refill_fenced(role)
        if not names:
            return []
        return [LFence(**base, scope="proxy_async",
                       derived=f"{why} after generic accesses of "
                               + ", ".join(f"`{n}`" for n in names))]

    def arrivals(self, role: RoleDecl, per: str) -> int:
        """Arrivals one arrive statement makes: inside `with lm.warps(...)` only the
        subset's warps arrive."""
        warps = role.warp_stop - role.warp_start if self.subset is None else len(self.subset)
        return {"role": 1, "warp": warps, "thread": warps * 32}[per]

    # ---- statements ------------------------------------------------------------------

    def body(self, stmts: tuple[Stmt, ...], role: RoleDecl) -> tuple[LOp, ...]:
        out: list[LOp] = []
        for stmt in stmts:
            if isinstance(stmt, For):
                out.append(LFor(path=stmt.path, span=stmt.span, var=stmt.var,
                                start=stmt.start, stop=stmt.stop, step=stmt.step,
                                body=self.body(stmt.body, role), subset=self.subset,
                                counter=stmt.counter))
            elif isinstance(stmt, Warps):  # its ops carry the subset (LOp.subset)
                self.subset = self.forced or stmt.members
                try:
                    out.extend(self.body(stmt.body, role))
                finally:
                    self.subset = self.forced
            else:
                ops = self.call(stmt, role)
                if self.subset is not None:
                    ops = [op.model_copy(update={"subset": self.subset}) for op in ops]
                if ops and out and _proxy_fence(ops[0]) and ops[0].derived and \
                        _fenced_since_access(out, ops[0].subset):
                    ops = ops[1:]  # no access since the last proxy fence
                if ops and out and _proxy_fence(ops[0]) and ops[0].derived and \
                        _warp_fence(out[-1]) and out[-1].subset == ops[0].subset:
                    # the schedule's own `lm.syncwarp()` just before: fence before it, and
                    # it converges the warp for the arrive
                    out.insert(len(out) - 1, ops[0])
                    ops = ops[1:]
                    if ops and _warp_fence(ops[0]) and ops[0].derived:
                        ops = ops[1:]
                if ops and out and _warp_fence(ops[0]) and _warp_fence(out[-1]) and \
                        ops[0].derived and ops[0].subset == out[-1].subset:
                    ops = ops[1:]  # the warp has just converged
                out.extend(ops)
        return tuple(out)

    def call(self, call: Call, role: RoleDecl) -> list[LOp]:
        p, a = call.primitive, call.args
        base = {"path": call.path, "span": call.span}
        if p.startswith("pipeline_"):
            return self.pipeline_op(call, role)
        if p == "load":
            dst, bar = a["dst"], a["barrier"]
            decl = self.decls[dst.name]
            assert isinstance(decl, SmemDecl)
            at = tuple(resolve_stages(e, self.stages) for e in a["at"].items)
            view = self.copy_view(a["src"].name, at, call.path)
            tma, note = self.tma(decl, a["src"].name, len(at), view)
            # the role's own generic accesses of a refilled buffer are handed to the copy
            # by the role sync: fence them first (axiom A19)
            return [*self.release_fence(role, base, "load"), self.role_sync(role, base,
                                                                            "load"), LCopy(
                **base, buffer=dst.name,
                stage=resolve_stages(dst.stage, self.stages) if dst.stage is not None
                else Const(value=0),
                tensor=a["src"].name,
                at=at,
                bytes=decl.stage_bytes, rows=decl.stage_bytes // decl.row_bytes,
                row_bytes=decl.row_bytes, barrier=self.barrier_name(bar),
                barrier_index=self.barrier_index(bar),
                pad=bool(getattr(a.get("pad"), "value", False)),
                elem_bytes=dtype_bytes(decl.dtype),
                multicast=resolve_stages(a["multicast"].expr, self.stages)
                if isinstance(a.get("multicast"), ExprValue) else None,
                tma=tma, note=note, **view,
            )]
        if p in ("mbarrier_arrive", "mbarrier_expect_tx"):
            bar = a["bar"]
            per = a["per"].value if "per" in a else ("warp" if p == "mbarrier_arrive"
                                                      else "role")
            n = self.arrivals(role, per)
            converge: list[LOp] = []
            if p == "mbarrier_arrive":
                converge = self.release_fence(role, base, "arrive")
                # every lane's fence (and access) before the elected lane's arrive: after a
                # proxy fence even when the accesses were warp-collective
                elected = per == "warp" or (per == "role" and (
                    len(self.subset) if self.subset is not None
                    else role.warp_stop - role.warp_start) == 1)
                if self.converges_before(role, per) or (converge and elected):
                    converge.append(LFence(**base, scope="warp", derived="arrive"))
            tx: Expr = Const(value=0)
            if p == "mbarrier_expect_tx":
                value = a["bytes"]
                if not isinstance(value, ExprValue):
                    raise LoweringError(f"{call.path}: expect_tx bytes must be an index "
                                        "expression")
                tx = resolve_stages(value.expr, self.stages)
            return [*converge, LArrive(**base, barrier=self.barrier_name(bar),
                            index=self.barrier_index(bar), arrivals=n, tx=tx,
                            expects=p == "mbarrier_expect_tx", per=per, source=p,
                            cta=resolve_stages(a["cta"].expr, self.stages)
                            if isinstance(a.get("cta"), ExprValue) else None)]
        if p == "mbarrier_wait":
            bar = a["bar"]
            return [LWait(**base, barrier=self.barrier_name(bar),
                          index=self.barrier_index(bar),
                          parity=resolve_stages(a["parity"].expr, self.stages), source=p)]
        if p in ("named_barrier_sync", "named_barrier_arrive"):
            decl = self.decls[a["bar"].name]
            assert isinstance(decl, NamedBarrierDecl)
            return [LNamedSync(**base, barrier=decl.name, id=decl.id, threads=decl.threads,
                               wait=p == "named_barrier_sync")]
        if p == "mbarrier_init":
            bar = a["bar"]
            decl = self.decls[bar.name]
            assert isinstance(decl, MBarrierDecl)
            return [LInit(**base, barrier=bar.name, index=self.barrier_index(bar),
                          count=decl.count, source=p)]
        if p == "fence_barrier_init":
            return [LFence(**base, scope="mbarrier_init")]
        if p == "sync_cta":  # bar.sync 0: every thread of the CTA
            assert self.schedule.launch is not None
            return [LNamedSync(**base, barrier="cta", id=0,
                               threads=self.schedule.launch.warps * 32, wait=True)]
        if p == "sync_cluster":  # barrier.cluster: every thread of every CTA of the cluster
            assert self.schedule.launch is not None
            return [LNamedSync(**base, barrier="cluster", id=CLUSTER_BARRIER,
                               threads=self.schedule.launch.warps * 32
                               * cluster_size(self.schedule.launch.cluster), wait=True)]
        group_waits = [b for b in self.effects(call).barriers if b.op == "wait_group"]
        if group_waits:
            pending = a["pending"]
            if not (isinstance(pending, ExprValue) and isinstance(pending.expr, Const)
                    and pending.expr.value >= 0):
                raise LoweringError(f"{call.path}: `pending` must be a static count >= 0")
            kind = group_waits[0].barrier
            accs = self.wgmma_accumulators(role) if kind == "wgmma" else ()
            ops: list[LOp] = [LGroupWait(**base, group=kind, pending=pending.expr.value,
                                         source=p, wgmma=bool(accs), fragments=accs)]
            if kind == "bulk":  # the role's other warps learn it too
                ops.append(self.role_sync(role, base, p))
            elif not accs:
                # mma_async on mma.sync: each warp's MMA is done when it returns, but the
                # schedule may rely on a group being one operation of its warpgroup (axiom
                # A13: no warp retires it before every warp has issued it). The barrier
                # over the role's warps here gives that, and more. Its `ldmatrix` reads
                # are generic: fenced before the barrier, an elected release after it
                # carries every warp's fence (axiom A19)
                ops.extend(self.release_fence(role, base, p))
                ops.append(self.role_sync(role, base, p))
            return ops
        if p == "fence_proxy":
            return [LFence(**base, scope="proxy_async")]
        if p == "syncwarp":
            return [LFence(**base, scope="warp")]
        eff = self.effects(call)
        args = {k: _resolve_value(v, self.stages) for k, v in a.items()}
        reads = tuple(x.model_copy(update={"stage": resolve_stages(x.stage, self.stages)})
                      if x.stage is not None else x for x in eff.reads)
        reads = tuple(x.model_copy(update={"proxy": "generic"})
                      if self.generic_proxy(call, x.proxy) != x.proxy else x for x in reads)
        writes = tuple(x.model_copy(update={"stage": resolve_stages(x.stage, self.stages)})
                       if x.stage is not None else x for x in eff.writes)
        group = next((b.barrier for b in eff.barriers if b.op == "commit_group"), None)
        extra: dict[str, Any] = {}
        if p == "mma_async":
            extra = {"wgmma": self.wgmma.calls.get(call.path),
                     "note": self.wgmma.notes.get(call.path, "")}
        elif p == "store_async":
            extra = self.store_tma(args)
        op = LCompute(**base, primitive=p, args=args, reads=reads, writes=writes,
                      flops=eff.flops, global_bytes=eff.global_bytes, group=group, **extra)
        if group == "bulk":  # every thread has written (and fenced) its part of the tile
            return [self.role_sync(role, base, p), op]
        return [op]

    def wgmma_accumulators(self, role: RoleDecl) -> tuple[str, ...]:
        """The accumulators of the role's mma_async calls that lower to wgmma (all of the
        role's calls do, or none: cakegov/lower/warpgroup.py)."""
        out: list[str] = []
        for stmt, _ in walk_statements(role.body):
            if isinstance(stmt, Call) and stmt.path in self.wgmma.calls:
                name = stmt.args["acc"].name
                if name not in out:
                    out.append(name)
        return tuple(out)

    def store_tma(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """`tma` and `note` of a bulk store (`src` the shared tile, `dst` the tensor)."""
        src, dst, at = args.get("src"), args.get("dst"), args.get("at")
        decl = self.decls.get(src.name) if isinstance(src, SmemRef) else None
        if not (isinstance(decl, SmemDecl) and isinstance(at, CoordValue)
                and dst is not None and dst.name in self.tensors):
            return {"note": "row-wise cp.async.bulk: operands the tensor-map path does not "
                            "take"}
        dims = self.tensors[dst.name][1]
        view = {"src_rows": self.size(dims[0]) if len(dims) == 2 else Const(value=1),
                "src_cols": self.size(dims[-1])}
        tma, note = self.tma(decl, dst.name, len(at.items), view)
        return {"tma": tma, "note": note}

    def pipeline_op(self, call: Call, role: RoleDecl) -> list[LOp]:
        ring = self.pipelines[call.args["ring"].name]
        k = resolve_stages(call.args["iter"].expr, self.stages)
        s = ring.stages
        base = {"path": call.path, "span": call.span}
        stage = stage_expr(k, s)
        full, empty = f"{ring.name}.full", f"{ring.name}.empty"
        if call.primitive == "pipeline_acquire":
            ops: list[LOp] = [LWait(**base, barrier=empty, index=stage,
                                    parity=producer_parity(k, s), source=call.primitive)]
            if ring.name in self.tx_bytes:
                ops.append(LArrive(**base, barrier=full, index=stage, arrivals=1,
                                   tx=Const(value=self.tx_bytes[ring.name]), expects=True,
                                   per="role", source=call.primitive))
            return ops
        if call.primitive == "pipeline_commit":  # the whole role has written the stage
            return [self.role_sync(role, base, call.primitive),
                    LArrive(**base, barrier=full, index=stage, arrivals=1, per="role",
                            source=call.primitive)]
        if call.primitive == "pipeline_wait":
            return [LWait(**base, barrier=full, index=stage, parity=consumer_parity(k, s),
                          source=call.primitive)]
        if call.primitive == "pipeline_release":  # every lane of each warp is done
            return [*self.release_fence(role, base, call.primitive),
                    LFence(**base, scope="warp", derived=call.primitive),
                    LArrive(**base, barrier=empty, index=stage,
                            arrivals=self.arrivals(role, "warp"), per="warp",
                            source=call.primitive)]
        raise LoweringError(f"unknown pipeline operation {call.primitive}")

    # ---- whole kernel ----------------------------------------------------------------

    def barriers(self, offsets: Mapping[str, int]) -> tuple[LBarrier, ...]:
        out: list[LBarrier] = []
        for decl in self.schedule.resources:
            if isinstance(decl, MBarrierDecl):
                out.append(LBarrier(name=decl.name, origin="raw", stages=decl.stages,
                                    count=decl.count, offset=offsets[decl.name],
                                    init=decl.init))
            elif isinstance(decl, PipelineDecl):
                consumer = self.roles.get(decl.consumer)
                consumer_warps = (consumer.warp_stop - consumer.warp_start) if consumer else 1
                out.append(LBarrier(
                    name=f"{decl.name}.full", origin="pipeline_full", pipeline=decl.name,
                    stages=decl.stages, count=decl.full_count or 1,
                    offset=offsets[f"{decl.name}.full"],
                    tx_bytes=self.tx_bytes.get(decl.name),
                ))
                out.append(LBarrier(
                    name=f"{decl.name}.empty", origin="pipeline_empty", pipeline=decl.name,
                    stages=decl.stages, count=decl.empty_count or consumer_warps,
                    offset=offsets[f"{decl.name}.empty"],
                ))
        return tuple(out)


def _warp_fence(op: LOp) -> bool:
    return isinstance(op, LFence) and op.scope == "warp"


def _proxy_fence(op: LOp) -> bool:
    return isinstance(op, LFence) and op.scope == "proxy_async"


def _fenced_since_access(out: list[LOp], subset: tuple[int, ...] | None) -> bool:
    """Did the threads of `subset` execute a proxy fence after their last shared-memory
    access among the ops lowered so far in this body (only syncs and waits since)?"""
    for op in reversed(out):
        if _proxy_fence(op) and op.subset == subset:
            return True
        if isinstance(op, (LCompute, LCopy, LFor)) or (
                isinstance(op, (LFence, LNamedSync, LWait, LArrive, LGroupWait))
                and op.subset != subset):
            return False
    return False


# Statements an issue-only role may hold (issuing_warp): waits, and what one elected
# thread does (arming, arriving for the role, bulk copies, barrier initialisation).
_WAITS = frozenset({"mbarrier_wait", "pipeline_wait"})
_ELECTED = frozenset({"pipeline_acquire", "load", "mbarrier_init", "fence_barrier_init"})


def issuing_warp(role: RoleDecl) -> int | None:
    """The role-relative warp that does everything an *issue-only* role does, or None.

    A role is issue-only when its body holds only waits and operations of one elected
    thread (`arrive_expect_tx` and `arrive(per="role")`, bulk `load`s, `ring.acquire`,
    `mbarrier.init`), all issued by one warp (its first, or the first of the blocks they
    sit in): a TMA producer. Its other warps would only wait, and a warp that only waits
    can fall any number of phases behind and then wait forever; CUTLASS's and DeepGEMM's
    producers therefore run the load loop on one elected thread and let the others go
    (`cute::elect_one_sync()`, docs/lowering.md). So does the lowering: the role's body
    runs on this warp alone, as if the schedule had written `with lm.warps(w, w + 1):`
    around it; no barrier over the role is needed before its copies."""
    issuer: set[int] = set()

    def visit(body: tuple[Stmt, ...], first: int) -> bool:
        for stmt in body:
            if isinstance(stmt, For):
                if not visit(stmt.body, first):
                    return False
            elif isinstance(stmt, Warps):
                if not visit(stmt.body, stmt.members[0]):
                    return False
            elif isinstance(stmt, Call):
                p = stmt.primitive
                if p in _WAITS:
                    continue
                per = stmt.args.get("per")
                per = getattr(per, "value", None)
                if p in _ELECTED or (p == "mbarrier_expect_tx" and per in (None, "role")) \
                        or (p == "mbarrier_arrive" and per == "role"):
                    issuer.add(first)
                    continue
                return False
            else:
                return False
        return True

    if not visit(role.body, 0) or len(issuer) != 1:
        return None
    return issuer.pop()


def _warp_text(warps: tuple[int, ...]) -> str:
    step = warps[1] - warps[0] if len(warps) > 1 else 1
    if warps == tuple(range(warps[0], warps[-1] + 1, step)) and len(warps) > 2:
        return f"{warps[0]}..{warps[-1]}" + (f" step {step}" if step > 1 else "")
    return ", ".join(str(w) for w in warps)


def lower(schedule: Schedule, effects: Callable[[Call], Effects],
          tensors: Mapping[str, tuple[str, tuple[str, ...]]],
          limits: Mapping[str, Any] | None = None, *,
          outputs: Sequence[str] | None = None,
          size_names: Sequence[str] | None = None) -> LoweredKernel:
    """Lower a checked schedule. `effects` gives each call's primitive effects; `tensors`
    the workload's tensors (in its TENSORS order); `limits` the target's limits (register
    pool). With the workload's `outputs` and `size_names` (SIZES order) the kernel also
    records its ABI (`params`), which the CUDA emitter needs."""
    if schedule.launch is None:
        raise LoweringError("schedule has no lm.launch")
    try:
        return _lower(schedule, effects, tensors, limits, outputs, size_names)
    except (KeyError, AssertionError) as exc:  # a construct the checker should reject
        raise LoweringError(f"cannot lower: {type(exc).__name__} {exc}") from exc


def kernel_params(lw: _Lowerer, tensors: Mapping[str, tuple[str, tuple[str, ...]]],
                  outputs: Sequence[str] | None, size_names: Sequence[str] | None
                  ) -> tuple[LParam, ...]:
    """The kernel ABI: one pointer per tensor, then one int per size (docs/lowering.md)."""
    if outputs is None or size_names is None:
        return ()
    params = []
    for name, (dtype, dims) in tensors.items():
        if len(dims) == 1:
            view = (lw.size(dims[0]), Const(value=1))
        elif len(dims) == 2:
            view = (lw.size(dims[0]), lw.size(dims[1]))
        else:
            raise LoweringError(f"tensor `{name}` has rank {len(dims)}; the emitter supports "
                                "rank 1 and 2")
        params.append(LParam(name=name, kind="tensor", dtype=dtype, dims=tuple(dims),
                             output=name in outputs, rows=view[0], cols=view[1]))
    params += [LParam(name=n, kind="size") for n in size_names]
    params += [LParam(name=t.name, kind="tensor_map", dtype=t.dtype)
               for t in lw.tensor_maps.values()]
    return tuple(params)


def _lower(schedule: Schedule, effects: Callable[[Call], Effects],
           tensors: Mapping[str, tuple[str, tuple[str, ...]]],
           limits: Mapping[str, Any] | None, outputs: Sequence[str] | None = None,
           size_names: Sequence[str] | None = None) -> LoweredKernel:
    assert schedule.launch is not None
    limits = limits or {}
    lw = _Lowerer(schedule, effects, tensors)
    layouts = fragment_layouts(schedule, lw.wgmma.accumulators)
    layout = smem_layout(schedule)
    offsets = {b.name: b.offset for b in layout.barriers}
    threads = schedule.launch.warps * 32
    entry = launch_registers(threads, int(limits.get("registers_per_sm", REGISTERS_PER_SM)),
                             int(limits.get("registers_per_thread", REGISTERS_PER_THREAD)))
    roles = []
    for role in schedule.roles:
        op = None
        if role.regs is not None and role.regs != entry:
            op = "inc" if role.regs > entry else "dec"
        issuer = issuing_warp(role)
        lw.forced = lw.subset = (issuer,) if issuer is not None and \
            role.warp_stop - role.warp_start > 1 else None
        try:
            body = lw.body(role.body, role)
        finally:
            lw.forced = lw.subset = None
        roles.append(LRole(name=role.name, warp_start=role.warp_start,
                           warp_stop=role.warp_stop, regs=role.regs, setmaxnreg=op,
                           body=body, counters=counters_of(role.body)))
    buffers = []
    for decl in schedule.resources:
        if isinstance(decl, SmemDecl):
            slot = layout.buffer(decl.name)
            assert slot is not None
            lay = lw.layouts[decl.name]
            buffers.append(LBuffer(name=decl.name, dtype=decl.dtype, shape=decl.shape,
                                   stages=decl.stages, offset=slot.offset,
                                   stage_bytes=decl.stage_bytes, align=slot.align,
                                   swizzle=decl.swizzle, alias=slot.alias,
                                   layout="swizzled" if lay.swizzled else "row_major",
                                   note=lay.note))
    return LoweredKernel(
        name=schedule.name,
        schedule_sha256=schedule_sha256(schedule),
        target=schedule.target,
        workload=schedule.workload,
        sizes=dict(schedule.sizes),
        divisible=dict(schedule.divisible),
        grid=schedule.launch.grid,
        warps=schedule.launch.warps,
        threads=threads,
        cluster=schedule.launch.cluster,
        cluster_nonportable=schedule.launch.cluster_nonportable,
        launch_regs=entry,
        smem_bytes=layout.total_bytes,
        smem_base_align=max([b.align for b in layout.buffers], default=16),
        buffers=tuple(buffers),
        fragments=tuple(LFragment(name=d.name, dtype=d.dtype, shape=d.shape, role=d.role,
                                  layout=layouts.get(d.name))
                        for d in schedule.resources if isinstance(d, FragmentDecl)),
        barriers=lw.barriers(offsets),
        named_barriers=tuple(LNamedBarrier(name=d.name, id=d.id, threads=d.threads)
                             for d in schedule.resources if isinstance(d, NamedBarrierDecl)),
        roles=tuple(roles),
        tensors=dict(tensors),
        params=kernel_params(lw, tensors, outputs, size_names),
        zero_offset=layout.zero_offset,
        zero_bytes=layout.zero_bytes,
        subset_barriers=tuple(LSubsetBarrier(role=role, warps=warps, id=ident)
                              for (role, warps), ident in lw.subset_ids.items()),
        tensor_maps=tuple(lw.tensor_maps.values()),
    )
