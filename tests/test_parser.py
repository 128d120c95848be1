"""The front end: schedule identity (canonical JSON sha256), IR paths and source spans,
JSON round trips, and regressions for inputs that once escaped as exceptions."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cakegov.ir.canonical import canonical_json, schedule_sha256
from cakegov.ir.errors import InputError
from cakegov.ir.nodes import Call, For, Schedule
from cakegov.ir.parse import Vocabulary, parse_bytes, parse_source, source_lines

from .profiles import examples
from .samples import GEMM, RAW, SCALE


@pytest.fixture(scope="module")
def vocab(checker) -> Vocabulary:
    return checker.vocabulary


def sha(text: str, vocab: Vocabulary) -> str:
    return schedule_sha256(parse_source(text, vocab))


def edit(base: str, old: str, new: str, count: int = 1) -> str:
    assert base.count(old) == count, (old, base.count(old))
    return base.replace(old, new)


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(source_lines(text), 1) if needle in line)


# ---- identity: what does not change it ------------------------------------------------------

NEUTRAL = {
    "comments": lambda s: "\n".join(
        f"{line}  # note {i}" if line.strip() and not line.startswith('"""') else line
        for i, line in enumerate(s.splitlines())) + "\n# trailing\n",
    "whole-line-comments": lambda s: s.replace("\n    with ", "\n    # the roles\n    with "),
    "blank-lines": lambda s: s.replace("\n    with ", "\n\n\n    with "),
    "whitespace": lambda s: edit(edit(s, "BM, BN, BK = 128, 128, 64", "BM,BN,BK=128,  128,64"),
                                 "k * BK", "k*BK", count=2),
    "rename-constant": lambda s: re.sub(r"\bBM\b", "TILE_M", s),
    "reformat-call": lambda s: edit(
        s, 'a_s = lm.smem("bf16", (BM, BK), stages=4, swizzle="128B")',
        "a_s = lm.smem(\n        'bf16',\n        (BM, BK),\n        stages=4,\n"
        "        swizzle='128B',\n    )"),
    "parenthesised": lambda s: edit(s, "regs=40", "regs=(40)"),
    "folded-constant": lambda s: edit(s, "regs=232", "regs=200 + 32"),
    "docstring": lambda s: edit(s, '"""Warp-specialized GEMM."""', '"""Another text."""'),
    "pass-statement": lambda s: edit(s, "    with math:\n", "    with math:\n        pass\n"),
}


@pytest.mark.parametrize("change", sorted(NEUTRAL))
def test_formatting_does_not_change_identity(change: str, vocab):
    changed = NEUTRAL[change](GEMM)
    assert changed != GEMM
    assert sha(changed, vocab) == sha(GEMM, vocab)
    assert canonical_json(parse_source(changed, vocab)) == \
        canonical_json(parse_source(GEMM, vocab))


# ---- identity: what does change it ---------------------------------------------------------

SEMANTIC = {
    "stage-count": (GEMM, 'lm.smem("bf16", (BM, BK), stages=4', 'lm.smem("bf16", (BM, BK), '
                    "stages=3"),
    "dtype": (GEMM, 'b_s = lm.smem("bf16"', 'b_s = lm.smem("f16"'),
    "swap-statements": (GEMM,
                        "            a_s[ring.stage(k)].load(A, at=(m0, k * BK), barrier=ring"
                        ".full(k), pad=True)\n            b_s[ring.stage(k)].load(B, at=(n0, "
                        "k * BK), barrier=ring.full(k), pad=True)\n",
                        "            b_s[ring.stage(k)].load(B, at=(n0, k * BK), barrier=ring"
                        ".full(k), pad=True)\n            a_s[ring.stage(k)].load(A, at=(m0, "
                        "k * BK), barrier=ring.full(k), pad=True)\n"),
    "loop-bound": (GEMM, "    with math:\n        for k in lm.range(0, lm.cdiv(lm.K, BK)):",
                   "    with math:\n        for k in lm.range(0, lm.cdiv(lm.K, BK) - 1):"),
    "parity": (RAW, "full[k % S].wait(parity=(k // S) % 2)",
               "full[k % S].wait(parity=(k // S + 1) % 2)"),
    "tile-size": (GEMM, "BM, BN, BK = 128, 128, 64", "BM, BN, BK = 64, 128, 64"),
    "init-condition": (GEMM, "init=(k == 0)", "init=(k == 1)"),
    "register-budget": (GEMM, "regs=232", "regs=224"),
    "warp-range": (SCALE, "warps=range(0, 4))", "warps=range(0, 2))"),
    "alpha": (SCALE, "alpha=2.5", "alpha=2.0"),
    "resource-name": (GEMM, "acc", "acc2", 3),
}


