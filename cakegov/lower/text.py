"""`cakegov lower --emit lowered`: a readable, deterministic text form of a LoweredKernel.

It prints every derived quantity where the emitter and the simulator read it: offsets,
counts, transaction bytes, stage and parity expressions, warp ranges, register budgets,
fragment layouts and the kernel ABI. Expressions use the schedule's own spelling
(`lm.cdiv(lm.K, 64)`, `(k % 4)`). `--format json` gives the model itself."""

from __future__ import annotations

from cakegov.ir.expr import Const, render, step_expr
from cakegov.lower.kernel import (
    CLUSTER_BARRIER,
    LArrive,
    LCompute,
    LCopy,
    LFence,
    LFor,
    LGroupWait,
    LInit,
    LNamedSync,
    LOp,
    LoweredKernel,
    LRole,
    LTma,
    LWait,
    LWgmma,
    LWgmmaOperand,
)

INDENT = "  "


def _value(value) -> str:
    kind = value.kind
    if kind == "smem":
        return value.name + (f"[{render(value.stage)}]" if value.stage is not None else "")
    if kind == "fragment" and value.tile is not None:
        t = value.tile
        return (f"{value.name}[{render(t.row0)}:+{t.rows}, {render(t.col0)}:+{t.cols}]")
    if kind in ("fragment", "tensor", "barrier", "named_barrier", "pipeline"):
        return value.name
    if kind == "expr":
        return render(value.expr)
    if kind == "coord":
        return "(" + ", ".join(render(e) for e in value.items) + ")"
    if kind == "str":
        return repr(value.value)
    return str(value.value)


def _ops(ops: tuple[LOp, ...], depth: int, enclosing: tuple[int, ...] | None,
         kernel: LoweredKernel | None = None) -> list[str]:
    """Ops in order; a run of ops of one `with lm.warps(...)` block (LOp.subset) is
    printed under one `warps [...] of the role only:` head."""
    out: list[str] = []
    current = enclosing
    for op in ops:
        if op.subset != current:
            current = op.subset
            if current is not None and current != enclosing:
                out.append(f"{INDENT * depth}warps {list(current)} of the role only:")
        inner = depth + 1 if current is not None and current != enclosing else depth
        out.extend(_op(op, inner, kernel))
    return out


def _tma(tma: LTma, kernel: LoweredKernel | None) -> str:
    tmap = kernel.tensor_map(tma.map) if kernel is not None else None
    box = f" box {tmap.box_rows} x {tmap.box_cols}, swizzle {tmap.swizzle}" if tmap else ""
    where = ", ".join(f"+{b.offset} B <- tile ({b.row}, {b.col})" for b in tma.boxes)
    return (f"tensor map {tma.map}{box}: {len(tma.boxes)} cp.async.bulk.tensor.2d "
            f"({where})")


def _wgmma(w: LWgmma) -> str:
    def operand(o: LWgmmaOperand) -> str:
        starts = "; ".join(", ".join(str(x) for x in block) for block in o.starts)
        return (f"{o.buffer} desc LBO {o.lbo} SBO {o.sbo} swizzle {o.swizzle} hi "
                f"{o.hi:#018x}, starts [{starts}] + warpgroup x {o.group_stride}")
    return (f"wgmma m64n{w.n}k{w.k}.f32.{w.dtype}: {w.groups_m} x {w.groups_n} "
            f"warpgroups, {w.blocks_m} x {w.blocks_n} instructions per K step, "
            f"{w.k_steps} K steps; a: {operand(w.a)}; b: {operand(w.b)}")


