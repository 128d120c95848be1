"""SASS evidence: what the machine code of every valid schedule contains, read with
`cuobjdump -sass` from NVRTC's cubin (no GPU needed; skipped without NVRTC or cuobjdump).

Asserted: no local-memory spills (LDL/STL); UTMALDG where the schedule loads through
tensor maps, UTMASTG where it stores through them, UBLKCP where copies stay row-wise,
HGMMA where mma_async lowers to wgmma, SYNCS where it uses mbarriers
(cakegov/gpu/sass.py `expected_sass`)."""

from __future__ import annotations

import pytest

from cakegov.gpu.compile import compile_nvrtc, nvrtc_available
from cakegov.gpu.sass import (
    SassExpectation,
    check_sass,
    cuobjdump_path,
    disassemble,
    expected_sass,
    mnemonics,
    opcodes,
)
from cakegov.ir.parse import parse_bytes
from cakegov.lower.build import lower_checked
from cakegov.lower.emit import emit_cuda
from tests.conftest import CORPUS
from tests.tiers import corpus_params

VALID = sorted((CORPUS / "valid").rglob("*.cake"))
needs_tools = pytest.mark.skipif(
    not nvrtc_available() or cuobjdump_path() is None,
    reason="needs NVRTC and cuobjdump (pip install -e '.[nvrtc]')")

LISTING = """\
        /*01b0*/                   SYNCS.EXCH.64 URZ, [UR8+0x20000], UR4 ;   /* 0x02 */
        /*0200*/              @!P0 BRA 0x3a0 ;                                /* 0x03 */
        /*0210*/               @P1 UBLKCP.S.G [UR4], [UR6], UR8 ;             /* 0x04 */
        /*0220*/                   HMMA.16816.F32.BF16 R4, R8, R12, R4 ;      /* 0x05 */
        /*0230*/                   STL [R1], R2 ;                             /* 0x06 */
"""


def test_mnemonics_are_read_from_a_listing():
    names = mnemonics(LISTING)
    assert names == ["SYNCS.EXCH.64", "BRA", "UBLKCP.S.G", "HMMA.16816.F32.BF16", "STL"]
    assert opcodes(names)["UBLKCP"] == 1


def test_check_reports_missing_and_forbidden_opcodes():
    names = mnemonics(LISTING)
    ok = SassExpectation(present=("UBLKCP", "SYNCS"), absent=())
    assert check_sass(names, ok) == []
    bad = SassExpectation(present=("HGMMA",), why={"HGMMA": "the schedule issues wgmma"})
    assert check_sass(names, bad) == [
        "no HGMMA instruction although the schedule issues wgmma",
        "1 STL instruction(s) (local-memory spills)"]


@needs_tools
@pytest.mark.parametrize("path", corpus_params(VALID), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_valid_schedules_sass(path, rulebook, workloads, checker):
    schedule = parse_bytes(path.read_bytes(), checker.vocabulary)
    kernel = lower_checked(schedule, rulebook, workloads[schedule.workload], str(path))
    emitted = emit_cuda(kernel, rulebook.primitives, verifier_digest=rulebook.digest())
    out = compile_nvrtc(emitted.source, kernel.target, name=f"{kernel.name}.cu")
    assert out.ok, out.log
    names = mnemonics(disassemble(out.cubin))
    assert len(names) > 10 and "EXIT" in opcodes(names)
    expect = expected_sass(kernel)
    if path.name == "ws_pipeline_s4.cake":  # tensor-map loads into mbarrier'd stages
        assert set(expect.present) == {"UTMALDG", "SYNCS"}
    if path.name == "wgmma_trailing_release_s4.cake":  # and mma_async as wgmma
        assert set(expect.present) == {"UTMALDG", "HGMMA", "SYNCS"}
    if path.name == "epilogue_store_async_handoff.cake":  # and a tensor-map store
        assert set(expect.present) == {"UTMALDG", "UTMASTG", "HGMMA", "SYNCS"}
    if path.name == "labels_store_async_s2.cake":  # a 1-D label tensor stays row-wise
        assert {"UTMALDG", "UBLKCP"} <= set(expect.present)
    assert check_sass(names, expect) == []
    # the wgmma lowering never silently falls back: every mma_async is HGMMA or says why
    hgmma = opcodes(names)["HGMMA"]
    assert (hgmma > 0) == ("HGMMA" in expect.present)
