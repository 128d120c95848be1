"""The symmetric-role scale schedules of benchmarks/scale/ (issue 45's benchmark): each one
checks to the verdict its `# expect:` line labels, and the benchmark's scale section
measures them against the corpus GEMM it names (its figures are ratios, never asserted)."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCALE = sorted((ROOT / "benchmarks" / "scale").glob("*.cake"))


def test_there_are_scale_schedules():
    assert len(SCALE) >= 3


@pytest.mark.parametrize("path", SCALE, ids=lambda p: p.name)
def test_scale_schedule_has_its_labelled_verdict(checker, path):
    label = re.search(r"^# expect: (\w+)", path.read_text(encoding="utf-8"), re.M)
    assert label is not None, f"{path.name} has no `# expect:` line"
    result = checker.check_bytes(path.read_bytes(), path.name)
    assert result.verdict == label.group(1), [f.message for f in result.findings]


def test_scale_section_reports_every_schedule_beside_the_reference(capsys):
    spec = importlib.util.spec_from_file_location("bench_check",
                                                  ROOT / "benchmarks" / "bench_check.py")
    bench = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_check", bench)  # dataclasses look their module up
    spec.loader.exec_module(bench)
    out = bench.scale_report(rounds=1, cold_rounds=0)
    rows = {r["file"]: r for r in out["rows"]}
    ref = rows[out["reference"]]
    assert ref["units_ratio"] == 1.0 and ref["warm_ratio"] == 1.0
    assert {f"benchmarks/scale/{p.name}" for p in SCALE} <= set(rows)
    assert "protocol_timing S=8 C=3 T=256 P=8" in rows  # the scaling point
    for row in rows.values():
        assert row["verdict"] == "clean" and row["units"] > 0
        assert row["units_ratio"] == row["units"] / ref["units"]
    printed = capsys.readouterr().out
    assert "worst warm ratio" in printed
