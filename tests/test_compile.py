"""Compilation: every valid corpus schedule compiles for sm_90a with NVRTC (in CI too),
and the compiler's report becomes findings mapped back to the schedule.

The sample logs below were captured from NVRTC 13.5 (cuda-bindings wheel) and nvcc 13.0
compiling kernels emitted by cakegov."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cakegov.cli import app
from cakegov.gpu.compile import (
    CompileOutput,
    CompilerUnavailable,
    compile_cuda,
    compile_nvcc,
    compile_nvrtc,
    nvrtc_available,
)
from cakegov.gpu.diagnose import compile_findings
from cakegov.gpu.ptxas import parse_log
from cakegov.ir.parse import parse_bytes
from cakegov.lower.build import lower_checked
from cakegov.lower.emit import emit_cuda
from tests.conftest import CORPUS, ROOT
from tests.tiers import corpus_params

VALID = sorted((CORPUS / "valid").rglob("*.cake"))
WS = CORPUS / "valid/gemm/ws_pipeline_s4.cake"

needs_nvrtc = pytest.mark.skipif(not nvrtc_available(), reason="cuda-bindings (NVRTC) is "
                                 "not installed: pip install -e '.[nvrtc]'")

NVRTC_OK = """\
ptxas info    : 48 bytes gmem
ptxas info    : Compiling entry function 'gemm_ws_s4' for 'sm_90a'
ptxas info    : Function properties for gemm_ws_s4
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 168 registers, used 2 barriers
ptxas info    : Compile time = 109.517 ms
"""

NVRTC_SPILL = """\
ptxas info    : 48 bytes gmem
ptxas info    : Compiling entry function 'gemm_ws_s4' for 'sm_90a'
ptxas info    : Function properties for gemm_ws_s4
ptxas         .     16 bytes stack frame, 12 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 168 registers, used 1 barriers, 16 bytes cumulative stack size
ptxas info    : Compile time = 109.517 ms
"""

# __launch_bounds__(384) without the minimum-blocks argument
NVRTC_C7508 = """\
ptxas info    : (C7508) Potential Performance Loss: 'setmaxnreg' ignored; unable to \
determine register count at entry.
ptxas info    : 48 bytes gmem
ptxas info    : Compiling entry function 'gemm_ws_s4' for 'sm_90a'
ptxas info    : Function properties for gemm_ws_s4
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 96 registers, used 1 barriers
ptxas info    : Compile time = 118.793 ms
"""

NVCC_OK = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'gemm_ws_s4' for 'sm_90a'
ptxas info    : Function properties for gemm_ws_s4
    16 bytes stack frame, 12 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 168 registers, used 1 barriers, 16 bytes cumulative stack size
ptxas info    : Compile time = 168.809 ms
"""

# nvcc -arch=sm_90 (not sm_90a)
NVCC_PTXAS_ERROR = """\
ptxas /tmp/tmpxft_00000b5b_00000000-6_gemm_ws_s4.ptx, line 167; error   : Instruction \
'setmaxnreg.dec' not supported on .target 'sm_90'
ptxas /tmp/tmpxft_00000b5b_00000000-6_gemm_ws_s4.ptx, line 835; error   : Instruction \
'setmaxnreg.inc' not supported on .target 'sm_90'
ptxas fatal   : Ptx assembly aborted due to errors
"""

FRONTEND = """\
kernel.cu({line}): error: identifier "undefined_thing" is undefined
  extern "C" __global__ void k(int* x){{ undefined_thing(); int y; }}
                                        ^

kernel.cu({line}): warning #177-D: variable "y" was declared but never referenced
  extern "C" __global__ void k(int* x){{ undefined_thing(); int y; }}
                                                               ^

Remark: The warnings can be suppressed with "-diag-suppress <warning-number>"

1 error detected in the compilation of "kernel.cu".
"""


# ---- parsing ---------------------------------------------------------------------------

