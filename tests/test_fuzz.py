"""Fuzzing the front end and the checker with hypothesis: byte mutations and token
mutations of every corpus file, and random text from a small grammar of schedule-ish
snippets. Whatever the input, the checker returns a result (it never raises), never
reports an internal error, and every input error points inside the file.

Runs are derandomized so CI is deterministic; raise FUZZ_EXAMPLES to search longer."""

from __future__ import annotations

import io
import os
import tokenize
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from cakegov.check.findings import FileResult
from cakegov.cli import app
from cakegov.ir.parse import source_lines

from .conftest import CORPUS, RULES, WORKLOADS
from .profiles import examples

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES") or examples(200))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SOURCES = {p.relative_to(CORPUS).as_posix(): p.read_bytes()
           for p in sorted(CORPUS.rglob("*.cake"))}


def assert_sane(result: FileResult, data: bytes) -> None:
    """No internal finding; every input error has a span inside the file."""
    internal = [f.message for f in result.findings if f.authority == "internal"]
    assert not internal, internal
    lines = source_lines(data.decode("utf-8", "replace")) or [""]
    for f in result.findings:
        if f.authority != "input":
            continue
        assert f.span is not None, f
        assert 1 <= f.span.line <= len(lines), (f.message, f.span, len(lines))
        assert 1 <= f.span.col <= len(lines[f.span.line - 1]) + 1, (f.message, f.span)
        assert f.span.end_line >= f.span.line
    if result.verdict == "error":
        assert any(f.authority == "input" for f in result.findings)


def check(checker, data: bytes) -> FileResult:
    result = checker.check_bytes(data, "fuzz.cake")
    assert_sane(result, data)
    return result


# ---- (a) byte mutations ----------------------------------------------------------------------

_byte_edit = st.tuples(st.sampled_from(("flip", "insert", "delete")), st.floats(0, 1),
                       st.integers(0, 255))


def mutate_bytes(data: bytes, edits: list[tuple[str, float, int]]) -> bytes:
    out = bytearray(data)
    for kind, where, value in edits:
        pos = min(int(where * len(out)), max(len(out) - 1, 0))
        if kind == "insert":
            out[pos:pos] = bytes([value])
        elif out and kind == "delete":
            del out[pos]
        elif out:
            out[pos] ^= 1 << (value % 8)
    return bytes(out)


@FUZZ
@given(name=st.sampled_from(sorted(SOURCES)), edits=st.lists(_byte_edit, min_size=1,
                                                               max_size=6))
def test_byte_mutations_never_crash(checker, name: str, edits):
    check(checker, mutate_bytes(SOURCES[name], edits))


# ---- (b) token mutations ---------------------------------------------------------------------

_NAMES = ("lm", "k", "BM", "BK", "S", "a_s", "b_s", "ring", "full", "empty", "acc", "math",
          "loader", "worker", "A", "B", "C", "X", "Y", "range", "True", "None", "cake", "x",
          "stage", "load", "wait", "arrive", "nbytes", "cdiv", "block", "M", "K", "mma")
_NUMBERS = ("0", "1", "-1", "2", "3", "7", "64", "255", "1024", "2.5", "1e400", str(2**40),
            str(2**63), "0x10", "10**30")
_TOKEN_KINDS = (tokenize.NAME, tokenize.NUMBER, tokenize.OP, tokenize.STRING)


def _tokens(text: str) -> list[tuple[int, int, str, int]]:
    """(start, end, string, type) of each significant token, as character offsets."""
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type in _TOKEN_KINDS:
            (sr, sc), (er, ec) = tok.start, tok.end
            out.append((starts[sr - 1] + sc, starts[er - 1] + ec, tok.string, tok.type))
    return out


@st.composite
def token_mutants(draw) -> str:
    text = SOURCES[draw(st.sampled_from(sorted(SOURCES)))].decode("utf-8")
    for _ in range(draw(st.integers(1, 3))):
        try:
            toks = _tokens(text)
        except (tokenize.TokenError, SyntaxError):
            break  # an earlier mutation left text that does not tokenize: stop there
        if not toks:
            break
        i = draw(st.integers(0, len(toks) - 1))
        start, end, string, kind = toks[i]
        op = draw(st.sampled_from(("delete", "duplicate", "swap", "rename", "renumber")))
        if op == "delete":
            new = ""
        elif op == "duplicate":
            new = f"{string} {string}"
        elif op == "swap":
            j = draw(st.integers(0, len(toks) - 1))
            a, b = sorted((toks[i], toks[j]))
            if a[1] > b[0]:
                continue
            text = text[:a[0]] + b[2] + text[a[1]:b[0]] + a[2] + text[b[1]:]
            continue
        elif op == "rename" or kind == tokenize.NAME:
            new = draw(st.sampled_from(_NAMES) | st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}",
                                                                  fullmatch=True))
        else:
            new = draw(st.sampled_from(_NUMBERS) | st.integers(-(2**64), 2**64).map(str))
        text = text[:start] + new + text[end:]
    return text


