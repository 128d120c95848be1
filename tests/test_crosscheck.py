"""The corpus cross-check (cakegov/sim/crosscheck.py): every valid schedule matches its
reference on every planned run (three seeds, at least two shapes), every invalid schedule
whose defect is dynamic is reproduced by at least one strategy, and the checker and the
simulator agree everywhere else they both judge. Runs the whole corpus once (about a
minute and a half on two cores)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from cakegov.cli import app
from cakegov.sim.crosscheck import defect_class, render_markdown, summary

from .conftest import CORPUS, RULES, WORKLOADS


@pytest.fixture(scope="module")
def rows(crosscheck_rows):
    return crosscheck_rows([CORPUS / "valid", CORPUS / "invalid"])


@pytest.mark.slow
def test_every_valid_schedule_matches_and_every_dynamic_defect_is_reproduced(rows):
    s = summary(rows)
    assert s["valid"] >= 20 and s["dynamic"] >= 50
    assert s["valid_matched"] == s["valid"], [r.file for r in rows
                                              if r.defect_class == "clean" and
                                              r.agreement != "agree"]
    assert s["dynamic_reproduced"] == s["dynamic"], [
        (r.file, r.simulator, r.detail) for r in rows
        if r.defect_class == "dynamic" and r.agreement != "agree"]
    assert s["disagreements"] == []


@pytest.mark.slow
def test_valid_runs_cover_three_seeds_and_two_shapes(rows, rulebook, workloads):
    from cakegov.sim.evidence import simulate_evidence

    for row in rows:
        if row.defect_class != "clean":
            continue
        seeds = row.detail.split("seeds ")[1].split(";")[0]
        shapes = row.detail.split("shapes ")[1].split("; ")
        assert seeds == "0, 1, 2" and len(shapes) >= 2, row.detail
        # one run a seed and shape (a persistent kernel's carried shape is the fourth)
        assert row.detail.startswith(f"{3 * len(shapes)} runs") and len(shapes) <= 4, row
    path = CORPUS / "valid" / "gemm" / "ws_pipeline_tail_s4.cake"
    ev = simulate_evidence(path.read_bytes(), str(path), rulebook, workloads)
    ragged = [r["shape"] for r in ev["strategies"] if "M=257" in r["shape"]]
    assert ragged, "a shape that is not a multiple of the tiles"


def test_classes():
    assert defect_class(True, ()) == "clean"
    assert defect_class(False, ("R001",)) == "static"
    assert defect_class(False, ("P098",)) == "bound"
    assert defect_class(False, ("H005",)) == "dynamic"
    assert defect_class(False, ("P003", "H002")) == "dynamic"


@pytest.mark.slow
def test_markdown_table_lists_every_case(rows):
    text = render_markdown(rows)
    assert text.count("\n| `corpus/") == len(rows)


@pytest.mark.slow
def test_cli_json_on_a_directory():
    result = CliRunner().invoke(app, ["corpus", "crosscheck", str(CORPUS / "valid" / "scale"),
                                      "--format", "json", "--seeds", "3", "--rules",
                                      str(RULES), "--workloads", str(WORKLOADS)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["summary"]["valid_matched"] == data["summary"]["valid"] == len(
        list((CORPUS / "valid" / "scale").glob("*.cake")))


def test_jobs_give_the_same_output_as_one_process():
    """`--jobs 2` hands schedules out largest first to two processes; the rows, their
    order and every byte of the report must be what one process gives."""
    slice_ = [str(CORPUS / "valid" / "softmax"), str(CORPUS / "invalid" / "softmax")]
    common = ["corpus", "crosscheck", *slice_, "--format", "json", "--seeds", "1",
              "--rules", str(RULES), "--workloads", str(WORKLOADS), "--quiet"]
    one = CliRunner().invoke(app, [*common, "--jobs", "1"])
    two = CliRunner().invoke(app, [*common, "--jobs", "2"])
    assert one.exit_code == two.exit_code, (one.output, two.output)
    assert one.stdout == two.stdout
    rows = json.loads(one.stdout)["rows"]
    files = sorted((CORPUS / "valid" / "softmax").glob("*.cake")) + sorted(
        (CORPUS / "invalid" / "softmax").glob("*.cake"))
    assert [r["file"] for r in rows] == [str(p.relative_to(CORPUS.parent)) for p in files]
    assert {r["agreement"] for r in rows} <= {"agree", "not dynamic", "not judged"}