def test_parse_success():
    log = parse_log(NVRTC_OK)
    st = log.stats
    assert (st.function, st.registers, st.barriers, st.spill_stores, st.spill_loads,
            st.stack_frame) == ("gemm_ws_s4", 168, 2, 0, 0, 0)
    assert log.diagnostics == ()


def test_parse_spills_from_nvrtc_and_nvcc():
    for text in (NVRTC_SPILL, NVCC_OK):
        st = parse_log(text).stats
        assert (st.stack_frame, st.spill_stores, st.spill_loads, st.registers) == (
            16, 12, 12, 168)


def test_parse_ignored_setmaxnreg():
    log = parse_log(NVRTC_C7508)
    [d] = log.diagnostics
    assert (d.severity, d.source, d.code) == ("warning", "ptxas", "C7508")
    assert "'setmaxnreg' ignored" in d.message
    assert log.stats.registers == 96


def test_parse_ptxas_errors():
    log = parse_log(NVCC_PTXAS_ERROR)
    assert [d.severity for d in log.diagnostics] == ["error", "error", "error"]
    assert log.diagnostics[0].message == ("Instruction 'setmaxnreg.dec' not supported on "
                                          ".target 'sm_90'")
    assert log.diagnostics[2].message == "Ptx assembly aborted due to errors"


def test_parse_frontend_diagnostics():
    log = parse_log(FRONTEND.format(line=12))
    error, warning = log.diagnostics
    assert (error.severity, error.line, error.source) == ("error", 12, "frontend")
    assert error.message == 'identifier "undefined_thing" is undefined'
    assert (warning.severity, warning.code, warning.line) == ("warning", "177-D", 12)
    assert log.errors == (error,)


# ---- findings --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ws(rulebook, workloads, checker):
    schedule = parse_bytes(WS.read_bytes(), checker.vocabulary)
    kernel = lower_checked(schedule, rulebook, workloads["gemm"], str(WS))
    return schedule, emit_cuda(kernel, rulebook.primitives, verifier_digest=rulebook.digest())


def fake(log: str, ok: bool = True) -> CompileOutput:
    return CompileOutput("nvrtc", "sm_90a", (), b"\x7fELF" if ok else None, log,
                         parse_log(log), "NVRTC 13.5")


def test_clean_compile_has_no_findings(ws):
    schedule, emitted = ws
    assert compile_findings(fake(NVRTC_OK), emitted, str(WS), schedule) == []


def test_spill_points_at_the_tightest_role(ws):
    schedule, emitted = ws
    [f] = compile_findings(fake(NVRTC_SPILL), emitted, str(WS), schedule)
    assert (f.code, f.rule, f.severity, f.role, f.path) == (
        "C002", "register-spill", "report", "loader", "roles.loader")
    assert f.span == schedule.role("loader").span
    assert "spills 12 bytes" in f.message and "loader 40, math 232" in f.message
    assert f.evidence["spill_stores"] == 12


def test_ignored_setmaxnreg_names_every_budgeted_role(ws):
    schedule, emitted = ws
    found = compile_findings(fake(NVRTC_C7508), emitted, str(WS), schedule)
    assert [(f.code, f.role) for f in found] == [("C004", "loader"), ("C004", "math")]
    assert "role `math` runs with the entry budget of 168 registers instead of 232" in \
        found[1].message


def test_frontend_error_maps_to_the_statement(ws):
    schedule, emitted = ws
    lines = emitted.source.splitlines()
    line = next(i for i, text in enumerate(lines, 1) if "cg::mma<true>(" in text) + 1
    found = compile_findings(fake(FRONTEND.format(line=line), ok=False), emitted, str(WS),
                             schedule)
    error = next(f for f in found if f.code == "C001")
    assert (error.severity, error.path, error.role, error.span.line) == (
        "blocking", "roles.math.body[0].body[1]", "math", 22)
    warning = next(f for f in found if f.code == "C005")
    assert warning.severity == "report"


