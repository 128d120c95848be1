"""CUDA C++ emission: print a `LoweredKernel` through Jinja2 templates.

The emitter walks the kernel and picks a template per construct: the kernel skeleton,
roles, fragments, loops and the synchronisation ops are in `cakegov/lower/templates/`;
every other primitive brings its own `TEMPLATE` (call site) and `DEVICE` (device
functions) in its plugin file. Templates are logic-free: they substitute values and loop
over lists. Every number they print comes from the LoweredKernel (offsets from
`LBuffer.stage_offset` / `LBarrier.slot_offset`, parities and stages from the lowered
ops, counts from the barriers); PTX spellings come from `spellings.py`. The output is a
pure function of the kernel, the rulebook's primitives and the verifier digest, so
identical input gives byte-identical text."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, Template, TemplateError

from cakegov import __version__
from cakegov.check.rulebook import PrimitivePlugin
from cakegov.ir.cluster import cluster_size
from cakegov.ir.expr import Const, render, step_expr
from cakegov.lower.cexpr import ExprSpellingError, cexpr, counter_var, loop_var
from cakegov.lower.kernel import (
    CLUSTER_BARRIER,
    LArrive,
    LCompute,
    LCopy,
    LFence,
    LFor,
    LFragment,
    LGroupWait,
    LInit,
    LNamedSync,
    LOp,
    LoweredKernel,
    LRole,
    LTma,
    LWait,
    LWgmma,
)
from cakegov.lower.operands import EmitError, ctype, fragment_var, operand
from cakegov.lower.spellings import ARRIVERS, FENCES, FRAGMENT_TYPES, PTX, WGMMA_TYPES

TEMPLATES = Path(__file__).parent / "templates"
MARKER_RE = re.compile(r"^\s*// @ (?P<path>\S+) \(line (?P<line>\d+)\): ")

__all__ = ["EmitError", "EmitResult", "emit_cuda"]


@dataclass(frozen=True)
class SourceMarker:
    """A line of the emitted CUDA that starts the code of one IR statement."""

    cuda_line: int  # 1-based
    path: str
    line: int  # line in the schedule file


@dataclass(frozen=True)
class EmitResult:
    """The emitted translation unit and where each IR statement landed in it."""

    source: str
    kernel: LoweredKernel
    markers: tuple[SourceMarker, ...]

    @property
    def entry(self) -> str:
        return self.kernel.name

    def node_at(self, cuda_line: int) -> SourceMarker | None:
        """The IR statement whose code contains `cuda_line` (the nearest marker above)."""
        best = None
        for marker in self.markers:
            if marker.cuda_line <= cuda_line:
                best = marker
        return best


def _environment() -> Environment:
    return Environment(loader=FileSystemLoader(str(TEMPLATES)), undefined=StrictUndefined,
                       trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False,
                       autoescape=False)


class _Emitter:
    def __init__(self, kernel: LoweredKernel, primitives: Mapping[str, PrimitivePlugin]):
        if kernel.target not in PTX:
            raise EmitError(f"no CUDA spellings for target {kernel.target} (have: "
                            f"{', '.join(sorted(PTX))})")
        if not kernel.params:
            raise EmitError("the kernel was lowered without its workload's outputs and sizes "
                            "(lower(..., outputs=, size_names=)); its ABI is unknown")
        self.kernel = kernel
        self.primitives = primitives
        self.ptx = PTX[kernel.target]
        self.env = _environment()
        self.used: set[str] = set()
        self._compiled: dict[str, Template] = {}
        self.wgmma_shapes: dict[str, tuple[int, int, str]] = {}  # device function -> shape

    # ---- helpers ---------------------------------------------------------------------

    def render(self, template: str, /, **context: Any) -> list[str]:
        text = self.env.get_template(template).render(ptx=self.ptx, **context)
        return text.splitlines()

    def plugin_template(self, primitive: str) -> Template:
        if primitive not in self._compiled:
            plugin = self.primitives.get(primitive)
            if plugin is None or not plugin.template:
                raise EmitError(f"primitive `{primitive}` has no CUDA TEMPLATE in its plugin "
                                "file (docs/lowering.md, 'Primitive templates')")
            self._compiled[primitive] = self.env.from_string(plugin.template)
        self.used.add(primitive)
        return self._compiled[primitive]

    def barrier(self, name: str):
        bar = self.kernel.barrier(name)
        if bar is None:
            raise EmitError(f"unknown mbarrier `{name}`")
        return bar

    # ---- ops ---------------------------------------------------------------------------

    def op(self, op: LOp, role: LRole) -> list[str]:
        what = getattr(op, "source", None) or getattr(op, "primitive", None) or op.kind
        if getattr(op, "derived", ""):
            what = f"{op.kind} the lowering inserts for {op.derived}"
        if isinstance(op, LCopy):
            what = "load"
        elif isinstance(op, LFor):
            what = f"for {op.var}"
        lines = self.render("marker.cu.j2", path=op.path, line=op.span.line, what=what)
        return lines + self._op(op, role)

    def ops(self, ops: tuple[LOp, ...], role: LRole,
            enclosing: tuple[int, ...] | None = None) -> list[str]:
        """The code of `ops`; each run of ops of one `with lm.warps(...)` block
        (LOp.subset) goes inside one warp-uniform predicate on the warp's index in its
        role (`warps.cu.j2`)."""
        out: list[str] = []
        i = 0
        while i < len(ops):
            subset = ops[i].subset
            j = i + 1
            while j < len(ops) and ops[j].subset == subset:
                j += 1
            body = [line for op in ops[i:j] for line in self.op(op, role)]
            if subset is None or subset == enclosing:
                out += body
            else:
                out += self.render("warps.cu.j2", condition=_warp_condition(subset),
                                   warps=", ".join(str(w) for w in subset), role=role.name,
                                   first=subset[0], body=body)
            i = j
        return out

    def _op(self, op: LOp, role: LRole) -> list[str]:
        if isinstance(op, LFor):
            body = self.ops(op.body, role, op.subset)
            return self.render("for.cu.j2", var=loop_var(op.var), start=cexpr(op.start),
                               stop=cexpr(op.stop), step=cexpr(step_expr(op.step)),
                               advance=f", ++{counter_var(op.counter)}" if op.counter else "",
                               body=body)
        if isinstance(op, LWait):
            bar = self.barrier(op.barrier)
            return self.render("wait.cu.j2", address=cexpr(bar.slot_offset(op.index)),
                               parity=cexpr(op.parity), barrier=op.barrier,
                               index=render(op.index))
        if isinstance(op, LArrive):
            bar = self.barrier(op.barrier)
            if op.cta is not None and op.expects:
                raise EmitError(f"{op.path}: a remote arrive does not arm transaction bytes")
            return self.render(
                "arrive.cu.j2", who=ARRIVERS[op.per],
                call="arrive_expect_tx" if op.expects else
                "arrive_remote" if op.cta is not None else "arrive",
                address=cexpr(bar.slot_offset(op.index)),
                extra=([f"{op.tx_each}u" if op.tx_each is not None
                        else f"(cg::u32)({cexpr(op.tx)})"] if op.expects else
                       [f"(cg::u32)({cexpr(op.cta)})"] if op.cta is not None else []),
                barrier=op.barrier,
                index=render(op.index), arrivals=op.arrivals)
        if isinstance(op, LNamedSync) and op.id == CLUSTER_BARRIER:
            return self.render("fence.cu.j2", statement="cg::cluster_sync();")
        if isinstance(op, LNamedSync):
            return self.render("named.cu.j2", call="named_sync" if op.wait else "named_arrive",
                               id=op.id, threads=op.threads, barrier=op.barrier)
        if isinstance(op, LFence):
            return self.render("fence.cu.j2", statement=FENCES[op.scope])
        if isinstance(op, LInit):
            bar = self.barrier(op.barrier)
            return self.render("init.cu.j2", address=cexpr(bar.slot_offset(op.index)),
                               count=op.count, barrier=op.barrier, index=render(op.index))
        if isinstance(op, LGroupWait):
            real = [{"fragments": [fragment_var(f) for f in op.fragments]}] if op.wgmma else []
            return self.render(f"group_wait_{op.group}.cu.j2", pending=op.pending,
                               wgmma=real, sync=[] if real else [1])
        if isinstance(op, LCopy):
            return self.copy(op, role)
        if isinstance(op, LCompute):
            return self.compute(op, role)
        raise EmitError(f"no template for lowered op {op.kind}")

    def role_view(self, role: LRole) -> dict[str, Any]:
        return {"name": role.name, "threads": role.warps * 32, "warps": role.warps}

    def copy(self, op: LCopy, role: LRole) -> list[str]:
        buf = self.kernel.buffer(op.buffer)
        param = self.kernel.param(op.tensor)
        if buf is None or param is None:
            raise EmitError(f"{op.path}: unknown buffer `{op.buffer}` or tensor `{op.tensor}`")
        view = {
            "ctype": ctype(buf.dtype), "pad": "true" if op.pad else "false",
            "dst": cexpr(buf.stage_offset(op.stage)), "src": op.tensor,
            "src_rows": cexpr(op.src_rows), "src_cols": cexpr(op.src_cols),
            "row0": cexpr(op.row0), "col0": cexpr(op.col0),
            "bar": cexpr(self.barrier(op.barrier).slot_offset(op.barrier_index)),
            "zero": str(self.kernel.zero_offset),
            "multicast": f"(cg::u32)({cexpr(op.multicast)})" if op.multicast is not None
            else "0u",
            "tma": [self.tma_view(op.tma)] if op.tma is not None else [],
            "rowwise": [] if op.tma is not None else [{"why": op.note}],
        }
        text = self.plugin_template("load").render(op=op, copy=view, ptx=self.ptx,
                                                   role=self.role_view(role))
        return text.splitlines()

    def tma_view(self, tma: LTma, src: str = "") -> dict[str, Any]:
        if self.kernel.tensor_map(tma.map) is None:
            raise EmitError(f"unknown tensor map `{tma.map}`")
        return {"map": tma.map, "src": src,
                "boxes": [{"offset": b.offset, "row": b.row, "col": b.col}
                          for b in tma.boxes]}

    def wgmma_view(self, w: LWgmma, op: LCompute) -> dict[str, Any]:
        """The instructions of one wgmma lowering, in K-step order, each with the offsets
        the LoweredKernel derived (the emitter adds nothing but the spelling)."""
        if w.dtype not in WGMMA_TYPES:
            raise EmitError(f"{op.path}: no wgmma spelling for {w.dtype}")
        fn = f"wgmma_m64n{w.n}k{w.k}_{w.dtype}"
        self.wgmma_shapes[fn] = (w.n, w.k, w.dtype)
        stage = {}
        for side in ("a", "b"):
            ref = op.args[side]
            buf = self.kernel.buffer(ref.name)
            if buf is None:
                raise EmitError(f"{op.path}: unknown buffer `{ref.name}`")
            stage[side] = cexpr(buf.stage_offset(ref.stage if ref.stage is not None
                                                 else Const(value=0)))
        half = w.n // 2
        instructions = [
            {"fn": fn, "slot": (mi * w.blocks_n + ni) * half, "a": w.a.starts[mi][ks],
             "b": w.b.starts[ni][ks], "keep": "cg_keep" if ks == 0 else "true"}
            for ks in range(w.k_steps) for mi in range(w.blocks_m) for ni in range(w.blocks_n)]
        return {"a_stage": stage["a"], "b_stage": stage["b"], "groups_n": w.groups_n,
                "a_stride": w.a.group_stride, "b_stride": w.b.group_stride,
                "a_hi": f"{w.a.hi:#x}", "b_hi": f"{w.b.hi:#x}", "instructions": instructions}

    def fast_path(self, op: LCompute) -> dict[str, Any]:
        """Template context choosing between the fast path and the kept lowering: `wgmma`
        / `sync` for mma_async, `tma` / `rowwise` for store_async (each a list of zero or
        one entry, so templates stay logic-free)."""
        wgmma = [self.wgmma_view(op.wgmma, op)] if op.wgmma is not None else []
        tma: list[dict[str, Any]] = []
        if op.tma is not None:
            src = op.args.get("src")
            buf = self.kernel.buffer(getattr(src, "name", ""))
            if buf is None:
                raise EmitError(f"{op.path}: a tensor-map store needs a shared-memory source")
            stage = getattr(src, "stage", None)
            tma = [self.tma_view(op.tma, cexpr(buf.stage_offset(
                stage if stage is not None else Const(value=0))))]
        return {"wgmma": wgmma, "sync": [] if wgmma else [{"why": op.note}],
                "tma": tma, "rowwise": [] if tma else [{"why": op.note}]}

    def compute(self, op: LCompute, role: LRole) -> list[str]:
        plugin = self.primitives.get(op.primitive)
        kinds = {a.name: a.kind for a in plugin.args} if plugin is not None else {}
        args = {name: operand(self.kernel, value, kinds.get(name, ""))
                for name, value in op.args.items()}
        template = self.plugin_template(op.primitive)
        try:
            text = template.render(op=op, args=args, ptx=self.ptx, role=self.role_view(role),
                                   **self.fast_path(op))
        except TemplateError as exc:
            raise EmitError(f"{op.path} (line {op.span.line}): primitive `{op.primitive}` "
                            f"cannot be emitted with these arguments: {exc}") from exc
        return text.splitlines()

    # ---- kernel ------------------------------------------------------------------------

    def fragment(self, frag: LFragment) -> list[str]:
        lay = frag.layout
        if lay is None:
            raise EmitError(f"fragment `{frag.name}` has no layout")
        t = ctype(frag.dtype)
        if lay.kind == "wgmma":
            targs = [t, lay.rows, lay.cols, lay.groups_m, lay.groups_n, lay.blocks_m,
                     lay.blocks_n, lay.inst_n]
        elif lay.kind == "mma":
            targs = [t, lay.rows, lay.cols, lay.warps_m, lay.warps_n]
        else:
            targs = [t, lay.rows, lay.cols, lay.threads]
        return self.render("fragment.cu.j2", type=FRAGMENT_TYPES[lay.kind], targs=targs,
                           var=fragment_var(frag.name), name=frag.name, dtype=frag.dtype,
                           shape=list(frag.shape), kind=lay.kind, slots=lay.slots)

    def role(self, role: LRole) -> str:
        setmaxnreg = ([{"spelling": self.ptx[f"setmaxnreg_{role.setmaxnreg}"],
                        "regs": role.regs, "entry": self.kernel.launch_regs}]
                      if role.setmaxnreg else [])
        fragments = [line for f in self.kernel.fragments if f.role == role.name
                     for line in self.fragment(f)]
        body = [line for name in role.counters for line in
                self.render("counter.cu.j2", var=counter_var(name), name=name)]
        body += self.ops(role.body, role)
        return "\n".join(self.render(
            "role.cu.j2", name=role.name, warp_start=role.warp_start,
            warp_stop=role.warp_stop, thread_start=role.thread_start,
            thread_stop=role.thread_stop, threads=role.warps * 32, setmaxnreg=setmaxnreg,
            fragments=fragments, body=body))

    def params(self) -> tuple[list[str], list[str]]:
        decls, names = [], []
        for p in self.kernel.params:
            names.append(p.name)
            if p.kind == "size":
                decls.append(f"int {p.name}")
            elif p.kind == "tensor_map":
                decls.append(f"const __grid_constant__ cg::TensorMap {p.name}")
            else:
                qual = "" if p.output else "const "
                decls.append(f"{qual}{ctype(p.dtype)}* __restrict__ {p.name}")
        return decls, names

    def contract(self) -> list[dict[str, str]]:
        sizes = {p.name for p in self.kernel.params if p.kind == "size"}
        guards = [{"condition": f"{n} != {v}", "reason": f"the schedule fixes {n} = {v}"}
                  for n, v in self.kernel.sizes.items() if n in sizes]
        guards += [{"condition": f"{n} % {v} != 0",
                    "reason": f"the schedule requires {n} divisible by {v}"}
                   for n, v in self.kernel.divisible.items() if n in sizes]
        # sizes are positive: 0 is a multiple of every tile and would pass the guard above
        # into loops with no iteration (workloads refuse it on the host as well)
        guards += [{"condition": f"{n} <= 0", "reason": f"the workload requires {n} > 0"}
                   for n in sorted(sizes) if n not in self.kernel.sizes]
        return guards

    def wgmma_function(self, fn: str, n: int, k: int, dtype: str) -> str:
        """The device function issuing one `wgmma.mma_async` of shape m64n{n}k{k}: N / 2
        accumulator registers as `+f` operands, then the two descriptors and scale-d."""
        ptx_type, transposes = WGMMA_TYPES[dtype]
        regs = n // 2
        return "\n".join(self.render(
            "wgmma.cu.j2", fn=fn, n=n, k=k, type=ptx_type,
            regs=[f"%{i}" for i in range(regs)], outs=[f'"+f"(d[{i}])' for i in range(regs)],
            da=regs, db=regs + 1, scale=regs + 2, trans=", 0, 0" if transposes else ""))

    def init(self) -> list[str]:
        lines: list[str] = []
        for bar in self.kernel.barriers:
            if bar.init == "manual":  # the schedule initialises it (LInit)
                continue
            for i in range(bar.stages):
                offset = bar.slot_offset(Const(value=i))
                lines += self.render("mbarrier_init.cu.j2", address=cexpr(offset),
                                     count=bar.count, barrier=bar.name, index=i)
        return lines

    def emit(self, verifier_digest: str, version: str) -> str:
        k = self.kernel
        roles = [self.role(r) for r in k.roles]  # first: collects the primitives used
        decls, names = self.params()
        device = []
        needed = set(self.used)
        for name in sorted(self.used):
            needed.update(self.primitives[name].requires)
        for name in sorted(needed):
            plugin = self.primitives.get(name)
            if plugin is None:
                raise EmitError(f"a template requires primitive `{name}`, which the rulebook "
                                "does not have")
            if plugin.device:
                code = self.env.from_string(plugin.device).render(ptx=self.ptx)
                device.append({"name": name, "relpath": plugin.relpath,
                               "version": plugin.version, "code": code})
        constructs = [self.wgmma_function(fn, *shape)
                      for fn, shape in sorted(self.wgmma_shapes.items())]
        zero = (self.render("zero_fill.cu.j2", bytes=k.zero_bytes, offset=k.zero_offset,
                            words=k.zero_bytes // 4, threads=k.threads)
                if k.zero_bytes else [])
        header = "\n".join(self.render(
            "header.cu.j2", name=k.name, target=k.target, version=version,
            schedule_sha256=k.schedule_sha256, verifier_digest=verifier_digest,
            workload=k.workload, grid=[render(g) for g in k.grid], threads=k.threads,
            smem_bytes=k.smem_bytes, abi=names,
            notes=[*(["Launch with the function attribute "
                      "cudaFuncAttributeNonPortableClusterSizeAllowed = 1: the cluster of "
                      f"{cluster_size(k.cluster)} CTAs is above the portable size (the "
                      "schedule opts in with cluster_nonportable=True)."]
                     if k.cluster_nonportable else []),
                   "Nothing in this file has been validated on a GPU by cakegov itself; "
                   "see docs/lowering.md."]))
        runtime = self.env.get_template("runtime.cuh.j2").render(ptx=self.ptx)
        text = self.env.get_template("kernel.cu.j2").render(
            header=header, runtime=runtime, device=device, constructs=constructs,
            threads=k.threads, name=k.name,
            params=decls, contract=self.contract(), base_align=k.smem_base_align,
            init=self.init(), zero_fill=zero, roles=roles,
            cluster_sync=(["cg::cluster_sync();  // the peers' barriers are initialised "
                           "before any remote use"] if cluster_size(k.cluster) > 1 else []),
            cluster_attr=(f" __cluster_dims__({', '.join(str(d) for d in (*k.cluster, 1, 1)[:3])})"
                          if cluster_size(k.cluster) > 1 else ""))
        return text.rstrip("\n") + "\n"


def _warp_condition(subset: tuple[int, ...]) -> str:
    """A warp-uniform test that the warp's index in its role (`cg_rwarp`) is in
    `subset` (a range, possibly strided, or a list)."""
    first, last = subset[0], subset[-1]
    step = subset[1] - first if len(subset) > 1 else 1
    if subset == tuple(range(first, last + 1, step)):
        cond = f"cg_rwarp >= {first} && cg_rwarp <= {last}" if len(subset) > 1 \
            else f"cg_rwarp == {first}"
        return cond + (f" && (cg_rwarp - {first}) % {step} == 0" if step > 1 else "")
    return " || ".join(f"cg_rwarp == {w}" for w in subset)


def _markers(source: str) -> tuple[SourceMarker, ...]:
    out = []
    for number, line in enumerate(source.splitlines(), start=1):
        m = MARKER_RE.match(line)
        if m:
            out.append(SourceMarker(number, m["path"], int(m["line"])))
    return tuple(out)


def emit_cuda(kernel: LoweredKernel, primitives: Mapping[str, PrimitivePlugin], *,
              verifier_digest: str, version: str = __version__) -> EmitResult:
    """The CUDA C++ translation unit of `kernel` (docs/lowering.md)."""
    try:
        source = _Emitter(kernel, primitives).emit(verifier_digest, version)
    except ExprSpellingError as exc:
        raise EmitError(str(exc)) from exc
    return EmitResult(source=source, kernel=kernel, markers=_markers(source))
