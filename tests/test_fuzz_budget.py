"""Fuzzing the diagnosis budget (issue 45): one-token edits of valid corpus schedules (a
token deleted, doubled, renumbered or renamed to another name of the schedule, or a line
doubled, as in the duplicated remote arrive that once took 400 s). Whatever the edit, the
check reports no internal error, and its work units (`context.units`: events unrolled and
steps executed, counted, never timed) stay within 5x its unedited twin's (or its own
analysis', where the edit made the kernel larger), plus the diagnosis floor for a schedule
whose analysis is tiny.

Seeded (derandomized): the quick tier runs 15 examples on two small families, CI
(`HYPOTHESIS_PROFILE=ci`) 150 on every family. `FUZZ_REPORT=FILE` appends one line per
example (ratio to the twin, units, verdict, the bound hit, the edit)."""

from __future__ import annotations

import io
import os
import tokenize

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cakegov.check import context as C
from cakegov.check.runner import Checker

from .conftest import CORPUS
from .profiles import current, examples
from .test_fuzz import assert_sane

FAMILIES = ("knn", "scale") if current() == "dev" else None
VALID = sorted(p for p in (CORPUS / "valid").rglob("*.cake")
               if FAMILIES is None or p.parent.name in FAMILIES)
BUDGET = settings(max_examples=examples(150), deadline=None, derandomize=True, database=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                         HealthCheck.function_scoped_fixture])
RATIO = 5  # the bound: a defective schedule within 5x its clean twin's work


def _tokens(text: str, after: int) -> list[tuple[int, int, str, int, int]]:
    """(start, end, string, type, line) of the NAME, NUMBER and OP tokens past `after`."""
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type in (tokenize.NAME, tokenize.NUMBER, tokenize.OP):
            (sr, sc), (er, ec) = tok.start, tok.end
            start = starts[sr - 1] + sc
            if start > after:
                out.append((start, starts[er - 1] + ec, tok.string, tok.type, sr))
    return out


@st.composite
def one_token_edits(draw) -> tuple[str, str, str]:
    """(file, edit, edited text): one edit inside the schedule's body."""
    path = draw(st.sampled_from(VALID))
    text = path.read_text(encoding="utf-8")
    toks = _tokens(text, text.index("@cake.schedule"))
    names = sorted({t[2] for t in toks if t[3] == tokenize.NAME})
    op = draw(st.sampled_from(("delete", "double", "renumber", "rename", "double-line")))
    if op == "renumber":
        toks = [t for t in toks if t[3] == tokenize.NUMBER] or toks
    elif op == "rename":
        toks = [t for t in toks if t[3] == tokenize.NAME]
    start, end, string, kind, line = draw(st.sampled_from(toks))
    if op == "double-line":
        lines = text.splitlines(keepends=True)
        edited = "".join([*lines[:line], lines[line - 1], *lines[line:]])
    elif op == "delete":
        edited = text[:start] + text[end:]
    elif op == "double":
        edited = text[:start] + f"{string} {string}" + text[end:]
    elif op == "renumber" and kind == tokenize.NUMBER and string.isdigit():
        value = int(string)
        new = draw(st.sampled_from(sorted({0, 1, 2, value - 1, value + 1, 2 * value})))
        edited = text[:start] + str(new) + text[end:]
    else:  # a name of the schedule in place of this token
        edited = text[:start] + draw(st.sampled_from(names)) + text[end:]
    return path.relative_to(CORPUS).as_posix(), f"{op} `{string}` on line {line}", edited


@pytest.fixture(scope="module")
def fresh(rulebook, workloads):
    """A checker of its own: the session's shared one keeps results, not their work."""
    return Checker(rulebook, workloads, preview=True), {}


@BUDGET
@given(case=one_token_edits())
def test_one_token_edits_stay_within_the_diagnosis_budget(fresh, case):
    checker, twins = fresh
    name, what, edited = case
    if name not in twins:
        twin, twin_work = checker.check_bytes_with_work((CORPUS / name).read_bytes(), name)
        assert twin.verdict == "clean", name
        twins[name] = twin_work.total
    data = edited.encode("utf-8")
    result, work = checker.check_bytes_with_work(data, "fuzz.cake")
    assert_sane(result, data)
    # the yardstick is the twin, or the edited schedule's own analysis when the edit made
    # the kernel larger (a loop bound, a stage count): that is its analysis, not diagnosis
    bound = RATIO * max(twins[name], work.base) + C.DIAGNOSIS_FLOOR
    assert work.total <= bound, (
        f"{name}: {what}: {work.total} work units, {work.total / max(twins[name], 1):.1f}x "
        f"the twin's {twins[name]} ({result.verdict}; {work})")
    # the search stops once past its allowance: at most one attempt's re-analysis more
    assert work.repairs <= work.allowance() + work.base, (name, what, work)
    if os.environ.get("FUZZ_REPORT"):  # one line per example, for a closing note's figures
        with open(os.environ["FUZZ_REPORT"], "a", encoding="utf-8") as fh:
            fh.write(f"{work.total / max(twins[name], 1):.2f} {work.total} {twins[name]} "
                     f"{result.verdict} {work.spent or '-'} {name} {what}\n")