@FUZZ
@given(text=token_mutants())
def test_token_mutations_never_crash(checker, text: str):
    check(checker, text.encode("utf-8", "surrogatepass"))


# ---- (c) random text from a grammar of schedule-ish snippets ---------------------------------

_IDENT = st.sampled_from(_NAMES)
_INT = st.sampled_from((0, 1, 2, 3, 4, 8, 16, 32, 64, 128, 256, 1024, -1, 2**40, 10**12))
_DTYPE = st.sampled_from(('"f32"', '"bf16"', '"f16"', '"fp32"', '"i8"', "3", "bf16"))


def _exprs() -> st.SearchStrategy[str]:
    leaf = st.one_of(_INT.map(str), _IDENT, st.sampled_from(("lm.M", "lm.N", "lm.K", "lm.Q")),
                     st.sampled_from(("lm.block(0)", "lm.block(1)", "lm.block(5)")))

    def grow(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.tuples(inner, st.sampled_from(("+", "-", "*", "//", "%", "/", "**", "==", "<")),
                      inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
            st.tuples(st.sampled_from(("lm.cdiv", "lm.min", "lm.max", "ring.stage",
                                       "lm.nbytes", "f")), st.lists(inner, max_size=3))
            .map(lambda t: f"{t[0]}({', '.join(t[1])})"),
            st.tuples(_IDENT, inner).map(lambda t: f"{t[0]}[{t[1]}]"),
        )

    return st.recursive(leaf, grow, max_leaves=4)


_EXPR = _exprs()


def _decls() -> st.SearchStrategy[str]:
    shape = st.lists(_EXPR, min_size=1, max_size=3).map(lambda xs: f"({', '.join(xs)},)")
    return st.one_of(
        st.tuples(_IDENT, _DTYPE, shape, _EXPR, st.sampled_from(('"none"', '"128B"', '"7B"')))
        .map(lambda t: f"{t[0]} = lm.smem({t[1]}, {t[2]}, stages={t[3]}, swizzle={t[4]})"),
        st.tuples(_IDENT, _DTYPE, shape, _IDENT)
        .map(lambda t: f"{t[0]} = lm.fragment({t[1]}, {t[2]}, role={t[3]})"),
        st.tuples(_IDENT, _EXPR, _EXPR)
        .map(lambda t: f"{t[0]} = lm.mbarrier(count={t[1]}, stages={t[2]})"),
        st.tuples(_IDENT, _EXPR, _EXPR, _EXPR)
        .map(lambda t: f"{t[0]} = lm.role(warps=range({t[1]}, {t[2]}), regs={t[3]})"),
        st.tuples(_IDENT, _EXPR, st.lists(_IDENT, max_size=3), _IDENT, _IDENT)
        .map(lambda t: f"{t[0]} = lm.pipeline(stages={t[1]}, buffers=[{', '.join(t[2])}], "
             f"producer={t[3]}, consumer={t[4]})"),
        st.tuples(_EXPR, _EXPR, _EXPR)
        .map(lambda t: f"lm.launch(grid=({t[0]}, {t[1]}), warps={t[2]})"),
        st.tuples(_IDENT, _EXPR).map(lambda t: f"{t[0]} = {t[1]}"),
    )


def _calls() -> st.SearchStrategy[str]:
    return st.one_of(
        st.tuples(_IDENT, _EXPR, _IDENT, _EXPR, _EXPR, _IDENT, _EXPR)
        .map(lambda t: f"{t[0]}[{t[1]}].load({t[2]}, at=({t[3]}, {t[4]}), "
             f"barrier={t[5]}[{t[6]}], pad=True)"),
        st.tuples(_IDENT, _EXPR, _EXPR)
        .map(lambda t: f"{t[0]}[{t[1]}].wait(parity={t[2]})"),
        st.tuples(_IDENT, _EXPR).map(lambda t: f"{t[0]}[{t[1]}].arrive()"),
        st.tuples(_IDENT, _EXPR).map(lambda t: f"{t[0]}[{t[1]}].arrive_expect_tx(bytes={t[1]})"),
        st.tuples(_IDENT, st.sampled_from(("acquire", "wait", "release", "commit")), _EXPR)
        .map(lambda t: f"{t[0]}.{t[1]}({t[2]})"),
        st.tuples(_IDENT, _IDENT, _IDENT, _EXPR)
        .map(lambda t: f"lm.mma({t[0]}, {t[1]}, {t[2]}, transpose_b=True, init=({t[3]} == 0))"),
        st.tuples(_IDENT, _EXPR, _EXPR, _IDENT)
        .map(lambda t: f"lm.store({t[0]}, at=({t[1]}, {t[2]}), src={t[3]}, mask=True)"),
        st.sampled_from(("pass", "fence_proxy()", "lm.fence_proxy()", "lm.syncwarp()",
                         "print(1)", "return", "x += 1")),
    )


@st.composite
def _body(draw, depth: int = 0) -> list[str]:
    lines: list[str] = []
    for _ in range(draw(st.integers(1, 4))):
        if depth < 3 and draw(st.integers(0, 3)) == 0:
            args = draw(st.lists(_EXPR, min_size=1, max_size=3))
            lines.append(f"for {draw(_IDENT)} in lm.range({', '.join(args)}):")
            lines.extend(f"    {line}" for line in draw(_body(depth + 1)))
        else:
            lines.append(draw(_calls()))
    return lines


@st.composite
def grammar_schedules(draw) -> str:
    workload = draw(st.sampled_from(('"gemm"', '"scale"', '"kmeans_assign"', '"nope"')))
    target = draw(st.sampled_from(('"sm_90a"', '"sm_80"', '"sm_100a"', '"sm_75"')))
    params = ", ".join(["lm", *draw(st.lists(st.sampled_from(("A", "B", "C", "X", "Y", "Q")),
                                             max_size=3, unique=True))])
    lines = ['"""fuzz"""', f"@cake.schedule(target={target}, workload={workload})",
             f"def fuzz({params}):"]
    lines += [f"    {d}" for d in draw(st.lists(_decls(), max_size=6))]
    for _ in range(draw(st.integers(0, 3))):
        lines.append(f"    with {draw(_IDENT)}:")
        lines += [f"        {line}" for line in draw(_body())]
    if len(lines) == 3:
        lines.append("    pass")
    return "\n".join(lines) + "\n"


@FUZZ
@given(text=grammar_schedules())
def test_grammar_schedules_never_crash(checker, text: str):
    check(checker, text.encode("utf-8"))


def test_grammar_reaches_past_the_front_end(checker):
    """The grammar is not all noise: some of its schedules parse (are checked by rules)."""
    parsed = 0

    @settings(max_examples=examples(50), deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(text=grammar_schedules())
    def run(text: str) -> None:
        nonlocal parsed
        parsed += check(checker, text.encode()).verdict != "error"

    run()
    assert parsed > 0


# ---- a handful through the command line ------------------------------------------------------


@settings(max_examples=examples(12), deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(SOURCES)), edits=st.lists(_byte_edit, min_size=1,
                                                               max_size=4),
       fmt=st.sampled_from(("text", "json", "sarif")))
def test_mutants_through_the_cli(tmp_path_factory: pytest.TempPathFactory, name, edits, fmt):
    path: Path = tmp_path_factory.mktemp("fuzz") / "mutant.cake"
    path.write_bytes(mutate_bytes(SOURCES[name], edits))
    result = CliRunner().invoke(app, ["check", str(path), "--format", fmt, "--rules",
                                      str(RULES), "--workloads", str(WORKLOADS)])
    assert result.exit_code in (0, 1, 2, 3), result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


# ---- (d) structured schedules: well-formed programs with random parameters -------------
#
# Every schedule here is in the language (most parse and lower), with parameters drawn
# where defects and pathologies live: odd and tiny tiles, 1..9 stages, role splits of
# 1..8 warps, one to three consumers, raw barriers or a pipeline, loop bounds that are
# empty, reversed, off by one or huge, parities and counts that are wrong, giant
# integers. The run time of each check is bounded by the analysis' event bounds, which
# count work, not seconds; the test asserts the checker returns a sane result and stays
# within them.

_TILE = st.sampled_from((1, 2, 3, 7, 16, 32, 64, 128, 256))
_BOUND = st.sampled_from(("lm.cdiv(lm.K, BK)", "lm.K // BK", "lm.cdiv(lm.K, BK) + 1", "0",
                          "1", "lm.cdiv(lm.K, BK) - 1", "2 ** 20", "(1 << 39)", "-3"))
_PARITY = st.sampled_from(("(k // S) % 2", "(k // S + 1) % 2", "k % 2", "0", "1",
                           "(lm.min(k, 3) // S) % 2", "(k // S) % 3"))


@st.composite
def structured_schedules(draw) -> str:
    bm, bn, bk = draw(_TILE), draw(_TILE), draw(_TILE)
    stages = draw(st.integers(1, 9))
    loader_warps = draw(st.integers(1, 8))
    consumers = draw(st.integers(1, 3))
    math_warps = draw(st.sampled_from((1, 2, 4, 8)))
    raw = draw(st.booleans())
    stop_p, stop_c = draw(_BOUND), draw(_BOUND)
    sizes = draw(st.sampled_from(("", ', sizes={"K": 4096}', ', sizes={"K": 100000}',
                                  ', divisible={"K": 64}', ', sizes={"K": 999999999999}')))
    warps = loader_warps + consumers * math_warps
    lines = ['"""structured fuzz"""',
             f'@cake.schedule(target="sm_90a", workload="gemm"{sizes})',
             "def fuzz(lm, A, B, C):",
             f"    BM, BN, BK, S = {bm}, {bn}, {bk}, {stages}",
             f"    lm.launch(grid=(lm.cdiv(lm.M, BM), lm.cdiv(lm.N, BN)), warps={warps})",
             '    a_s = lm.smem("bf16", (BM, BK), stages=S)',
             '    b_s = lm.smem("bf16", (BN, BK), stages=S)',
             f"    loader = lm.role(warps=range(0, {loader_warps}))"]
    start = loader_warps
    for i in range(consumers):
        lines.append(f"    math{i} = lm.role(warps=range({start}, {start + math_warps}))")
        lines.append(f'    acc{i} = lm.fragment("f32", (BM, BN), role=math{i})')
        start += math_warps
    count = draw(st.sampled_from((1, consumers * math_warps, 4, 3)))
    if raw:
        lines += ["    full = lm.mbarrier(count=1, stages=S)",
                  f"    empty = lm.mbarrier(count={count}, stages=S)"]
    else:
        lines.append("    ring = lm.pipeline(stages=S, buffers=[a_s, b_s], producer=loader, "
                     "consumer=math0)")
    lines += ["    m0, n0 = lm.block(0) * BM, lm.block(1) * BN", "    with loader:",
              f"        for k in lm.range(0, {stop_p}):"]
    if raw:
        lines += [f"            empty[k % S].wait(parity={draw(_PARITY)})",
                  "            full[k % S].arrive_expect_tx(bytes=lm.nbytes(a_s, b_s))",
                  "            a_s[k % S].load(A, at=(m0, k * BK), barrier=full[k % S], "
                  "pad=True)",
                  "            b_s[k % S].load(B, at=(n0, k * BK), barrier=full[k % S], "
                  "pad=True)"]
    else:
        lines += ["            ring.acquire(k)",
                  "            a_s[ring.stage(k)].load(A, at=(m0, k * BK), "
                  "barrier=ring.full(k), pad=True)",
                  "            b_s[ring.stage(k)].load(B, at=(n0, k * BK), "
                  "barrier=ring.full(k), pad=True)"]
    for i in range(consumers if raw else 1):
        lines += [f"    with math{i}:", f"        for k in lm.range(0, {stop_c}):"]
        if raw:
            lines += [f"            full[k % S].wait(parity={draw(_PARITY)})",
                      f"            lm.mma(acc{i}, a_s[k % S], b_s[k % S], transpose_b=True, "
                      "init=(k == 0))",
                      "            empty[k % S].arrive()"]
        else:
            lines += ["            ring.wait(k)",
                      f"            lm.mma(acc{i}, a_s[ring.stage(k)], b_s[ring.stage(k)], "
                      "transpose_b=True, init=(k == 0))",
                      "            ring.release(k)"]
        lines.append(f"        lm.store(C, at=(m0, n0), src=acc{i}, mask=True)")
    return "\n".join(lines) + "\n"


@settings(max_examples=max(examples(40), EXAMPLES // 4), deadline=None, derandomize=True,
          database=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=structured_schedules())
def test_structured_schedules_are_checked_within_bounds(checker, text: str):
    from cakegov.analysis.protocol import Bounds
    from cakegov.ir.parse import parse_bytes

    result = check(checker, text.encode("utf-8"))
    assert result.verdict in ("clean", "rejected", "incomplete", "error")
    if result.verdict == "error":
        return
    ctx = checker.context(parse_bytes(text.encode(), checker.vocabulary), "fuzz.cake")
    protocol = ctx.protocol
    if protocol is not None:
        bounds = Bounds()
        assert all(r.program.events <= bounds.max_confirm_events for r in protocol.runs)
        assert len(protocol.runs) <= bounds.max_runs
        # a rejection by the protocol rules is always backed by a witness
        for f in result.findings:
            if f.severity == "blocking" and f.code.startswith("P"):
                assert f.evidence.get("witness"), (f.code, f.message)
