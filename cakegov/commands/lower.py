"""The `cakegov lower` and `cakegov compile` commands: check a schedule, lower it, emit its
CUDA C++, compile it and report what ptxas says."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from cakegov.check.exits import EXIT_INCOMPLETE, EXIT_REJECTED, EXIT_USAGE
from cakegov.commands.shared import (
    RulesOpt,
    WorkloadsOpt,
    err,
    load_rulebook,
    load_wls,
    out,
    print_text,
    styled,
    usage_error,
)

if TYPE_CHECKING:
    from cakegov.check.rulebook import Rulebook


class Emit(StrEnum):
    lowered = "lowered"
    cuda = "cuda"


class LowerFormat(StrEnum):
    text = "text"
    json = "json"


class Compiler(StrEnum):
    nvrtc = "nvrtc"
    nvcc = "nvcc"


def _lowered(path: Path, rules: Path | None, workloads: Path | None, preview: bool):
    """Check `path` and lower it; print the findings and exit 1 when it is not clean."""
    from cakegov.check.render_text import render_text
    from cakegov.lower.build import prepare
    from cakegov.lower.derive import LoweringError

    book = load_rulebook(rules)
    wls = load_wls(workloads)
    if not path.is_file():
        raise usage_error(f"no such schedule file: {path}")
    try:
        prepared = prepare(path, book, wls, preview=preview)
    except LoweringError as exc:
        err.print(styled(f"error: cannot lower {path}: {exc}", style="bold red"))
        raise typer.Exit(EXIT_REJECTED) from None
    if prepared.kernel is None:
        print_text(render_text([prepared.result]))
        err.print(styled(f"error: {path} is {prepared.result.verdict}; only a clean schedule "
                       "is lowered", style="bold red"))
        raise typer.Exit(EXIT_USAGE if prepared.result.verdict == "error" else EXIT_REJECTED)
    return book, prepared


def _emit(book: Rulebook, prepared):
    from cakegov.lower.emit import EmitError, emit_cuda

    try:
        return emit_cuda(prepared.kernel, book.primitives, verifier_digest=book.digest())
    except EmitError as exc:
        err.print(styled(f"error: cannot emit CUDA for {prepared.result.file}: {exc}",
                       style="bold red"))
        raise typer.Exit(EXIT_REJECTED) from None


def lower_cmd(
    path: Annotated[Path, typer.Argument(help="Schedule file.")],
    emit: Annotated[Emit, typer.Option("--emit", help="`lowered`: the LoweredKernel; "
                    "`cuda`: the CUDA C++ translation unit.")] = Emit.lowered,
    fmt: Annotated[LowerFormat, typer.Option("--format", "-f", help="For --emit lowered: "
                   "text or the model as JSON.")] = LowerFormat.text,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write to this file "
                      "instead of standard output.")] = None,
    preview: Annotated[bool, typer.Option("--preview", help="Also run preview rules.")]
    = False,
    rules: RulesOpt = None,
    workloads: WorkloadsOpt = None,
) -> None:
    """Check a schedule, then print its lowered form or its CUDA C++. Exit 0 printed, 1 not
    clean (the findings are printed) or not lowerable, 2 usage or input error."""
    from cakegov.check.lock import atomic_write
    from cakegov.lower.text import lowered_text

    book, prepared = _lowered(path, rules, workloads, preview)
    if emit is Emit.cuda:
        text = _emit(book, prepared).source
    elif fmt is LowerFormat.json:
        text = prepared.kernel.model_dump_json(indent=2) + "\n"
    else:
        text = lowered_text(prepared.kernel)
    if output is not None:
        atomic_write(output, text)
    else:
        sys.stdout.write(text)


def compile_cmd(
    path: Annotated[Path, typer.Argument(help="Schedule file.")],
    compiler: Annotated[Compiler, typer.Option("--compiler", help="NVRTC (the default; no "
                        "CUDA toolkit needed) or nvcc.")] = Compiler.nvrtc,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the cubin "
                      "here.")] = None,
    fmt: Annotated[LowerFormat, typer.Option("--format", "-f", help="Output format.")]
    = LowerFormat.text,
    preview: Annotated[bool, typer.Option("--preview", help="Also run preview rules.")]
    = False,
    rules: RulesOpt = None,
    workloads: WorkloadsOpt = None,
) -> None:
    """Check, lower, emit and compile a schedule for its target; report ptxas findings
    (C001-C005). Exit 0 compiled, 1 not clean or a blocking compile finding, 2 usage,
    3 the compiler is not available."""
    import json

    from cakegov.check.findings import FileResult
    from cakegov.check.render_text import render_text
    from cakegov.gpu.compile import CompilerUnavailable, compile_cuda
    from cakegov.gpu.diagnose import compile_findings

    book, prepared = _lowered(path, rules, workloads, preview)
    emitted = _emit(book, prepared)
    kernel = prepared.kernel
    try:
        result = compile_cuda(emitted.source, kernel.target, compiler.value,
                              name=f"{kernel.name}.cu")
    except CompilerUnavailable as exc:
        err.print(styled(f"error: {exc}", style="bold red"))
        raise typer.Exit(EXIT_INCOMPLETE) from None
    findings = compile_findings(result, emitted, str(path), prepared.schedule)
    if output is not None and result.cubin is not None:
        output.write_bytes(result.cubin)
    st = result.parsed.stats
    blocking = any(f.severity == "blocking" for f in findings)
    if fmt is LowerFormat.json:
        report = {
            "file": str(path), "schedule": kernel.name, "sha256": kernel.schedule_sha256,
            "verifier_digest": book.digest(), "compiler": result.version, "arch": result.arch,
            "options": list(result.options), "ok": result.ok,
            "cubin": str(output) if output is not None and result.ok else None,
            "cubin_bytes": len(result.cubin) if result.cubin else 0,
            "stats": {"registers": st.registers, "launch_registers": kernel.launch_regs,
                      "spill_stores": st.spill_stores, "spill_loads": st.spill_loads,
                      "stack_frame": st.stack_frame, "barriers": st.barriers},
            "findings": [f.model_dump(mode="json") for f in findings],
        }
        sys.stdout.write(json.dumps(report, indent=2, sort_keys=True) + "\n")
    else:
        if findings:
            res = FileResult(file=str(path), schedule=kernel.name,
                             sha256=kernel.schedule_sha256, verdict="rejected" if blocking
                             else "clean", findings=tuple(findings))
            print_text(render_text([res], show_clean=False))
        if result.ok:
            where = f" -> {output}" if output is not None else ""
            out.print(f"compiled {kernel.name} for {result.arch} with {result.version}: "
                      f"{st.registers} registers/thread at entry (launch allows "
                      f"{kernel.launch_regs}), spills {st.spill_stores} B stored / "
                      f"{st.spill_loads} B loaded, {st.barriers} barrier(s), cubin "
                      f"{len(result.cubin or b'')} B{where}")
        else:
            err.print(styled(f"error: {result.compiler} failed to compile {kernel.name}",
                           style="bold red"))
    if blocking or not result.ok:
        raise typer.Exit(EXIT_REJECTED)


COMMANDS = {"lower": lower_cmd, "compile": compile_cmd}
