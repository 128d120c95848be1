"""Renderers: rustc-style text with carets under exactly the span, JSON that validates
against docs/findings.schema.json and is byte-identical across runs, and SARIF 2.1.0 that
validates against the official OASIS schema with stable ruleIds and fingerprints."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from cakegov.check.findings import FileResult, Finding
from cakegov.check.render_json import json_schema, render_json
from cakegov.check.render_sarif import fingerprint, render_sarif
from cakegov.check.render_text import render_finding, render_text
from cakegov.check.runner import Checker
from cakegov.cli import app
from cakegov.ir.nodes import Span

from .conftest import CORPUS, ROOT, RULES, WORKLOADS
from .samples import SCALE

SCHEMA_PATH = ROOT / "docs" / "findings.schema.json"
# The official OASIS SARIF 2.1.0 schema (errata01), vendored unchanged.
SARIF_SCHEMA_PATH = ROOT / "cakegov" / "check" / "schemas" / "sarif-schema-2.1.0.json"
OVER = CORPUS / "invalid" / "gemm" / "smem_over_capacity.cake"


def cli(*args: str):
    result = CliRunner().invoke(app, [*args, "--rules", str(RULES), "--workloads",
                                      str(WORKLOADS)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result


def finding(span: Span | None, **extra) -> Finding:
    data = dict(code="R001", rule="smem-capacity", severity="blocking", authority="legality",
                message="too much", file="x.cake", path="resources.a_s", span=span)
    data.update(extra)
    return Finding(**data)


# ---- text ----------------------------------------------------------------------------------


def test_text_shows_code_location_source_and_carets():
    lines = ["first", "    a_s = lm.smem('bf16', (BM, BK), stages=8)  # note"]
    span = Span(line=2, col=11, end_line=2, end_col=18)  # `lm.smem`
    text = render_finding(finding(span, resource="a_s", condition="263,280 <= 232,448",
                                  hint="use 7 stages"), lines)
    assert text.splitlines() == [
        "error[R001]: too much",
        "  --> x.cake:2:11",
        "  |",
        "2 |     a_s = lm.smem('bf16', (BM, BK), stages=8)  # note",
        "  |           ^^^^^^^",
        "   = resource: a_s",
        "   = at: resources.a_s",
        "   = violated: 263,280 <= 232,448",
        "   = help: use 7 stages",
    ]


def test_carets_count_characters_after_non_ascii_text():
    line = "    ππ = 2; x = X.shape"
    col = line.index("X.shape") + 1
    text = render_finding(finding(Span(line=1, col=col, end_line=1, end_col=col + 7)), [line])
    source, carets = text.splitlines()[3:5]
    assert source == f"1 | {line}"
    assert carets.index("^") == source.index("X.shape")
    assert carets.count("^") == 7


def test_multi_line_span_underlines_to_the_end_of_its_first_line():
    lines = ["x = lm.smem(", "    'bf16')"]
    text = render_finding(finding(Span(line=1, col=5, end_line=2, end_col=12)), lines)
    assert text.splitlines()[4] == "  |     " + "^" * len("lm.smem(")


def test_text_levels_and_missing_source():
    lines: list[str] = []
    report = finding(Span(line=9, col=1, end_line=9, end_col=2), severity="report",
                     authority="estimate", code="P001")
    assert render_finding(report, lines).startswith("warning[P001]: ")
    hint = finding(None, severity="hint", code="P002")
    assert render_finding(hint, lines).splitlines()[:2] == ["help[P002]: too much",
                                                            "  --> x.cake"]
    internal = finding(None, authority="internal")
    assert render_finding(internal, lines).startswith("internal error[R001]: ")


def test_text_of_a_real_rejection(tmp_path: Path):
    result = cli("check", str(OVER))
    assert result.exit_code == 1
    line = next(i for i, t in enumerate(OVER.read_text().splitlines(), 1)
                if "expect: R001" in t)
    assert "error[R001]: shared memory needs " in result.output
    assert f"  --> {OVER}:{line}:5" in result.output
    source = OVER.read_text().splitlines()[line - 1]
    statement = source[: source.index("  # expect")]
    assert f"{line} | {source}" in result.output
    assert f"  | {' ' * 4}{'^' * (len(statement) - 4)}\n" in result.output
    assert "checked 1 schedule: 1 rejected" in result.output


def test_text_of_an_input_error_reads_the_file_like_python(tmp_path: Path):
    """A form feed in a comment is not a line break for the caret line either."""
    path = tmp_path / "ff.cake"
    path.write_text(SCALE.replace("    TM, TN = 32, 256\n",
                                  "    TM, TN = 32, 256  # a\x0cb\n    TX = X.shape\n"))
    result = cli("check", str(path))
    assert result.exit_code == 2
    assert f"--> {path}:6:10" in result.output
    assert "6 |     TX = X.shape\n  |          ^^^^^^^\n" in result.output


def test_text_summary_counts_verdicts(checker):
    results = [checker.check_path(p) for p in
               (OVER, CORPUS / "valid" / "scale" / "tile_1stage.cake")]
    text = render_text(results)
    assert text.endswith("checked 2 schedules: 1 clean, 1 rejected\n")
    assert "clean: " in text and "sha256 " in text


# ---- JSON ----------------------------------------------------------------------------------


def test_findings_schema_is_up_to_date():
    assert SCHEMA_PATH.read_text(encoding="utf-8") == json_schema(), (
        "docs/findings.schema.json is out of date; regenerate it with\n"
        "  python -c \"from cakegov.check.render_json import json_schema; "
        "print(json_schema(), end='')\" > docs/findings.schema.json")


@pytest.mark.slow
def test_json_validates_against_the_schema_and_is_deterministic(check_store, monkeypatch):
    """One run computes every check; the other answers from the session's shared
    results, which another Checker (often in another process) computed: the same
    bytes either way."""
    from .conftest import shared_check

    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    first = cli("check", str(CORPUS), "--format", "json")
    with monkeypatch.context() as patch:
        patch.setattr(Checker, "check_bytes",
                      lambda self, data, file: shared_check(check_store, self, data, file))
        second = cli("check", str(CORPUS), "--format", "json")
    assert first.stdout == second.stdout
    report = json.loads(first.stdout)
    jsonschema.Draft202012Validator(schema).validate(report)
    files = [r["file"] for r in report["results"]]
    assert files == sorted(files) and len(files) == len(list(CORPUS.rglob("*.cake")))
    assert any(r["verdict"] == "rejected" for r in report["results"])
    assert first.exit_code == 1


def test_json_of_input_errors_validates(tmp_path: Path):
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    (tmp_path / "bad.cake").write_text("def f(:\n")
    (tmp_path / "dir.cake").mkdir()
    (tmp_path / "dir.cake" / "inner.cake").write_bytes(b"\xff")
    result = cli("check", str(tmp_path), "--format", "json")
    assert result.exit_code == 2
    report = json.loads(result.stdout)
    jsonschema.Draft202012Validator(schema).validate(report)
    codes = [f["code"] for r in report["results"] for f in r["findings"]]
    assert codes == ["E100", "E101"]


def test_json_rejects_what_the_schema_forbids():
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    good = json.loads(render_json([FileResult(file="x.cake", verdict="error", findings=(
        finding(Span(line=1, col=1, end_line=1, end_col=2)),))], "0" * 64))
    jsonschema.Draft202012Validator(schema).validate(good)
    bad = json.loads(json.dumps(good))
    bad["results"][0]["findings"][0]["severity"] = "fatal"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(schema).validate(bad)


# ---- SARIF ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sarif_validator() -> jsonschema.Draft4Validator:
    schema = json.loads(SARIF_SCHEMA_PATH.read_text(encoding="utf-8"))
    assert schema["id"].endswith("/sarif-schema-2.1.0.json")
    jsonschema.Draft4Validator.check_schema(schema)
    return jsonschema.Draft4Validator(schema)


@pytest.mark.slow
def test_sarif_of_the_corpus_validates(sarif_validator, rulebook, monkeypatch, shared_checks):
    """The checks come from the session's shared results (the JSON test above computes
    them and compares them with a fresh run); the SARIF is rendered twice."""
    monkeypatch.chdir(ROOT)  # URIs are relative to the project that holds the files
    first = cli("check", str(CORPUS), "--format", "sarif")
    second = cli("check", str(CORPUS), "--format", "sarif")
    assert first.stdout == second.stdout
    doc = json.loads(first.stdout)
    sarif_validator.validate(doc)
    (run,) = doc["runs"]
    ids = [d["id"] for d in run["tool"]["driver"]["rules"]]
    assert ids[: len(rulebook.rules)] == [r.code for r in rulebook.rules]
    assert len(ids) == len(set(ids))
    assert run["results"]
    for result in run["results"]:
        assert ids[result["ruleIndex"]] == result["ruleId"]
        assert len(result["partialFingerprints"]["cakegovFinding/v1"]) == 64
        uri = result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        assert uri.startswith("corpus/") and " " not in uri


def test_sarif_with_input_errors_code_flows_and_odd_paths(sarif_validator, rulebook,
                                                          tmp_path: Path):
    odd = tmp_path / "with space%.cake"
    steps = [{"line": 3, "text": "loader: a_s[0].load"}, {"line": 7, "text": "math: mma"}]
    results = [
        FileResult(file=str(odd), verdict="rejected", findings=(
            finding(Span(line=3, col=5, end_line=4, end_col=2), role="loader", stage="0",
                    file=str(odd),
                    evidence={"witness": steps}),)),
        FileResult(file="relative dir/x.cake", verdict="error", findings=(
            finding(None, code="E106", rule="input", authority="input", path="source",
                    file="relative dir/x.cake"),)),
        FileResult(file="x.cake", verdict="error", findings=(
            finding(Span(line=2, col=1, end_line=2, end_col=1), code="E100", rule="input",
                    authority="input", path="source"),)),
    ]
    doc = json.loads(render_sarif(results, rulebook, root=ROOT))
    sarif_validator.validate(doc)
    first, second, third = doc["runs"][0]["results"]
    flow = first["codeFlows"][0]["threadFlows"][0]["locations"]
    assert [s["location"]["physicalLocation"]["region"]["startLine"] for s in flow] == [3, 7]
    assert first["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == \
        odd.resolve().as_uri()
    assert second["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == \
        "relative%20dir/x.cake"
    assert "region" not in second["locations"][0]["physicalLocation"]
    assert third["locations"][0]["physicalLocation"]["region"]["endColumn"] == 2
    assert all(r["level"] == "error" for r in (first, second, third))


def test_sarif_invalid_document_is_caught_by_the_schema(sarif_validator, rulebook):
    doc = json.loads(render_sarif([], rulebook))
    sarif_validator.validate(doc)
    doc["runs"][0]["results"] = [{"ruleId": "R001", "level": "fatal", "message": {"text": "x"}}]
    with pytest.raises(jsonschema.ValidationError):
        sarif_validator.validate(doc)


def _sarif_results(path: Path) -> list[dict]:
    result = cli("check", str(path), "--format", "sarif")
    return json.loads(result.stdout)["runs"][0]["results"]


def test_fingerprint_survives_moving_the_finding(tmp_path: Path):
    source = OVER.read_text()
    path = tmp_path / "moved.cake"
    path.write_text(source)
    (before,) = _sarif_results(path)
    path.write_text(source.replace("\n    BM, BN, BK", "\n\n\n    BM, BN, BK", 1))
    (after,) = _sarif_results(path)
    assert before["ruleId"] == after["ruleId"] == "R001"
    line = before["locations"][0]["physicalLocation"]["region"]["startLine"]
    assert after["locations"][0]["physicalLocation"]["region"]["startLine"] == line + 2
    assert before["partialFingerprints"] == after["partialFingerprints"]


def test_fingerprint_separates_different_findings():
    span = Span(line=1, col=1, end_line=1, end_col=2)
    base = finding(span)
    assert fingerprint(base) == fingerprint(finding(Span(line=40, col=3, end_line=40,
                                                         end_col=9)))
    assert fingerprint(base) != fingerprint(finding(span, resource="b_s"))
    assert fingerprint(base) != fingerprint(finding(span, code="R002"))
    assert fingerprint(base) != fingerprint(finding(span, file="y.cake"))


def test_a_sarif_document_that_breaks_the_schema_is_never_written():
    """The renderer validates every document against the vendored SARIF 2.1.0 schema
    before returning it, so nothing invalid reaches a file or code scanning."""
    from cakegov.check.render_sarif import sarif_problems

    good = {"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "cakegov"}},
                                          "results": []}]}
    assert sarif_problems(good) == []
    bad = {"version": "2.1.0", "runs": [{"tool": {"driver": {}}, "results": [
        {"message": {"text": "x"}, "level": "fatal"}]}]}
    problems = sarif_problems(bad)
    assert any("name" in p for p in problems) and any("level" in p for p in problems)


# ---- what every finding carries -------------------------------------------------------------


@pytest.fixture(scope="module")
def corpus_report(checker) -> dict:
    return json.loads(render_json(checker.check_paths([CORPUS]), "0" * 64))


def _findings(report: dict) -> list[dict]:
    return [f for r in report["results"] for f in r["findings"]]


def test_stage_is_an_integer_or_null():
    assert finding(None, stage="stage 3").stage == 3
    assert finding(None, stage="0").stage == 0
    assert finding(None, stage=2).stage == 2
    for bad in ("0..3", "stage", True):
        with pytest.raises(ValueError, match="integer"):
            finding(None, stage=bad)
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    stage = schema["$defs"]["Finding"]["properties"]["stage"]
    assert {t.get("type") for t in stage["anyOf"]} == {"integer", "null"}


def test_stage_zero_is_shown_and_fingerprinted():
    span = Span(line=1, col=1, end_line=1, end_col=2)
    assert "stage: 0" in render_finding(finding(span, stage=0), [])
    assert fingerprint(finding(span, stage=0)) != fingerprint(finding(span))


@pytest.mark.slow
def test_corpus_stages_are_integers(corpus_report):
    stages = [f["stage"] for f in _findings(corpus_report)]
    assert all(s is None or (isinstance(s, int) and s >= 0) for s in stages)
    assert any(isinstance(s, int) for s in stages)


@pytest.mark.slow
def test_the_witness_is_stored_once(corpus_report):
    """The steps live in `evidence.witness` and nowhere else in the finding."""
    seen = 0
    for f in _findings(corpus_report):
        steps = f["evidence"].get("witness")
        if not steps:
            continue
        seen += 1
        rest = {k: v for k, v in f.items() if k != "evidence"}
        rest["evidence"] = {k: v for k, v in f["evidence"].items() if k != "witness"}
        text = json.dumps(rest)
        assert not [s["text"] for s in steps[:-1] if s["text"] in text], f["code"]
    assert seen >= 40


@pytest.mark.slow
def test_every_finding_links_the_documentation_of_its_rule(corpus_report, rulebook):
    from cakegov.check.docs_url import DEFAULT_DOC_BASE, anchor, rule_url

    headings = {anchor(line[3:]) for line in (ROOT / "docs" / "rules.md").read_text(
        encoding="utf-8").splitlines() if line.startswith("## ")}
    findings = _findings(corpus_report)
    for f in findings:
        url = f["doc_url"]
        assert url.startswith(DEFAULT_DOC_BASE), url
        page, _, fragment = url[len(DEFAULT_DOC_BASE):].partition("#")
        if f["rule"] == "input":
            assert (page, fragment) == ("language.md", "errors")
        else:
            assert page == "rules.md" and fragment in headings, url
    assert len(findings) >= 80
    doc = json.loads(render_sarif([], rulebook))
    for d in doc["runs"][0]["tool"]["driver"]["rules"]:
        assert d["helpUri"] == rule_url(d["id"], "input" if d["name"] == "InputError"
                                        else next(r.name for r in rulebook.rules
                                                  if r.code == d["id"]))
    assert "\n## Errors\n" in (ROOT / "docs" / "language.md").read_text(encoding="utf-8")


def test_the_doc_base_is_the_projects_documentation_url(monkeypatch):
    import tomllib

    from cakegov.check.docs_url import DEFAULT_DOC_BASE, ENV, rule_url

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["project"]["urls"]["Documentation"] == DEFAULT_DOC_BASE
    monkeypatch.setenv(ENV, "https://example.org/cakegov/docs")
    assert rule_url("P005", "initial-parity") == \
        "https://example.org/cakegov/docs/rules.md#p005-initial-parity"
    monkeypatch.setenv(ENV, "docs/")  # SARIF's helpUri must be an absolute URI
    with pytest.raises(ValueError, match="absolute"):
        rule_url("P005", "initial-parity")


def test_a_very_long_source_line_is_shown_as_a_window_with_the_caret_on_the_span(tmp_path):
    """A 100,000-level nested expression: the snippet shows 160 characters around the
    span, marked as cut, with the caret still under the reported column."""
    from typer.testing import CliRunner

    from cakegov.cli import app

    path = tmp_path / "deep.cake"
    path.write_text('@cake.schedule(target="sm_90a", workload="scale")\ndef k(lm, X, Y):\n'
                    "    x = " + "(" * 100_000 + "1" + ")" * 100_000 + "\n")
    result = CliRunner().invoke(app, ["check", "--no-cache", str(path)])
    assert result.exit_code == 2, result.output[:500]
    lines = result.output.splitlines()
    snippet = next(ln for ln in lines if ln.startswith("3 | "))
    assert len(snippet) < 200 and snippet.endswith("...")
    caret = lines[lines.index(snippet) + 1]
    column = int(next(ln for ln in lines if "-->" in ln).rsplit(":", 1)[1])
    text = path.read_text().splitlines()[2]
    shown = snippet[4:]
    start = column - 1 - (caret.index("^") - 4) + (3 if shown.startswith("...") else 0)
    assert text[start:start + 20] == shown[(3 if shown.startswith("...") else 0):][:20]
    assert len(result.output) < 5000
