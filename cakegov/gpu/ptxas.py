"""The report of `ptxas -v` and of the CUDA front end, parsed into data.

NVRTC and nvcc print the same ptxas lines (nvcc drops the `ptxas .` prefix of the
stack-frame line); front-end diagnostics look like `kernel.cu(12): error: ...`. Samples
captured from NVRTC 13.5 and nvcc 13.0 are in tests/test_compile.py."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Diagnostic:
    """One error or warning from the front end or from ptxas."""

    severity: str  # "error" or "warning"
    message: str
    source: str  # "frontend" or "ptxas"
    line: int | None = None  # line in the CUDA file (front-end diagnostics)
    code: str | None = None  # e.g. "C7508" or "177-D"


@dataclass(frozen=True)
class PtxasStats:
    """What ptxas -v reports for the kernel entry."""

    function: str | None = None
    registers: int | None = None
    barriers: int = 0
    stack_frame: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    smem: int = 0  # static shared memory (the kernel uses dynamic shared memory only)
    cmem: tuple[int, ...] = ()


@dataclass(frozen=True)
class CompileLog:
    """The parsed compiler output."""

    stats: PtxasStats
    diagnostics: tuple[Diagnostic, ...] = ()

    @property
    def errors(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.severity == "error")


_FRONTEND = re.compile(r"^(?P<file>[^\s()]+)\((?P<line>\d+)\): (?P<sev>error|warning)"
                       r"(?: #(?P<code>[\w-]+))?: (?P<msg>.*)$")
_PTXAS_DIAG = re.compile(r"^ptxas(?: [^:]*?)?\s*(?P<sev>error|warning|fatal)\s*: (?P<msg>.*)$")
_PTXAS_CODE = re.compile(r"\((?P<code>C\d{4})\)")
_ENTRY = re.compile(r"(?:Compiling entry function|Function properties for) '?(?P<name>[\w$]+)'?")
_USED = re.compile(r"Used (?P<regs>\d+) registers(?:, used (?P<bars>\d+) barriers)?"
                   r"(?:, (?P<smem>\d+) bytes smem)?")
_CMEM = re.compile(r"(?P<bytes>\d+) bytes cmem\[\d+\]")
_SPILL = re.compile(r"(?P<stack>\d+) bytes stack frame, (?P<st>\d+) bytes spill stores, "
                    r"(?P<ld>\d+) bytes spill loads")


def parse_log(log: str) -> CompileLog:
    """Parse NVRTC or nvcc output (front-end diagnostics and `ptxas -v` lines)."""
    stats: dict[str, object] = {}
    diags: list[Diagnostic] = []
    for raw in log.splitlines():
        line = raw.strip()
        m = _FRONTEND.match(line)
        if m:
            diags.append(Diagnostic(m["sev"], m["msg"].strip(), "frontend", int(m["line"]),
                                    m["code"]))
            continue
        if line.startswith("ptxas"):
            code = _PTXAS_CODE.search(line)
            d = _PTXAS_DIAG.match(line)
            if d:
                sev = "error" if d["sev"] in ("error", "fatal") else "warning"
                diags.append(Diagnostic(sev, d["msg"].strip(), "ptxas",
                                        code=code["code"] if code else None))
                continue
            if code:  # e.g. `ptxas info : (C7508) Potential Performance Loss: ...`
                msg = line.split(":", 1)[1].strip() if ":" in line else line
                diags.append(Diagnostic("warning", msg, "ptxas", code=code["code"]))
                continue
        m = _ENTRY.search(line)
        if m and "function" not in stats:
            stats["function"] = m["name"]
        m = _USED.search(line)
        if m:
            stats["registers"] = int(m["regs"])
            stats["barriers"] = int(m["bars"] or 0)
            stats["smem"] = int(m["smem"] or 0)
            stats["cmem"] = tuple(int(c["bytes"]) for c in _CMEM.finditer(line))
        m = _SPILL.search(line)
        if m:
            stats["stack_frame"] = int(m["stack"])
            stats["spill_stores"] = int(m["st"])
            stats["spill_loads"] = int(m["ld"])
    return CompileLog(PtxasStats(**stats), tuple(diags))  # type: ignore[arg-type]
