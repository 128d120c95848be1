"""Machine-applicable fixes: edits apply like a reference implementation, every corpus
`machine` fix removes its finding and brings none, `cakegov check --fix` applies them in
place and reports what remains, and fixes reach text, JSON and SARIF in the schedule's
own names."""

from __future__ import annotations

import json
import stat
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from cakegov.check.findings import FileResult, Finding
from cakegov.check.fix import identity, plan_file
from cakegov.check.render_sarif import render_sarif
from cakegov.check.render_text import edit_text, render_finding
from cakegov.check.repair import Edit, EditConflict, Fix, apply_edits, line_starts
from cakegov.cli import app
from cakegov.ir.nodes import Span

from .conftest import CORPUS, RULES, WORKLOADS
from .profiles import examples

SCHEDULES = sorted(CORPUS.rglob("*.cake"))
PARITY = CORPUS / "invalid" / "gemm" / "consumer_parity_inverted.cake"
MISSING = CORPUS / "invalid" / "gemm" / "acquire_missing.cake"
VALID = CORPUS / "valid" / "scale" / "tile_1stage.cake"


# ---- applying edits ------------------------------------------------------------------------


def reference_apply(source: str, edits: list[tuple[int, int, str]]) -> str:
    """Walk the text once: at each position, the insertions there in the order given,
    then a replacement starting there (skipping what it replaces), else the character."""
    out, i = [], 0
    while True:
        out += [t for a, b, t in edits if a == b == i]
        repl = [(b, t) for a, b, t in edits if a == i and b > a]
        if repl:
            out.append(repl[0][1])
            i = repl[0][0]
            continue
        if i >= len(source):
            return "".join(out)
        out.append(source[i])
        i += 1


def position(source: str, offset: int) -> tuple[int, int]:
    """The 1-based (line, col) of a character offset, lines as Python counts them."""
    starts = line_starts(source)
    line = max(n for n, s in enumerate(starts[:-1] or [0], 1) if s <= offset) \
        if source else 1
    return line, offset - starts[line - 1] + 1


texts = st.lists(st.sampled_from([*"ab (%)\n", "\r\n", "\r", "\x0c", "é"]),
                 max_size=30).map("".join)


@st.composite
def source_and_edits(draw):
    source = draw(texts)
    n = len(source)
    cuts = sorted(draw(st.lists(st.integers(0, n), max_size=8)))
    edits, last = [], 0
    for a in cuts:  # disjoint ranges in order, some empty (insertions)
        if a < last:
            continue
        b = draw(st.integers(a, min(n, a + 5)))
        if b > a and any(x == a and y > x for x, y, _ in edits):
            continue
        edits.append((a, b, draw(st.text(alphabet="xyz\n", max_size=4))))
        last = max(b, a)
    order = draw(st.permutations(range(len(edits))))
    return source, [edits[i] for i in order]  # any order: insertions at a point go as listed


def as_edits(source: str, edits: list[tuple[int, int, str]]) -> list[Edit]:
    out = []
    for a, b, text in edits:
        (l1, c1), (l2, c2) = position(source, a), position(source, b)
        out.append(Edit(span=Span(line=l1, col=c1, end_line=l2, end_col=c2), text=text))
    return out


@settings(max_examples=examples(300), deadline=None)
@given(source_and_edits())
def test_edits_apply_like_the_reference(case):
    source, edits = case
    assert apply_edits(source, as_edits(source, edits)) == reference_apply(source, edits)


@settings(max_examples=examples(200), deadline=None)
@given(st.text(alphabet="ab\n", min_size=2, max_size=30), st.data())
def test_overlapping_edits_are_refused(source, data):
    n = len(source)
    a = data.draw(st.integers(0, n - 1))
    b = data.draw(st.integers(a + 1, n))
    c = data.draw(st.integers(a, b - 1))  # starts inside [a, b)
    d = data.draw(st.integers(c + (1 if c == a else 0), n))
    with pytest.raises(EditConflict):
        apply_edits(source, as_edits(source, [(a, b, "x"), (c, d, "y")]))


def test_a_form_feed_is_not_a_line_break_for_edits():
    source = "a = 1  # x\x0cy\nb = 2\n"
    edit = Edit(span=Span(line=2, col=5, end_line=2, end_col=6), text="3")
    assert apply_edits(source, [edit]) == "a = 1  # x\x0cy\nb = 3\n"


