"""Compile emitted CUDA C++ to a cubin and turn the compiler's report into findings.

Default: NVRTC through `cuda.bindings.nvrtc` (the `cuda-bindings` and
`nvidia-cuda-nvrtc` wheels), which produces an sm_90a cubin on a machine without a GPU or
CUDA toolkit. Alternative: `nvcc -cubin -gencode arch=compute_90a,code=sm_90a` when nvcc is
on PATH (plain `-arch=sm_90` rejects `setmaxnreg`). Both run ptxas with `-v`; its report
(registers, spills, barriers, warnings, errors) is parsed by `parse_log` and mapped back to
the schedule by `compile_findings` (codes C001-C005, docs/lowering.md)."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from cakegov.gpu.ptxas import CompileLog, PtxasStats, parse_log

ARCHES = {"sm_90a": ("sm_90a", "compute_90a")}
COMPILERS = ("nvrtc", "nvcc")
STD = "c++17"


class CompilerUnavailable(Exception):
    """The requested compiler is not installed (or the target has no architecture)."""


@dataclass(frozen=True)
class CompileOutput:
    """A compilation: the cubin (None when it failed), the raw log and its parse."""

    compiler: str
    arch: str
    options: tuple[str, ...]
    cubin: bytes | None
    log: str
    parsed: CompileLog = field(default_factory=lambda: CompileLog(PtxasStats()))
    version: str = ""

    @property
    def ok(self) -> bool:
        return self.cubin is not None


# ---- compilers ----------------------------------------------------------------------

def _arch(target: str) -> tuple[str, str]:
    if target not in ARCHES:
        raise CompilerUnavailable(f"no GPU architecture for target {target} (have: "
                                  f"{', '.join(sorted(ARCHES))})")
    return ARCHES[target]


def nvrtc_available() -> bool:
    try:
        from cuda.bindings import nvrtc  # noqa: F401
    except ImportError:
        return False
    return True


def nvcc_path() -> str | None:
    return shutil.which("nvcc")


def _check(result: tuple, what: str) -> tuple:
    from cuda.bindings import nvrtc

    if result[0] != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise RuntimeError(f"NVRTC {what} failed: {result[0]}")
    return result[1:]


def compile_nvrtc(source: str, target: str = "sm_90a", name: str = "kernel.cu",
                  extra: tuple[str, ...] = ()) -> CompileOutput:
    """Compile with NVRTC to a cubin for `target`."""
    if not nvrtc_available():
        raise CompilerUnavailable("NVRTC is not installed: pip install -e '.[nvrtc]' "
                                  "(cuda-bindings and nvidia-cuda-nvrtc, CUDA 13)")
    from cuda.bindings import nvrtc

    arch, _ = _arch(target)
    # The primitive templates pass lambdas without execution-space annotations; NVRTC 13.0
    # (and 12.x) treat those as host functions, which JIT mode refuses, unless unannotated
    # functions default to __device__ (NVRTC documentation, "Supported Compile Options":
    # --device-as-default-execution-space). Newer NVRTC accept them either way.
    options = (f"--gpu-architecture={arch}", f"-std={STD}", "--ptxas-options=-v",
               "--device-as-default-execution-space", *extra)
    (prog,) = _check(nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], []),
                     "program creation")
    try:
        (status,) = nvrtc.nvrtcCompileProgram(prog, len(options),
                                              [o.encode() for o in options])
        (size,) = _check(nvrtc.nvrtcGetProgramLogSize(prog), "log size")
        buf = b" " * size
        _check(nvrtc.nvrtcGetProgramLog(prog, buf), "log")
        log = buf.rstrip(b"\x00 ").decode(errors="replace")
        cubin = None
        if status == nvrtc.nvrtcResult.NVRTC_SUCCESS:
            (size,) = _check(nvrtc.nvrtcGetCUBINSize(prog), "cubin size")
            data = b" " * size
            _check(nvrtc.nvrtcGetCUBIN(prog, data), "cubin")
            cubin = bytes(data)
        major, minor = _check(nvrtc.nvrtcVersion(), "version")
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    return CompileOutput("nvrtc", arch, options, cubin, log, parse_log(log),
                         f"NVRTC {major}.{minor}")


def compile_nvcc(source: str, target: str = "sm_90a", name: str = "kernel.cu",
                 extra: tuple[str, ...] = (), nvcc: str | None = None,
                 timeout: float = 300.0) -> CompileOutput:
    """Compile with nvcc (`-gencode arch=compute_90a,code=sm_90a`) to a cubin."""
    nvcc = nvcc or nvcc_path()
    if nvcc is None:
        raise CompilerUnavailable("nvcc is not on PATH; use --compiler nvrtc")
    arch, virtual = _arch(target)
    options = ("-cubin", "-gencode", f"arch={virtual},code={arch}", f"-std={STD}",
               "-Xptxas", "-v", *extra)
    with tempfile.TemporaryDirectory(prefix="cakegov-nvcc-") as tmp:
        src = Path(tmp) / name
        out = src.with_suffix(".cubin")
        src.write_text(source, encoding="utf-8")
        proc = subprocess.run([nvcc, *options, "-o", str(out), str(src)], cwd=tmp,
                              capture_output=True, text=True, timeout=timeout, check=False)
        log = (proc.stdout + proc.stderr).replace(str(src), name)
        cubin = out.read_bytes() if proc.returncode == 0 and out.exists() else None
        banner = subprocess.run([nvcc, "--version"], capture_output=True, text=True,
                                check=False).stdout
    found = re.search(r"release [\d.]+, V(?P<v>[\d.]+)", banner)
    return CompileOutput("nvcc", arch, options, cubin, log, parse_log(log),
                         f"nvcc {found['v']}" if found else "nvcc")


def compile_cuda(source: str, target: str = "sm_90a", compiler: str = "nvrtc",
                 name: str = "kernel.cu") -> CompileOutput:
    """Compile `source` with the named compiler (`nvrtc` or `nvcc`)."""
    if compiler == "nvrtc":
        return compile_nvrtc(source, target, name)
    if compiler == "nvcc":
        return compile_nvcc(source, target, name)
    raise CompilerUnavailable(f"unknown compiler {compiler!r} (choose from "
                              f"{', '.join(COMPILERS)})")
