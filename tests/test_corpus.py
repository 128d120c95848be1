"""Every corpus schedule is checked and its findings compared with its inline labels."""

from __future__ import annotations

from pathlib import Path

import pytest

from cakegov.corpus.labels import read_label_file

from .conftest import CORPUS, ROOT
from .tiers import corpus_params, label_subset

SCHEDULES = sorted(CORPUS.rglob("*.cake"))
QUICK = label_subset(SCHEDULES)


def test_the_quick_tier_exercises_every_rule_of_the_rulebook(rulebook):
    """Every rule's code is labelled somewhere in the quick subset, and the subset holds
    valid and invalid schedules."""
    quick_codes = set().union(*(read_label_file(p).codes for p in QUICK))
    # P099, the fallback, labels no corpus case (every anomaly there is named by a rule's
    # repair); tests/test_rule_docs.py checks it on its example with it alone
    assert {r.code for r in rulebook.rules} - {"P099"} <= quick_codes
    assert any(p.relative_to(CORPUS).parts[0] == "valid" for p in QUICK)
    assert any(p.relative_to(CORPUS).parts[0] == "invalid" for p in QUICK)


def test_corpus_is_not_empty():
    valid = [p for p in SCHEDULES if "valid" in p.relative_to(CORPUS).parts[:1]]
    assert len(valid) >= 4
    assert len(SCHEDULES) > len(valid)


@pytest.mark.parametrize("path", corpus_params(SCHEDULES, QUICK),
                         ids=lambda p: str(p.relative_to(CORPUS)))
def test_corpus_file_matches_labels(path: Path, checker):
    labels = read_label_file(path)
    result = checker.check_path(path)
    errors = [f for f in result.findings if f.authority in ("input", "internal")]
    assert not errors, [f.message for f in errors]
    kind = path.relative_to(CORPUS).parts[0]
    if kind == "valid":
        assert labels.clean, "files under corpus/valid must be labelled `# expect: clean`"
    else:
        assert not labels.clean, "files under corpus/invalid carry one labelled defect"
    found = {(f.code, f.span.line if f.span else 0) for f in result.findings
             if f.severity == "blocking" or f.authority == "coverage"}
    assert found == set(labels.expected), (
        f"{path.relative_to(ROOT)}: expected {sorted(labels.expected)}, found "
        + "; ".join(f"{f.code}@{f.span.line if f.span else '?'}: {f.message}"
                    for f in result.findings)
    )
    assert not found & labels.todo, "a known gap is found now: promote its `# todo-expect:`"
    coverage = {f.code for f in result.findings if f.authority == "coverage"}
    expected = "clean" if labels.clean or not labels.expected else (
        "incomplete" if labels.codes <= coverage else "rejected")
    assert result.verdict == expected


def test_p099_is_rare_and_every_case_is_explained_in_the_checker_docs():
    """Diagnoses come from the repair that removes the anomaly; what no repair fits is
    P099, at most 2 % of the invalid cases, each listed in docs/checker.md with why."""
    invalid = sorted((CORPUS / "invalid").rglob("*.cake"))
    p099 = [p for p in invalid if "# expect: P099" in p.read_text(encoding="utf-8")]
    assert len(p099) <= 0.02 * len(invalid), [str(p) for p in p099]
    docs = (ROOT / "docs" / "checker.md").read_text(encoding="utf-8")
    for p in p099:
        assert f"`{p.relative_to(CORPUS / 'invalid').as_posix()}`" in docs, p


def _text_at(lines: list[str], span) -> str:
    if span.line == span.end_line:
        return lines[span.line - 1][span.col - 1:span.end_col - 1]
    parts = [lines[span.line - 1][span.col - 1:]]
    parts += lines[span.line:span.end_line - 1]
    parts.append(lines[span.end_line - 1][:span.end_col - 1])
    return "\n".join(parts)


@pytest.mark.parametrize("path", sorted(p for p in QUICK if "invalid" in p.parts),
                         ids=lambda p: str(p.relative_to(CORPUS)))
def test_no_fix_proposes_what_is_already_there(path: Path, checker):
    """Help is checked against the schedule it is about: every edit of every fix changes
    the text it covers (a count to the count it has, a stage to the stage it names, a
    parity to the parity it has are refused before they become help)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    result = checker.check_path(path)
    for f in result.findings:
        for fix in f.fixes:
            for edit in fix.edits:
                assert _text_at(lines, edit.span) != edit.text, (f.code, fix.description)