def _op(op: LOp, depth: int, kernel: LoweredKernel | None = None) -> list[str]:
    pad = INDENT * depth
    where = f"    # line {op.span.line}"
    if isinstance(op, LFor):
        step = f", step {render(step_expr(op.step))}" if op.step != 1 else ""
        step += f", advancing counter {op.counter}" if op.counter else ""
        head = (f"{pad}for {op.var} in [{render(op.start)}, {render(op.stop)}){step}:"
                f"{where}")
        return [head, *_ops(op.body, depth + 1, op.subset, kernel)]
    if isinstance(op, LWait):
        return [f"{pad}wait {op.barrier}[{render(op.index)}] parity {render(op.parity)}"
                f"    # {op.source}, line {op.span.line}"]
    if isinstance(op, LArrive):
        tx = ""
        if op.expects:
            each = render(op.tx) if op.tx_each is None else f"{op.tx_each}"
            tx = f", expect_tx {each} B each" + (f" ({op.tx_bytes} B)" if op.tx_bytes else "")
        peer = f" of CTA rank {render(op.cta)} (remote)" if op.cta is not None else ""
        return [f"{pad}arrive {op.barrier}[{render(op.index)}]{peer} x{op.arrivals} "
                f"(one per {op.per}){tx}    # {op.source}, line {op.span.line}"]
    if isinstance(op, LCopy):
        pad_s = ", zero-padded" if op.pad else ""
        if op.multicast is not None:
            pad_s += f", multicast to CTA mask {render(op.multicast)}"
        how = _tma(op.tma, kernel) if op.tma is not None else op.note
        return [f"{pad}copy {op.tensor}[{render(op.row0)} + r, {render(op.col0)} ..] of "
                f"{render(op.src_rows)} x {render(op.src_cols)} -> {op.buffer}"
                f"[{render(op.stage)}]: {op.rows} rows x {op.row_bytes} B = {op.bytes} B "
                f"on {op.barrier}[{render(op.barrier_index)}]{pad_s}{where}",
                f"{pad}{INDENT}# {how}"]
    if isinstance(op, LNamedSync) and op.id == CLUSTER_BARRIER:
        return [f"{pad}barrier.cluster arrive + wait, {op.threads} threads ({op.barrier})"
                f"{where}"]
    if isinstance(op, LNamedSync):
        verb = "bar.sync" if op.wait else "bar.arrive"
        why = f", inserted for {op.derived}" if op.derived else ""
        return [f"{pad}{verb} {op.id}, {op.threads} ({op.barrier}{why}){where}"]
    if isinstance(op, LFence):
        why = f" (inserted for {op.derived})" if op.derived else ""
        return [f"{pad}fence {op.scope}{why}{where}"]
    if isinstance(op, LInit):
        return [f"{pad}init {op.barrier}[{render(op.index)}] count {op.count}{where}"]
    if isinstance(op, LGroupWait):
        how = ""
        if op.group == "wgmma":
            how = (f" (wgmma.wait_group; then {', '.join(op.fragments)} may be read)"
                   if op.wgmma else " (mma_async runs as mma.sync: no group is in flight)")
        return [f"{pad}wait_group {op.group} pending {op.pending}{how}{where}"]
    if isinstance(op, LCompute):
        args = ", ".join(f"{k}={_value(v)}" for k, v in op.args.items())
        lines = [f"{pad}{op.primitive}({args}){where}"]
        if op.wgmma is not None:
            lines.append(f"{pad}{INDENT}# {_wgmma(op.wgmma)}")
        elif op.tma is not None:
            lines.append(f"{pad}{INDENT}# {_tma(op.tma, kernel)}")
        elif op.note:
            keep = "mma.sync" if op.primitive == "mma_async" else "kept"
            lines.append(f"{pad}{INDENT}# {keep}: {op.note}" if op.primitive == "mma_async"
                         else f"{pad}{INDENT}# {op.note}")
        return lines
    raise TypeError(f"unknown op {op!r}")


def _role(role: LRole, kernel: LoweredKernel | None = None) -> list[str]:
    regs = (f"setmaxnreg.{role.setmaxnreg} {role.regs}" if role.setmaxnreg
            else "entry registers" if role.regs is None else f"{role.regs} (= entry)")
    head = (f"role {role.name}: warps [{role.warp_start}, {role.warp_stop}) threads "
            f"[{role.thread_start}, {role.thread_stop}), {regs}")
    return [head, *_ops(role.body, 1, None, kernel)]