@pytest.mark.parametrize("change", sorted(SEMANTIC))
def test_semantic_change_changes_identity(change: str, vocab):
    base, old, new, *count = SEMANTIC[change]
    changed = edit(base, old, new, *count)
    assert sha(changed, vocab) != sha(base, vocab)


def test_identity_is_a_sha256_of_sorted_compact_json(vocab):
    schedule = parse_source(GEMM, vocab)
    text = canonical_json(schedule)
    assert " " not in text.replace('"Warp-specialized GEMM."', "")
    assert text == json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))
    assert '"span"' not in text and '"path"' not in text and '"doc"' not in text
    assert re.fullmatch(r"[0-9a-f]{64}", schedule_sha256(schedule))


# ---- round trip --------------------------------------------------------------------------------


@pytest.mark.parametrize("source", [GEMM, RAW, SCALE], ids=["gemm", "raw", "scale"])
def test_json_round_trip_keeps_identity(source: str, vocab):
    schedule = parse_source(source, vocab)
    again = Schedule.model_validate_json(schedule.model_dump_json())
    assert again == schedule
    assert schedule_sha256(again) == schedule_sha256(schedule)
    assert canonical_json(again) == canonical_json(schedule)
    # the canonical form itself is an identity key: it omits spans and paths, which every
    # IR node requires, so it is compared as data rather than loaded back as a Schedule
    assert json.loads(canonical_json(again)) == json.loads(canonical_json(schedule))


# ---- IR paths and spans ---------------------------------------------------------------------


def test_ir_paths_and_spans_point_at_the_statement(vocab):
    schedule = parse_source(GEMM, vocab)
    loader = schedule.role("loader")
    assert loader is not None
    loop = loader.body[0]
    assert isinstance(loop, For) and loop.path == "roles.loader.body[0]"
    load = loop.body[1]
    assert isinstance(load, Call) and load.primitive == "load"
    assert load.path == "roles.loader.body[0].body[1]"
    line = line_of(GEMM, "a_s[ring.stage(k)].load(")
    assert (load.span.line, load.span.col) == (line, 13)
    text = GEMM.splitlines()[line - 1]
    assert load.span.end_line == line and load.span.end_col == len(text) + 1
    assert load.arg_spans["src"].col == text.index("A, at=") + 1
    math = schedule.role("math")
    assert math is not None
    store = math.body[1]
    assert isinstance(store, Call) and store.path == "roles.math.body[1]"
    assert store.span.line == line_of(GEMM, "lm.store(C")
    decl = schedule.resource("b_s")
    assert decl is not None and decl.path == "resources.b_s"
    assert (decl.span.line, decl.span.col) == (line_of(GEMM, "b_s = lm.smem"), 5)


def test_columns_count_characters_not_bytes(vocab):
    source = edit(SCALE, "    TM, TN = 32, 256\n", "    π = 1; TM, TN = 32, 256\n"
                  "    éé, ö = 1, X.shape\n")
    with pytest.raises(InputError) as info:
        parse_source(source, vocab)
    line = line_of(source, "X.shape")
    # "    éé, ö = 1, " is 15 characters but 18 bytes
    assert (info.value.span.line, info.value.span.col) == (line, 16)
    assert info.value.span.end_col == 16 + len("X.shape")


