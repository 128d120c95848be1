"""Generated documentation stays in sync with the plugins, and the hand-written language
guide quotes the corpus and the front end's errors exactly."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cakegov.check.rulebook import Rulebook
from cakegov.cli import app
from cakegov.docs import (
    BEGIN_PRIMITIVES,
    END_PRIMITIVES,
    DocsError,
    plan,
    primitive_signature,
    render_primitives,
    render_rules,
    splice,
)
from cakegov.ir.errors import InputError
from cakegov.ir.parse import Vocabulary, parse_source

from .conftest import ROOT, RULES

DOCS = ROOT / "docs"
LANGUAGE = DOCS / "language.md"
_BOOK = Rulebook.load(RULES)


def _docs_check(rules: Path, docs: Path):
    return CliRunner().invoke(app, ["docs", "--check", "--rules", str(rules), "--docs",
                                    str(docs)])


def _generated(text: str) -> str:
    return text[text.index(BEGIN_PRIMITIVES):text.index(END_PRIMITIVES)]


def test_generated_docs_are_in_sync():
    result = _docs_check(RULES, DOCS)
    assert result.exit_code == 0, (
        "docs/language.md or docs/rules.md is out of date with rules/: run `cakegov docs` "
        f"and commit the result\n{result.output}"
    )
    assert "docs ok" in result.output


def test_changing_a_primitive_argument_makes_the_check_fail(tmp_path):
    rules, docs = tmp_path / "rules", tmp_path / "docs"
    shutil.copytree(RULES, rules)
    shutil.copytree(DOCS, docs)
    assert CliRunner().invoke(app, ["docs", "--rules", str(rules), "--docs", str(docs)]
                              ).exit_code == 0
    assert _docs_check(rules, docs).exit_code == 0
    mma = rules / "primitives" / "mma.py"
    text = mma.read_text(encoding="utf-8")
    changed = text.replace('"zero the accumulator before this product"',
                           '"zero the accumulator first"')
    assert changed != text
    mma.write_text(changed, encoding="utf-8")
    result = _docs_check(rules, docs)
    assert result.exit_code == 1
    assert "language.md is out of date" in result.output
    assert "run `cakegov docs`" in result.output
    assert "rules.md is out of date" not in result.output


def test_regenerating_a_copy_brings_it_in_sync(tmp_path):
    rules = tmp_path / "rules"
    shutil.copytree(RULES, rules)
    docs = tmp_path / "docs"
    shutil.copytree(DOCS, docs)
    mma = rules / "primitives" / "mma.py"
    mma.write_text(mma.read_text(encoding="utf-8").replace(
        '    Arg("init", "bool",',
        '    Arg("scale", "float", "multiply the product", required=False, default=1.0),\n'
        '    Arg("init", "bool",'), encoding="utf-8")
    before = (docs / "language.md").read_text(encoding="utf-8")
    written = CliRunner().invoke(app, ["docs", "--rules", str(rules), "--docs", str(docs)])
    assert written.exit_code == 0, written.output
    after = (docs / "language.md").read_text(encoding="utf-8")
    assert "lm.mma(acc, a, b, transpose_b=False, scale=1.0, init=False)" in after
    assert "| `scale` | float | default `1.0` |  | multiply the product |" in after
    # the hand-written part above the markers is kept byte for byte
    assert after.split(BEGIN_PRIMITIVES)[0] == before.split(BEGIN_PRIMITIVES)[0]
    assert _docs_check(rules, docs).exit_code == 0


def test_every_primitive_is_documented_in_the_language_guide():
    section = _generated(LANGUAGE.read_text(encoding="utf-8"))
    for prim in _BOOK.primitives.values():
        assert f"Primitive `{prim.name}` · spelling `{prim.spelling}`" in section, prim.name
        assert f"#### `{primitive_signature(prim)}`" in section, prim.name
        for arg in prim.args:
            assert f"| `{arg.name}` | {arg.kind} |" in section, (prim.name, arg.name)


def test_every_rule_is_documented_in_the_rule_reference():
    text = (DOCS / "rules.md").read_text(encoding="utf-8")
    for rule in _BOOK.rules:
        assert f"## {rule.code} {rule.name}\n" in text
        assert rule.section("What it does") in text


@pytest.mark.parametrize(("name", "expected"), [
    ("mma", "lm.mma(acc, a, b, transpose_b=False, init=False)"),
    ("load", "<smem>[stage].load(src, at, barrier, pad=False, [multicast])"),
    ("mbarrier_arrive", '<mbarrier>[i].arrive(per="warp", [cta])'),
    ("pipeline_acquire", "<pipeline>.acquire(iter)"),
    ("named_barrier_sync", "<named_barrier>.sync()"),
])
def test_signatures_are_written_as_the_user_writes_them(name, expected):
    assert primitive_signature(_BOOK.primitives[name]) == expected


def test_rendering_is_deterministic_and_independent_of_location(tmp_path):
    shutil.copytree(RULES, tmp_path / "rules")
    copy = Rulebook.load(tmp_path / "rules")
    assert render_primitives(copy) == render_primitives(_BOOK)
    assert render_rules(copy) == render_rules(_BOOK)


def test_missing_markers_are_a_usage_error(tmp_path):
    with pytest.raises(DocsError, match="needs the markers"):
        splice("no markers here\n", BEGIN_PRIMITIVES, END_PRIMITIVES, "x", "page.md")
    (tmp_path / "language.md").write_text("# guide without markers\n", encoding="utf-8")
    with pytest.raises(DocsError):
        plan(_BOOK, tmp_path)
    result = _docs_check(RULES, tmp_path)
    assert result.exit_code == 2
    assert "needs the markers" in result.output


# ---- the hand-written guide is exact -------------------------------------------------

_QUOTE = re.compile(r"^`(corpus/[^`]+\.cake)`:\n\n?```python\n(.*?)```", re.S | re.M)


@pytest.mark.parametrize(("page", "least"), [(LANGUAGE, 4), (ROOT / "README.md", 1)],
                         ids=["language.md", "README.md"])
def test_corpus_quotes_are_verbatim(page, least):
    quotes = _QUOTE.findall(page.read_text(encoding="utf-8"))
    assert len(quotes) >= least
    for path, block in quotes:
        text = (ROOT / path).read_text(encoding="utf-8")
        assert block in text, f"{page.name} quotes {path} inaccurately:\n{block}"


def _error_examples() -> list[tuple[str, str]]:
    text = LANGUAGE.read_text(encoding="utf-8")
    errors = text[text.index("\n## Errors\n"):text.index("\n## Unresolved names\n")]
    return re.findall(r"^### (E1\d\d)\n\n```python\n(.*?)```", errors, re.S | re.M)


@pytest.mark.parametrize(("code", "source"), _error_examples(), ids=lambda v: v[:4])
def test_error_examples_raise_their_code(code, source, workloads):
    vocab = Vocabulary(primitives=_BOOK.spellings(),
                       workloads={n: w.sig for n, w in workloads.items()})
    with pytest.raises(InputError) as info:
        parse_source(source, vocab)
    assert info.value.code == code, info.value.message


def test_every_input_error_code_is_documented():
    text = LANGUAGE.read_text(encoding="utf-8")
    assert len(_error_examples()) >= 5
    for code in ("E100", "E101", "E102", "E103", "E104", "E105", "E106"):
        assert f"| {code} |" in text


def test_links_from_the_language_guide_to_rules_exist():
    rules_text = (DOCS / "rules.md").read_text(encoding="utf-8")
    anchors = re.findall(r"\]\(rules\.md#([a-z0-9-]+)\)", LANGUAGE.read_text(encoding="utf-8"))
    assert anchors
    for anchor in anchors:
        code, _, name = anchor.partition("-")
        assert f"## {code.upper()} {name}\n" in rules_text, f"broken link rules.md#{anchor}"