# ---- the corpus: every machine fix -------------------------------------------------------


@pytest.fixture(scope="module")
def corpus_results(checker):
    return {p: checker.check_path(p) for p in SCHEDULES}


@pytest.mark.slow
def test_every_machine_fix_removes_its_finding_and_brings_none(checker, corpus_results):
    """Apply each `machine` fix of every corpus schedule on its own and re-check: its
    finding is gone and no finding appears that the schedule did not have."""
    applied = with_fix = 0
    for path, result in corpus_results.items():
        source = path.read_text(encoding="utf-8")
        for f in result.findings:
            machine = [x for x in f.fixes if x.applicability == "machine"]
            with_fix += bool(machine)
            for fix in machine:
                after = checker.check_bytes(apply_edits(source, fix.edits).encode(), str(path))
                applied += 1
                before = Counter(identity(g) for g in result.findings)
                now = Counter(identity(g) for g in after.findings)
                assert now[identity(f)] < before[identity(f)], (path.name, f.code)
                assert not now - before, (path.name, f.code, sorted(now - before))
    assert with_fix >= 50 and applied >= with_fix  # 51 findings, 51 fixes today


def test_machine_fixes_are_written_in_the_schedules_names(checker):
    """A fix that sets a parity reuses the barrier index the source writes (`S`), and
    the prose says what the source says."""
    f, = checker.check_path(PARITY).findings
    assert f.fixes[0].edits[0].text == "(k // S) % 2"
    assert "parity=(k // S + 1) % 2" in f.message and "// 2" not in f.message
    assert f.hint == "use `parity=(k // S) % 2`"


def test_a_stage_index_hint_uses_the_declared_name(checker):
    source = (CORPUS / "valid" / "gemm" / "raw_barriers_s2.cake").read_text()
    bad = source.replace("full[k % S].wait", "full[k % (S + 1)].wait", 1)
    assert bad != source
    result = checker.check_bytes(bad.encode(), "x.cake")
    [f] = [g for g in result.findings if g.code == "H006"]
    assert "`k % (S + 1)`" in f.message and "`full[k % S]`" in f.hint, (f.message, f.hint)
    assert f.stage == 2


# ---- check --fix ---------------------------------------------------------------------------