def test_registers_over_the_launch(ws):
    schedule, emitted = ws
    log = NVRTC_OK.replace("Used 168 registers", "Used 200 registers")
    [f] = compile_findings(fake(log), emitted, str(WS), schedule)
    assert (f.code, f.severity) == ("C003", "blocking")
    assert f.condition == "registers 200 <= 168"


# ---- real compilation ------------------------------------------------------------------

@needs_nvrtc
@pytest.mark.parametrize("path", corpus_params(VALID), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_valid_schedule_compiles_for_sm90a(path, rulebook, workloads, checker):
    schedule = parse_bytes(path.read_bytes(), checker.vocabulary)
    kernel = lower_checked(schedule, rulebook, workloads[schedule.workload], str(path))
    emitted = emit_cuda(kernel, rulebook.primitives, verifier_digest=rulebook.digest())
    out = compile_nvrtc(emitted.source, kernel.target, name=f"{kernel.name}.cu")
    assert out.ok, out.log
    assert out.cubin[:4] == b"\x7fELF"
    assert out.parsed.stats.function == kernel.name
    assert out.parsed.stats.registers <= kernel.launch_regs
    findings = compile_findings(out, emitted, str(path), schedule)
    assert [f for f in findings if f.severity == "blocking"] == [], out.log
    assert not [f for f in findings if f.code == "C004"]  # setmaxnreg is honoured
    assert not [f for f in findings if f.code == "C005"], out.log  # no compiler warnings


@needs_nvrtc
def test_compile_is_deterministic(ws):
    _, emitted = ws
    one, two = compile_nvrtc(emitted.source), compile_nvrtc(emitted.source)
    assert one.cubin == two.cubin


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_nvcc_compiles_with_gencode(ws):
    _, emitted = ws
    out = compile_nvcc(emitted.source)
    assert out.ok, out.log
    assert "arch=compute_90a,code=sm_90a" in out.options
    assert out.version.startswith("nvcc 1")
    assert out.parsed.stats.function == "gemm_ws_s4"


def test_unknown_compiler_and_target():
    with pytest.raises(CompilerUnavailable, match="unknown compiler"):
        compile_cuda("", compiler="clang")
    with pytest.raises(CompilerUnavailable, match="no GPU architecture for target sm_80"):
        compile_nvcc("", target="sm_80", nvcc="/bin/false")


def test_nvcc_missing(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(CompilerUnavailable, match="nvcc is not on PATH"):
        compile_nvcc("")


# ---- the command ---------------------------------------------------------------------

@needs_nvrtc
def test_cli_compile(tmp_path: Path):
    out = tmp_path / "ws.cubin"
    result = CliRunner().invoke(app, ["compile", str(WS), "-o", str(out), "--rules",
                                      str(ROOT / "rules"), "--workloads",
                                      str(CORPUS / "workloads")])
    assert result.exit_code == 0, result.output
    assert "compiled gemm_ws_s4 for sm_90a with NVRTC" in result.output
    assert "168 registers/thread at entry (launch allows 168)" in result.output
    assert out.read_bytes()[:4] == b"\x7fELF"


def test_cli_compile_refuses_a_rejected_schedule():
    path = CORPUS / "invalid/gemm/smem_over_capacity.cake"
    result = CliRunner().invoke(app, ["compile", str(path), "--rules", str(ROOT / "rules"),
                                      "--workloads", str(CORPUS / "workloads")])
    assert result.exit_code == 1
    assert "error[R001]" in result.output


# ---- primitives and operand combinations the corpus does not use --------------------

SINK = '''"""Every compute primitive, fragment and shared-memory operands mixed."""
# expect: clean
@cake.schedule(target="sm_90a", workload="kmeans_assign", sizes={"K": 16, "D": 64})
def sink(lm, X, C, labels):
    lm.launch(grid=(lm.cdiv(lm.N, 64),), warps=8)
    x_s = lm.smem("f32", (64, 64))
    c_s = lm.smem("f32", (16, 64))
    y_s = lm.smem("f32", (64, 16))
    l_s = lm.smem("i32", (64,))
    bar = lm.mbarrier(count=1)
    done = lm.named_barrier(id=2, threads=256)
    w = lm.role(warps=range(0, 4))
    v = lm.role(warps=range(4, 8))
    dist = lm.fragment("f32", (64, 16), role=w)
    dist2 = lm.fragment("f32", (64, 16), role=w)
    top = lm.fragment("i32", (64, 2), role=w)
    lab = lm.fragment("i32", (64,), role=w)
    s = lm.fragment("f32", (64,), role=w)
    z = lm.fragment("f32", (64, 16), role=v)
    r0 = lm.block(0) * 64
    with w:
        bar[0].arrive_expect_tx(bytes=lm.nbytes(x_s, c_s))
        x_s[0].load(X, at=(r0, 0), barrier=bar[0], pad=True)
        c_s[0].load(C, at=(0, 0), barrier=bar[0])
        bar[0].wait(parity=0)
        lm.sqdist(dist, x_s[0], c_s)
        lm.topk(top, dist, k=2)
        lm.topk(top, x_s[0], k=2, largest=True)
        lm.reduce(lab, dist, op="argmin", axis=1)
        lm.reduce(lab, x_s[0], op="argmax", axis=1)
        lm.reduce(s, x_s[0], op="sum", axis=1)
        lm.reduce(s, dist, op="max", axis=1)
        lm.reduce(s, dist, op="min", axis=1)
        lm.elementwise(dist2, dist, op="exp")
        lm.elementwise(y_s[0], dist2, op="add", alpha=-1.5)
        lm.elementwise(x_s[0], x_s[0], op="relu")
        lm.elementwise(l_s[0], lab, op="copy")
        lm.syncwarp()
        lm.fence_proxy()
        done.arrive()
    with v:
        done.sync()
        lm.fill(z, 0.0)
        lm.elementwise(z, y_s[0], op="cast")
        lm.fill(y_s[0], 1e-3)
        lm.store(labels, at=(r0,), src=l_s[0], mask=True)
'''

MMA16 = '''"""f16 mma.sync with a (K, N) right operand."""
# expect: clean
@cake.schedule(target="sm_90a", workload="gemm")
def mma16(lm, A, B, C):
    lm.launch(grid=(lm.cdiv(lm.M, 64), lm.cdiv(lm.N, 64)), warps=4)
    a_s = lm.smem("f16", (64, 32))
    b_s = lm.smem("f16", (32, 64))
    w = lm.role(warps=range(0, 4))
    acc = lm.fragment("f32", (64, 64), role=w)
    with w:
        lm.fill(a_s[0], 1.0)
        lm.fill(b_s[0], 0.5)
        lm.syncwarp()
        lm.mma(acc, a_s[0], b_s[0], init=True)
        lm.mma(acc, a_s[0], b_s[0])
        lm.store(C, at=(lm.block(0) * 64, lm.block(1) * 64), src=acc, mask=True)
'''


@needs_nvrtc
@pytest.mark.parametrize("source", [SINK, MMA16], ids=["sink", "mma16"])
def test_other_primitives_compile_without_warnings(source, rulebook, workloads, checker):
    schedule = parse_bytes(source.encode(), checker.vocabulary)
    assert schedule.unresolved == ()
    kernel = lower_checked(schedule, rulebook, workloads[schedule.workload])
    emitted = emit_cuda(kernel, rulebook.primitives, verifier_digest=rulebook.digest())
    out = compile_nvrtc(emitted.source)
    assert out.ok, out.log
    assert compile_findings(out, emitted, "<test>", schedule) == [], out.log
    if schedule.name == "sink":
        for call in ("cg::topk<2, true>(", "cg::reduce<cg::red_sum, 1>(", "cg::fill(",
                     "cg::sqdist(", "cg::named_arrive<2, 256>();", "cg::named_sync<2, 256>();"):
            assert call in emitted.source
        # the fragment an elementwise op links to a reduction source shares its layout
        assert kernel.fragment("dist2").layout.kind == "rows"
    else:
        assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in emitted.source
