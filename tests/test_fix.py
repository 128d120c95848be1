"""Machine-applicable fixes: edits apply like a reference implementation."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cakegov.check.repair import Edit, EditConflict, apply_edits, line_starts
from cakegov.ir.nodes import Span

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


@settings(max_examples=300, deadline=None)
@given(source_and_edits())
def test_edits_apply_like_the_reference(case):
    source, edits = case
    assert apply_edits(source, as_edits(source, edits)) == reference_apply(source, edits)


@settings(max_examples=200, deadline=None)
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