def cli(*args: str):
    result = CliRunner().invoke(app, [*args, "--rules", str(RULES), "--workloads",
                                      str(WORKLOADS)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result


def test_check_fix_rewrites_in_place_and_reports(tmp_path: Path):
    fixable, other, clean = (tmp_path / "a.cake", tmp_path / "b.cake", tmp_path / "c.cake")
    fixable.write_bytes(PARITY.read_bytes())
    fixable.chmod(0o640)
    other.write_bytes((CORPUS / "invalid" / "gemm" / "smem_over_capacity.cake").read_bytes())
    clean.write_bytes(VALID.read_bytes())
    result = cli("check", "--fix", str(tmp_path), "--format", "json")
    assert result.exit_code == 1  # the R001 schedule has no machine fix: still rejected
    assert "parity=(k // S) % 2)  # expect: P005" in fixable.read_text()
    assert stat.S_IMODE(fixable.stat().st_mode) == 0o640
    assert other.read_bytes() == (CORPUS / "invalid" / "gemm" /
                                  "smem_over_capacity.cake").read_bytes()
    assert clean.read_bytes() == VALID.read_bytes()
    assert f"fixed: {fixable}:26: [P005]" in result.stderr
    assert f"remains: {other}:" in result.stderr and "[R001]" in result.stderr
    assert result.stderr.endswith("fixed 1 finding(s) in 1 file(s); 1 remain\n")
    verdicts = {Path(r["file"]).name: r["verdict"]
                for r in json.loads(result.stdout)["results"]}
    assert verdicts == {"a.cake": "clean", "b.cake": "rejected", "c.cake": "clean"}
    assert not list(tmp_path.glob(".*.fix"))  # no temporary file left behind
    again = cli("check", "--fix", str(fixable))
    assert again.exit_code == 0 and "fixed 0 finding(s) in 0 file(s); 0 remain" in again.stderr


def test_overlapping_fixes_are_not_applied_together(checker):
    data = MISSING.read_bytes()
    before = checker.check_bytes(data, "m.cake")
    f, = before.findings
    at = f.fixes[0].edits[0].span  # an insertion at the start of a line
    around = Span(line=at.line - 1, col=2, end_line=at.line, end_col=3)  # holds it
    twin = f.model_copy(update={"fixes": (Fix(description="the same place", edits=(
        Edit(span=around, text="x"),)),)})
    two = before.model_copy(update={"findings": (f, twin)})
    new, report = plan_file(checker, data, "m.cake", two)
    assert new is not None and [x for _, x in report.applied] == [f.fixes[0]]
    assert "overlaps" in report.skipped[0][2]


# ---- renderers -----------------------------------------------------------------------------


def test_text_shows_each_edit_as_the_source_reads(checker):
    f, = checker.check_path(PARITY).findings
    lines = PARITY.read_text().splitlines()
    text = render_finding(f, lines)
    assert "   = fix (machine): use the opposite parity" in text
    assert "       26:37: replace `(k // S + 1) % 2` with `(k // S) % 2`" in text
    insert = Edit(span=Span(line=2, col=1, end_line=2, end_col=1), text="    x()\n")
    assert edit_text(insert, ["a", "b"]) == "2:1: insert `    x()\\n`"
    delete = Edit(span=Span(line=1, col=1, end_line=2, end_col=1), text="")
    assert edit_text(delete, ["a = 1", "b"]) == "1:1: delete `a = 1\\n`"


@pytest.mark.slow
def test_sarif_fixes_replay_to_the_same_text(rulebook, corpus_results):
    """The SARIF replacements of every corpus fix, applied by SARIF's own rules (regions
    of lines and columns, deleted then inserted), give the text apply_edits gives."""
    checked = 0
    for path, result in corpus_results.items():
        if not any(x.edits and x.applicability != "none" for f in result.findings
                   for x in f.fixes):
            continue
        doc = json.loads(render_sarif([result], rulebook))
        source = path.read_text(encoding="utf-8")
        sarif_fixes = [x for r in doc["runs"][0]["results"] for x in r.get("fixes", [])]
        ours = [x for f in result.findings for x in f.fixes
                if x.edits and x.applicability != "none"]
        assert len(sarif_fixes) == len(ours)
        for sarif_fix, fix in zip(sarif_fixes, ours, strict=True):
            (change,) = sarif_fix["artifactChanges"]
            edits = [Edit(span=Span(line=r["deletedRegion"]["startLine"],
                                    col=r["deletedRegion"]["startColumn"],
                                    end_line=r["deletedRegion"]["endLine"],
                                    end_col=r["deletedRegion"]["endColumn"]),
                          text=r["insertedContent"]["text"]) for r in change["replacements"]]
            assert apply_edits(source, edits) == apply_edits(source, fix.edits)
            assert sarif_fix["properties"]["applicability"] == fix.applicability
            checked += 1
    assert checked >= 50


def test_advice_only_fixes_stay_out_of_sarif(rulebook):
    advice = Finding(code="P007", rule="parity-aliasing", severity="blocking",
                     authority="legality", message="m", file="x.cake", path="schedule",
                     fixes=(Fix(description="think", applicability="none"),))
    doc = json.loads(render_sarif([FileResult(file="x.cake", verdict="rejected",
                                              findings=(advice,))], rulebook))
    assert "fixes" not in doc["runs"][0]["results"][0]


def test_source_editor_text_is_ast_source_segment():
    """SourceEditor.text splits the source once; it must give ast.get_source_segment's
    text for every node of a sample of corpus schedules (every 16th), and of a source with
    CRLF and CR line ends, non-ASCII characters and a form feed (not a line break)."""
    import ast

    from cakegov.check.repair import SourceEditor, source_lines_keepends

    weird = ("x = f(1,\r\n  'é→', [2,\r    3])\r\ny = g(\x0c'ü',\n 4)\n")
    sources = [p.read_text(encoding="utf-8") for p in SCHEDULES[::16]] + [weird]
    seen = 0
    for source in sources:
        editor = SourceEditor.__new__(SourceEditor)  # only the text part: no schedule
        editor.source, editor.lines = source, source_lines_keepends(source)
        for node in ast.walk(ast.parse(source)):
            if hasattr(node, "end_col_offset"):
                assert editor.text(node) == (ast.get_source_segment(source, node) or "")
                seen += 1
    assert seen > 2_000