def test_declaration_after_non_ascii_on_the_same_line(vocab):
    source = edit(SCALE, '    x_s = lm.smem("f32", (TM, TN))\n',
                  '    ππ = 2; x_s = lm.smem("f32", (TM, TN))\n')
    decl = parse_source(source, vocab).resource("x_s")
    assert decl is not None
    assert decl.span.col == len("    ππ = 2; ") + 1


def test_lines_are_counted_like_python(vocab):
    """A form feed or a Unicode line separator inside a line is not a line break."""
    source = edit(SCALE, "    TM, TN = 32, 256\n", "    TM, TN = 32, 256  # a\x0cb\u2028c\n"
                  "    TX = X.shape\n")
    with pytest.raises(InputError) as info:
        parse_source(source, vocab)
    assert (info.value.span.line, info.value.span.col) == (line_of(source, "TX = X.shape"), 10)
    assert source_lines("a\r\nb\rc\nd\x0ce\u2028f") == ["a", "b", "c", "d\x0ce\u2028f"]


def test_carriage_return_line_endings(vocab):
    source = SCALE.replace("\n", "\r\n")
    schedule = parse_source(source, vocab)
    assert schedule_sha256(schedule) == sha(SCALE, vocab)
    bad = edit(SCALE, "TM, TN = 32, 256", "TM, TN = 32, X.shape").replace("\n", "\r")
    with pytest.raises(InputError) as info:
        parse_bytes(bad.encode(), vocab)
    assert (info.value.span.line, info.value.span.col) == (5, 18)


# ---- regressions: inputs that once escaped the front end as exceptions ----------------------


@pytest.mark.parametrize("old,new", [
    ("warps=4)", "warps=W)"),
    ("warps=4)", "warps=x_s)"),
])
def test_unbound_name_in_launch_is_recorded_not_raised(old: str, new: str, vocab):
    schedule = parse_source(edit(SCALE, old, new), vocab)
    assert schedule.launch is None
    if new == "warps=W)":
        assert [u.name for u in schedule.unresolved] == ["W"]
        assert schedule.unresolved[0].span.line == line_of(SCALE, "lm.launch")


def test_huge_literals_are_quoted_briefly(vocab):
    source = edit(SCALE, "TM, TN = 32, 256", "TM, TN = 32, '" + "x" * 100_000 + "'")
    with pytest.raises(InputError) as info:
        parse_source(source, vocab)
    assert info.value.code == "E103" and len(info.value.message) < 120


def test_syntax_warnings_are_not_printed(vocab, capfd):
    with pytest.raises(InputError):
        parse_source(edit(SCALE, "TM, TN = 32, 256", "TM, TN = 32, 0x1for"), vocab)
    parse_source(edit(SCALE, '"""Scale tile."""', '"""Scale \\d tile."""'), vocab)
    assert capfd.readouterr().err == ""


def test_syntax_error_at_end_of_file_points_inside_it(vocab):
    source = SCALE + "    lm.store(Y, at=(m0,"
    with pytest.raises(InputError) as info:
        parse_source(source, vocab)
    lines = source_lines(source)
    assert info.value.code == "E100"
    assert 1 <= info.value.span.line <= len(lines)
    assert info.value.span.col <= len(lines[info.value.span.line - 1]) + 1


def test_surplus_decorator_is_pointed_at(vocab):
    source = edit(SCALE, "@cake.schedule", "@functools.cache\n@cake.schedule")
    with pytest.raises(InputError) as info:
        parse_source(source, vocab)
    assert info.value.span.line == line_of(source, "@functools.cache")


# ---- generated schedules ---------------------------------------------------------------------