def lowered_text(kernel: LoweredKernel) -> str:
    """The text form (ends with a newline)."""
    k = kernel
    lines = [
        f"kernel {k.name}    # workload {k.workload}, target {k.target}",
        f"schedule sha256 {k.schedule_sha256}",
        f"launch: grid ({', '.join(render(g) for g in k.grid)}), {k.threads} threads "
        f"({k.warps} warps), cluster {tuple(k.cluster)}",
        f"registers: {k.launch_regs} per thread at entry (__launch_bounds__({k.threads}, 1))",
    ]
    if k.sizes:
        lines.append("fixed sizes: " + ", ".join(f"{n} = {v}" for n, v in k.sizes.items()))
    if k.divisible:
        lines.append("divisible: " + ", ".join(f"{n} % {v} == 0"
                                                for n, v in k.divisible.items()))
    if k.params:
        params = [f"{p.name}: {'out ' if p.output else ''}{p.dtype}[{', '.join(p.dims)}] "
                  f"(view {render(p.rows)} x {render(p.cols)})" if p.kind == "tensor"
                  else f"{p.name}: CUtensorMap" if p.kind == "tensor_map"
                  else f"{p.name}: int" for p in k.params]
        lines.append("params: " + "; ".join(params))
    lines.append(f"shared memory: {k.smem_bytes} bytes (base aligned to {k.smem_base_align})")
    for b in k.buffers:
        lines.append(f"{INDENT}buffer {b.name}: {b.dtype}{list(b.shape)} x {b.stages} stages "
                     f"@ {b.offset} ({b.stage_bytes} B/stage, align {b.align}, swizzle "
                     f"{b.swizzle}, {b.layout.replace('_', '-')} layout)")
        if b.note:
            lines.append(f"{INDENT * 2}# {b.note}")
    for bar in k.barriers:
        tx = f", tx {bar.tx_bytes} B/phase" if bar.tx_bytes else ""
        tx += ", initialised by the schedule" if bar.init == "manual" else ""
        ring = f" of pipeline {bar.pipeline}" if bar.pipeline else ""
        addrs = ", ".join(render(bar.slot_offset(Const(value=i))) for i in range(bar.stages))
        lines.append(f"{INDENT}mbarrier {bar.name}[{bar.stages}] @ {addrs}: count "
                     f"{bar.count}{tx} ({bar.origin}{ring})")
    if k.zero_bytes:
        lines.append(f"{INDENT}zero row @ {k.zero_offset}: {k.zero_bytes} B")
    for t in k.tensor_maps:
        lines.append(f"tensor map {t.name}: {t.tensor} {t.dtype}[{render(t.rows)}, "
                     f"{render(t.cols)}], box {t.box_rows} x {t.box_cols}, swizzle "
                     f"{t.swizzle}, out-of-bounds elements read as zero")
    for n in k.named_barriers:
        lines.append(f"named barrier {n.name}: id {n.id}, {n.threads} threads")
    for sb in k.subset_barriers:
        lines.append(f"named barrier id {sb.id}: warps {list(sb.warps)} of role {sb.role}, "
                     f"{32 * len(sb.warps)} threads (reserved by the lowering)")
    for f in k.fragments:
        lay = f.layout
        if lay is None:
            desc = "no layout"
        elif lay.kind == "wgmma":
            desc = (f"wgmma layout, {lay.groups_m} x {lay.groups_n} warpgroups, "
                    f"{lay.blocks_m} x {lay.blocks_n} tiles of 64 x {lay.inst_n} per "
                    f"warpgroup, {lay.slots} per thread")
        elif lay.kind == "mma":
            desc = (f"mma layout, {lay.warps_m} x {lay.warps_n} warps, {lay.tiles_m} x "
                    f"{lay.tiles_n} tiles of 16 x 8 per warp, {lay.slots} per thread")
        else:
            desc = f"{lay.kind} layout over {lay.threads} threads, {lay.slots} per thread"
        lines.append(f"fragment {f.name}: {f.dtype}{list(f.shape)} in role {f.role}, {desc}")
    for role in k.roles:
        lines.extend(_role(role, k))
    return "\n".join(lines) + "\n"
