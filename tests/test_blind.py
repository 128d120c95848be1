"""What plugin code sees of a corpus case: comments, labels and docstrings blanked,
positions kept, verdicts unchanged."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cakegov.check.runner import expand_paths
from cakegov.corpus.labels import blind
from tests.conftest import CORPUS
from tests.tiers import corpus_params

CASES = [p for p in expand_paths([CORPUS]) if "workloads" not in p.parts]


@pytest.mark.parametrize("path", corpus_params(CASES[::7]), ids=lambda p: p.stem)
def test_a_blinded_case_is_judged_like_the_original(checker, path):
    text = path.read_text(encoding="utf-8")
    blinded = blind(text)
    assert "# expect" not in blinded and "#" not in blinded
    assert blinded.count("\n") == text.count("\n")
    assert all(line == line.rstrip() for line in blinded.splitlines())  # no label's width
    original = checker.check_bytes(text.encode(), "a.cake")
    seen = checker.check_bytes(blinded.encode(), "a.cake")
    assert seen.verdict == original.verdict
    assert [(f.code, f.span.line if f.span else None) for f in seen.findings] == \
        [(f.code, f.span.line if f.span else None) for f in original.findings]


def test_every_docstring_and_comment_is_blanked_but_code_and_quotes_stay():
    text = ('"""An invalid case: the loader\n forgets the wait."""\n'
            "# expect: clean\n"
            "x = '#not a comment'  # expect: P005\n"
            "def f():\n    'doc'\n    return 1\n")
    out = blind(text)
    assert "invalid" not in out and "forgets" not in out and "P005" not in out
    assert "doc" not in out and "x = '#not a comment'" in out and "return 1" in out
    assert out.startswith('"""') and out.count('"""') == 2


@given(st.text(max_size=300))
def test_blind_never_moves_a_line_or_column(text):
    """Lines stay lines, every kept character stays in its column (or became a blank),
    and only the blanks at a line's end that blanking made are dropped."""
    out = blind(text)
    outs, ins = out.split("\n"), text.split("\n")
    assert len(outs) == len(ins)
    for o, i in zip(outs, ins, strict=True):
        assert len(o) <= len(i)
        assert all(a == b or a == " " for a, b in zip(o, i, strict=False))


def test_a_label_leaves_no_trailing_width():
    """Two lines that differ only by a label are the same after blinding."""
    plain, labelled = "x = f(1)\n", "x = f(1)  # expect: P005\n"
    assert blind(plain) == blind(labelled) == plain
    assert blind("y = 2   \n") == "y = 2   \n"  # the line's own trailing blanks stay