TEMPLATE = '''"""Generated GEMM: {bm}x{bn}x{bk}, {stages} stages, {groups} math warpgroups."""
@cake.schedule(target="sm_90a", workload="gemm", divisible={{"K": {bk}}})
def generated(lm, A, B, C):
    BM, BN, BK = {bm}, {bn}, {bk}
    lm.launch(grid=(lm.cdiv(lm.M, BM), lm.cdiv(lm.N, BN)), warps={warps})
    a_s = lm.smem("{dtype}", (BM, BK), stages={stages}, swizzle="{swizzle}")
    b_s = lm.smem("{dtype}", (BN, BK), stages={stages}, swizzle="{swizzle}")
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, {warps}), regs={regs})
    acc = lm.fragment("f32", (BM, BN), role=math)
    ring = lm.pipeline(stages={stages}, buffers=[a_s, b_s], producer=loader, consumer=math)
    m0, n0 = lm.block(0) * BM, lm.block(1) * BN
    with loader:
        for k in lm.range(0, lm.cdiv(lm.K, BK)):
            ring.acquire(k)
            a_s[ring.stage(k)].load(A, at=(m0, k * BK), barrier=ring.full(k), pad=True)
            b_s[ring.stage(k)].load(B, at=(n0, k * BK), barrier=ring.full(k), pad=True)
    with math:
        for k in lm.range(0, lm.cdiv(lm.K, BK)):
            ring.wait(k)
            lm.mma(acc, a_s[ring.stage(k)], b_s[ring.stage(k)], transpose_b=True,
                   init=(k == 0))
            ring.release(k)
        lm.store(C, at=(m0, n0), src=acc, mask=True)
'''

params = st.fixed_dictionaries({
    "bm": st.sampled_from((64, 128, 256)), "bn": st.sampled_from((64, 128, 256)),
    "bk": st.sampled_from((32, 64, 128)), "stages": st.integers(1, 8),
    "groups": st.integers(1, 3), "dtype": st.sampled_from(("bf16", "f16", "f8e4m3")),
    "swizzle": st.sampled_from(("none", "64B", "128B")), "regs": st.sampled_from((168, 232)),
})


def render(p: dict) -> str:
    return TEMPLATE.format(warps=4 + 4 * p["groups"], **p)


def with_comments(text: str, where: list[int], inline: list[bool]) -> str:
    """Insert comment lines before, and comments after, some lines of `text`."""
    lines = text.splitlines()
    out: list[str] = []
    for i, line in enumerate(lines):
        if i in where and i > 0:
            out.append("    # generated comment")
        closes_doc = line.startswith('"""')
        out.append(f"{line}   # note" if inline[i % len(inline)] and not closes_doc else line)
    return "\n".join(out) + "\n"


@settings(max_examples=examples(60), deadline=None, derandomize=True, database=None)
@given(p=params, where=st.lists(st.integers(0, 30), max_size=8),
       inline=st.lists(st.booleans(), min_size=1, max_size=5))
def test_generated_schedules_parse_and_keep_identity_under_comments(vocab, p, where, inline):
    text = render(p)
    schedule = parse_source(text, vocab)
    assert schedule.launch is not None and schedule.launch.warps == 4 + 4 * p["groups"]
    a_s = schedule.resource("a_s")
    assert a_s is not None and a_s.stages == p["stages"] and a_s.shape == (p["bm"], p["bk"])
    assert not schedule.unresolved
    assert sha(with_comments(text, where, inline), vocab) == schedule_sha256(schedule)


@settings(max_examples=examples(40), deadline=None, derandomize=True, database=None)
@given(a=params, b=params)
def test_generated_identity_separates_different_parameters(vocab, a, b):
    assert (sha(render(a), vocab) == sha(render(b), vocab)) == (a == b)


def test_spelling_out_a_default_keeps_the_identity(checker):
    from cakegov.ir.canonical import schedule_sha256
    from cakegov.ir.parse import parse_source

    from .conftest import CORPUS

    text = (CORPUS / "valid" / "gemm" / "raw_barriers_s2.cake").read_text()
    explicit = text.replace("empty[k % S].arrive()", 'empty[k % S].arrive(per="warp")')
    other = text.replace("empty[k % S].arrive()", 'empty[k % S].arrive(per="role")')
    assert explicit != text
    base = schedule_sha256(parse_source(text, checker.vocabulary))
    assert schedule_sha256(parse_source(explicit, checker.vocabulary)) == base
    assert schedule_sha256(parse_source(other, checker.vocabulary)) != base
