"""Compiler findings: ptxas and front-end reports mapped back to the schedule.

Codes (docs/lowering.md, "Compile findings"):

| code | name | severity | when |
|---|---|---|---|
| C001 | compile-error | blocking | the front end or ptxas rejected the emitted code |
| C002 | register-spill | report | ptxas spills registers to local memory |
| C003 | registers-over-launch | blocking | the entry uses more registers than the launch allows |
| C004 | setmaxnreg-ignored | report | ptxas ignores setmaxnreg (warning C7508) |
| C005 | compile-warning | report | any other warning |

A front-end diagnostic is mapped to the IR statement whose code contains its line (the
`// @ path (line N)` markers the emitter writes); ptxas reports per kernel, so its
findings point at the roles whose register budgets they concern."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from cakegov.check.findings import Finding
from cakegov.gpu.compile import CompileOutput
from cakegov.gpu.ptxas import Diagnostic
from cakegov.ir.nodes import Schedule, Span
from cakegov.lower.emit import EmitResult
from cakegov.lower.kernel import LFor, LOp, LoweredKernel

SETMAXNREG_IGNORED = "C7508"

NAMES = {"C001": "compile-error", "C002": "register-spill", "C003": "registers-over-launch",
         "C004": "setmaxnreg-ignored", "C005": "compile-warning"}


def _spans(ops: tuple[LOp, ...]) -> Iterator[tuple[str, Span]]:
    for op in ops:
        yield op.path, op.span
        if isinstance(op, LFor):
            yield from _spans(op.body)


def _op_spans(kernel: LoweredKernel) -> dict[str, Span]:
    return {path: span for role in kernel.roles for path, span in _spans(role.body)}


class _Findings:
    def __init__(self, out: CompileOutput, emitted: EmitResult, file: str,
                 schedule: Schedule | None):
        self.out = out
        self.emitted = emitted
        self.kernel = emitted.kernel
        self.file = file
        self.schedule = schedule
        self.spans = _op_spans(self.kernel)

    def make(self, code: str, severity: str, message: str, *, path: str = "schedule",
             span: Span | None = None, role: str | None = None, condition: str = "",
             hint: str | None = None, evidence: dict[str, Any] | None = None) -> Finding:
        if span is None and self.schedule is not None and path == "schedule":
            span = self.schedule.span
        return Finding(code=code, rule=NAMES[code], severity=severity,  # type: ignore[arg-type]
                       authority="legality" if severity == "blocking" else "estimate",
                       message=message, file=self.file, path=path, span=span, role=role,
                       condition=condition, hint=hint,
                       evidence={"compiler": self.out.version or self.out.compiler,
                                 "arch": self.out.arch, **(evidence or {})})

    def role_node(self, name: str) -> tuple[str, Span | None]:
        role = self.schedule.role(name) if self.schedule is not None else None
        return (role.path, role.span) if role is not None else ("schedule", None)

    def budgets(self) -> dict[str, int | None]:
        return {r.name: r.regs for r in self.kernel.roles}

    def diagnostic(self, d: Diagnostic) -> Finding:
        where = f" (CUDA line {d.line})" if d.line else ""
        code = "C001" if d.severity == "error" else "C005"
        path, span = "schedule", None
        if d.line is not None:
            marker = self.emitted.node_at(d.line)
            if marker is not None:
                path, span = marker.path, self.spans.get(marker.path)
        role = path.split(".")[1] if path.startswith("roles.") else None
        tag = f" {d.code}" if d.code else ""
        return self.make(
            code, "blocking" if code == "C001" else "report",
            f"{d.source} {d.severity}{tag}{where}: {d.message}", path=path, span=span,
            role=role, condition="the emitted CUDA compiles without errors" if code == "C001"
            else "the emitted CUDA compiles without warnings",
            hint=("the emitter produced code the compiler rejects: report it with "
                  "`cakegov lower FILE --emit cuda`" if code == "C001" else None),
            evidence={"cuda_line": d.line})

    def setmaxnreg_ignored(self, d: Diagnostic) -> list[Finding]:
        roles = [r for r in self.kernel.roles if r.setmaxnreg]
        out = []
        for role in roles or [None]:
            path, span = self.role_node(role.name) if role else ("schedule", None)
            out.append(self.make(
                "C004", "report",
                f"ptxas ignores setmaxnreg ({d.code}): "
                + (f"role `{role.name}` runs with the entry budget of "
                   f"{self.kernel.launch_regs} registers instead of {role.regs}" if role
                   else d.message),
                path=path, span=span, role=role.name if role else None,
                condition="ptxas knows the entry register count "
                          "(__launch_bounds__(threads, 1))",
                hint="keep __launch_bounds__ with a minimum of 1 block per SM in the emitted "
                     "kernel; do not pass -maxrregcount",
                evidence={"message": d.message}))
        return out

    def stats(self) -> list[Finding]:
        st = self.out.parsed.stats
        out = []
        budgets = self.budgets()
        if st.spill_stores or st.spill_loads:
            tight = min((r for r in self.kernel.roles if r.regs is not None),
                        key=lambda r: r.regs or 0, default=None)
            path, span = self.role_node(tight.name) if tight else ("schedule", None)
            out.append(self.make(
                "C002", "report",
                f"ptxas spills {st.spill_stores} bytes to local memory and reloads "
                f"{st.spill_loads} bytes (stack frame {st.stack_frame} bytes) in "
                f"`{self.kernel.name}`; role register budgets: "
                + ", ".join(f"{n} {b if b is not None else 'entry'}"
                            for n, b in budgets.items()),
                path=path, span=span, role=tight.name if tight else None,
                condition="spill stores = 0 and spill loads = 0",
                hint=(f"ptxas reports spills per kernel, not per role; the smallest budget "
                      f"(`{tight.name}`, regs={tight.regs}) is the usual suspect: raise it "
                      "by 8 or shrink that role's fragments" if tight else
                      "shrink the fragments or split the work over more warps"),
                evidence={"spill_stores": st.spill_stores, "spill_loads": st.spill_loads,
                          "stack_frame": st.stack_frame, "budgets": budgets}))
        if st.registers is not None and st.registers > self.kernel.launch_regs:
            out.append(self.make(
                "C003", "blocking",
                f"the kernel entry uses {st.registers} registers per thread but "
                f"{self.kernel.threads} threads per CTA leave {self.kernel.launch_regs}",
                condition=f"registers {st.registers} <= {self.kernel.launch_regs}",
                hint="the launch would fail with `too many resources requested`: use fewer "
                     "warps or keep __launch_bounds__ in the kernel",
                evidence={"registers": st.registers, "launch_regs": self.kernel.launch_regs}))
        return out

    def all(self) -> list[Finding]:
        out: list[Finding] = []
        for d in self.out.parsed.diagnostics:
            if d.code == SETMAXNREG_IGNORED:
                out.extend(self.setmaxnreg_ignored(d))
            else:
                out.append(self.diagnostic(d))
        if self.out.ok:
            out.extend(self.stats())
        return sorted(out, key=Finding.sort_key)


def compile_findings(out: CompileOutput, emitted: EmitResult, file: str,
                     schedule: Schedule | None = None) -> list[Finding]:
    """Findings for one compilation of `emitted` (`schedule` locates roles)."""
    return _Findings(out, emitted, file, schedule).all()
