"""Shared-memory aliasing (`lm.smem(..., alias=root)`): the typed IR records the root,
the layout places the alias at the root's offset and counts the union once, the identity
of schedules without aliases is unchanged, misuse is an input error or R010, and a race
through the two names is P020 (the corpus holds the protocol cases)."""

from __future__ import annotations

import pytest

from cakegov.ir.canonical import canonical_json
from cakegov.ir.errors import InputError
from cakegov.ir.nodes import SmemDecl
from cakegov.ir.parse import parse_source
from cakegov.lower.layout import smem_layout

from .conftest import CORPUS

UNION = (CORPUS / "valid/gemm/epilogue_union_s4.cake").read_text(encoding="utf-8")
ALIAS_LINE = 'c_s = lm.smem("f32", (BM, BN), alias=a_s)'


def parse(text, checker):
    return parse_source(text, checker.vocabulary)


def test_alias_in_the_ir_and_the_layout(checker):
    schedule = parse(UNION, checker)
    decls = {d.name: d for d in schedule.resources if isinstance(d, SmemDecl)}
    assert decls["c_s"].alias == "a_s" and decls["a_s"].alias is None
    layout = smem_layout(schedule)
    a, b, c = (layout.buffer(n) for n in ("a_s", "b_s", "c_s"))
    assert c.offset == a.offset and c.alias == "a_s"
    assert layout.data_bytes == a.bytes + b.bytes  # the union counts once
    without = smem_layout(parse(UNION.replace(ALIAS_LINE, 'c_s = lm.smem("f32", (BM, BN))'),
                                checker))
    assert without.total_bytes - layout.total_bytes >= c.bytes


def test_alias_of_an_alias_shares_the_root(checker):
    text = UNION.replace(ALIAS_LINE, ALIAS_LINE + '\n    d_s = lm.smem("f32", (BM, 64), '
                                                  'alias=c_s)')
    schedule = parse(text, checker)
    d = next(r for r in schedule.resources if r.name == "d_s")
    assert d.alias == "a_s"
    layout = smem_layout(schedule)
    assert layout.buffer("d_s").offset == layout.buffer("a_s").offset


def test_identity_without_alias_is_unchanged(checker):
    plain = parse(UNION.replace(ALIAS_LINE, 'c_s = lm.smem("f32", (BM, BN))'), checker)
    assert '"alias"' not in canonical_json(plain)
    assert '"alias":"a_s"' in canonical_json(parse(UNION, checker))


@pytest.mark.parametrize("value", ["bar0", "BM", '"a_s"', "a_s[0]"])
def test_alias_of_something_else_is_an_input_error(checker, value):
    text = UNION.replace(ALIAS_LINE, 'bar0 = lm.mbarrier(count=1)\n    '
                         f'c_s = lm.smem("f32", (BM, BN), alias={value})')
    with pytest.raises(InputError) as exc:
        parse(text, checker)
    assert exc.value.code == "E103" and "shared-memory view" in exc.value.message


def test_unknown_alias_is_unresolved(checker):
    schedule = parse(UNION.replace("alias=a_s", "alias=a_ss"), checker)
    assert [u.name for u in schedule.unresolved] == ["a_ss"]


def test_misaligned_alias_is_r010(checker):
    # b_s sits at 64 KB (1024-aligned); x_s (16-byte aligned) after the ring starts at
    # 128 KB + 16, so a 128B-swizzled alias over it is misaligned
    text = UNION.replace(ALIAS_LINE, 'x_s = lm.smem("f32", (4,))\n    pad_s = lm.smem('
                         '"f32", (256, 8))\n    c_s = lm.smem("bf16", (8, 64), swizzle="128B", '
                         'alias=pad_s)')
    text = text.replace('lm.elementwise(c_s[0], acc, op="copy")',
                        'lm.elementwise(a_s[0], acc, op="cast")')
    text = text.replace("c_s[0].store_async(C, at=(m0, n0))", "")
    result = checker.check_bytes(text.encode(), "misaligned.cake")
    codes = [f.code for f in result.findings if f.severity == "blocking"]
    assert "R010" in codes
    f = next(f for f in result.findings if f.code == "R010")
    assert "1024-byte alignment" in f.message


def test_alias_race_names_both_views(checker):
    path = CORPUS / "invalid/gemm/epilogue_union_without_sync.cake"
    result = checker.check_path(path)
    (f,) = [f for f in result.findings if f.severity == "blocking"]
    assert f.code == "P020" and "`c_s` and `a_s` are the same bytes" in f.message
    assert f.fixes  # the named barrier the rule proposes removes the race
