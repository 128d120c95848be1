"""Malformed, hostile and absurd schedules through the CLI: every one is a located input
error with exit code 2, never an internal error (101) and never a traceback, and nothing
in a schedule is ever executed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cakegov.cli import app

from .conftest import RULES, WORKLOADS
from .samples import GEMM, SCALE

STORE = "        lm.store(Y, at=(m0, n0), src=y, mask=True)\n"
TILE = "    TM, TN = 32, 256\n"


def edit(base: str, old: str, new: str) -> str:
    assert base.count(old) == 1, old
    return base.replace(old, new)


def in_body(stmt: str) -> str:
    """SCALE with `stmt` (indented for the role body) inserted before the store."""
    return edit(SCALE, STORE, "".join(f"        {line}\n" for line in stmt.splitlines())
                + STORE)


def at_top(stmt: str) -> str:
    """SCALE with `stmt` inserted at the top of the schedule function."""
    return edit(SCALE, TILE, TILE + "".join(f"    {line}\n" for line in stmt.splitlines()))


def cli(*args: str):
    result = CliRunner().invoke(app, [*args, "--rules", str(RULES), "--workloads",
                                      str(WORKLOADS)])
    assert "Traceback" not in result.output
    if result.exception is not None:
        assert isinstance(result.exception, SystemExit), repr(result.exception)
    return result


def check_file(path: Path, fmt: str = "text"):
    return cli("check", str(path), "--format", fmt)


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


# name -> (source, code, the text on the offending line, a fragment of the message)
CASES: dict[str, tuple[str, str, str, str]] = {
    "syntax-error": (edit(SCALE, TILE, "    TM, TN = 32, 256 +\n"), "E100", "256 +",
                     "syntax error"),
    "nul-byte": (edit(SCALE, "TM, TN = 32", "TM, TN =\x00 32"), "E101", "TM, TN =",
                 "NUL byte"),
    "import": (at_top("import os"), "E102", "import os", "imports are not part"),
    "import-at-module-level": ("from os import system\n" + SCALE, "E102", "from os import",
                               "imports are not part"),
    "while": (in_body("while True:\n    pass"), "E102", "while True", "while loops"),
    "lambda": (edit(SCALE, "TM, TN = 32, 256", "TM, TN = 32, lambda: 256"), "E102",
               "lambda", "lambda expressions are not allowed"),
    "comprehension": (edit(SCALE, "TM, TN = 32, 256", "TM, TN = 32, [i for i in X]"), "E102",
                      "for i in X", "comprehensions are not allowed"),
    "print-call": (in_body("print(1)"), "E102", "print(1)", "calls are allowed"),
    "open-call": (edit(SCALE, "TM, TN = 32, 256", "TM, TN = 32, open('x')"), "E102",
                  "open('x')", "may be called in an index expression"),
    "attribute-access": (edit(SCALE, "TM, TN = 32, 256", "TM, TN = 32, X.shape"), "E102",
                         "X.shape", "attribute access is limited"),
    "os-system": (in_body("os.system('true')"), "E102", "os.system",
                  "`os.system(...)` is not part of the schedule language"),
    "if": (in_body("if 1:\n    pass"), "E102", "if 1:", "conditionals are not part"),
    "try": (in_body("try:\n    pass\nexcept Exception:\n    pass"), "E102", "try:",
            "try blocks are not allowed"),
    "nested-def": (at_top("def helper():\n    pass"), "E102", "def helper",
                   "nested functions are not allowed"),
    "global": (at_top("global TM"), "E102", "global TM", "global is not allowed"),
    "stages-string": (edit(SCALE, 'lm.smem("f32", (TM, TN))',
                           'lm.smem("f32", (TM, TN), stages="four")'), "E103", "stages=",
                      "`stages` must be an integer, got 'four'"),
    "dtype-typo": (edit(SCALE, 'lm.smem("f32"', 'lm.smem("fp32"'), "E103", '"fp32"',
                   "unknown dtype 'fp32' (did you mean 'f32'?)"),
    "shape-float": (edit(SCALE, 'lm.smem("f32", (TM, TN))', 'lm.smem("f32", (TM, 2.5))'),
                    "E103", "2.5", "a shape extent must be an integer, got 2.5"),
    "tensor-for-fragment": (edit(GEMM, "lm.mma(acc,", "lm.mma(A,"), "E103", "lm.mma(A,",
                            "argument `acc` of `lm.mma` expects a register fragment; `A` is a "
                            "global tensor"),
    "tensor-for-operand": (edit(SCALE, "lm.elementwise(y,", "lm.elementwise(X,"), "E103",
                           "lm.elementwise(X,", "`X` is a global tensor"),
    "loop-bound-power": (in_body("for i in lm.range(0, 10**30):\n    pass"), "E102",
                         "10**30", "operator `**` is not allowed"),
    "parity-bitand": (in_body("full[0].wait(parity=(TM // 32) & 1)"), "E102", "& 1",
                      "operator `&` is not allowed in index expressions (they use +, -, *, "
                      "// and %): `x & 1` is `x % 2`"),
    "huge-literal": (edit(SCALE, "TM, TN = 32, 256", "TM, TN = 32, " + "9" * 40), "E104",
                     "9999", "out of range"),
    "huge-loop-bound": (in_body(f"for i in lm.range(0, {2**40}):\n    pass"), "E104",
                        str(2**40), "out of range"),
    "negative-step": (in_body("for i in lm.range(0, 10, -1):\n    pass"), "E103", "-1)",
                      "the loop step must be positive"),
    "zero-step": (in_body("for i in lm.range(0, 10, 0):\n    pass"), "E103", "10, 0)",
                  "the loop step must be positive"),
    "500-nested-parentheses": (edit(SCALE, "TM, TN = 32, 256",
                                    "TM, TN = 32, " + "(" * 500 + "256" + ")" * 500),
                               "E100", "TM, TN = 32, (((", "too many nested parentheses"),
    "100-nested-loops": (in_body("".join("    " * i + f"for i{i} in lm.range(0, 2):\n"
                                         for i in range(100)) + "    " * 100 + "pass"),
                         "E100", "for i98 ", "too many levels of indentation"),
    "70-nested-loops": (in_body("".join("    " * i + f"for i{i} in lm.range(0, 2):\n"
                                        for i in range(70)) + "    " * 70 + "pass"),
                        "E104", "for i62 ", "nesting deeper than 64 levels"),
    "empty-file": ("", "E105", "", "no schedule"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_input_is_a_located_input_error(name: str, tmp_path: Path):
    source, code, needle, fragment = CASES[name]
    path = tmp_path / f"{name}.cake"
    path.write_text(source, encoding="utf-8")
    expected_line = line_of(source, needle) if needle else 1

    text = check_file(path)
    assert text.exit_code == 2, text.output
    assert f"error[{code}]: " in text.output
    assert fragment in text.output
    assert f"--> {path}:{expected_line}:" in text.output

    report = json.loads(check_file(path, "json").stdout)
    (result,) = report["results"]
    assert result["verdict"] == "error"
    (finding,) = result["findings"]
    assert finding["code"] == code and finding["authority"] == "input"
    assert finding["span"]["line"] == expected_line
    assert finding["span"]["col"] >= 1


def test_the_unmodified_bases_are_accepted_input(tmp_path: Path):
    """The cases above fail because of their edit, not because the base is malformed."""
    for name, source in (("scale", SCALE), ("gemm", GEMM)):
        path = tmp_path / f"{name}.cake"
        path.write_text(source, encoding="utf-8")
        report = json.loads(check_file(path, "json").stdout)
        assert report["results"][0]["verdict"] in ("clean", "rejected", "incomplete")
        assert all(f["authority"] != "input" for f in report["results"][0]["findings"])


def test_deep_loop_nest_with_large_trip_counts_is_checked_in_bounded_time(checker):
    """40 nested loops of 1024 iterations each: analyses must bound their work (by
    counting events, never by a clock: a hang shows as a test that does not finish)."""
    loops = "".join("    " * i + f"for i{i} in lm.range(0, 1024):\n" for i in range(40))
    source = in_body(loops + "    " * 40 + "full[0].wait(parity=i39 % 2)")
    result = checker.check_bytes(source.encode(), "deep.cake")
    assert result.verdict != "error"
    assert not [f for f in result.findings if f.authority == "internal"]


def test_non_utf8_byte_is_located_by_character_column(tmp_path: Path):
    path = tmp_path / "latin1.cake"
    source = edit(SCALE, TILE, "    TM, TN = 32, 256  # café \xff\n")
    path.write_bytes(source.encode("utf-8").replace("\xff".encode(), b"\xff"))
    result = check_file(path)
    assert result.exit_code == 2
    # "    TM, TN = 32, 256  # café " is 29 characters (31 bytes): the byte is column 30
    assert "error[E101]: invalid UTF-8 byte 0xff at line 5, column 30" in result.output
    assert f"--> {path}:5:30" in result.output


def test_ten_megabyte_file_is_refused_quickly(tmp_path: Path):
    path = tmp_path / "huge.cake"
    path.write_text(SCALE + ("#" * 1023 + "\n") * 10 * 1024, encoding="utf-8")
    assert path.stat().st_size > 10_000_000
    result = check_file(path)
    assert result.exit_code == 2
    assert "error[E104]: file is larger than 1,000,000 bytes" in result.output
    assert f"--> {path}:1:1" in result.output


def test_directory_named_like_a_schedule(tmp_path: Path):
    folder = tmp_path / "folder.cake"
    folder.mkdir()
    result = check_file(folder)
    assert result.exit_code == 2
    assert "no *.cake schedules found" in result.output


def test_unreadable_path_inside_checker_is_an_input_error(checker, tmp_path: Path):
    folder = tmp_path / "folder.cake"
    folder.mkdir()
    result = checker.check_path(folder)
    assert result.verdict == "error"
    (finding,) = result.findings
    assert finding.code == "E106" and finding.authority == "input"
    assert finding.message == "cannot read file: not a regular file"
    assert finding.file == str(folder)


def test_device_file_is_not_read(checker):
    """`/dev/zero` never ends: it is refused, not read until memory runs out."""
    zero = Path("/dev/zero")
    if not zero.exists():
        pytest.skip("no /dev/zero here")
    result = checker.check_path(zero)
    assert [f.code for f in result.findings] == ["E106"]


def test_missing_file(tmp_path: Path):
    missing = tmp_path / "nope.cake"
    result = check_file(missing)
    assert result.exit_code == 2
    assert f"no such file or directory: {missing}" in result.output


# ---- nothing in a schedule is executed -----------------------------------------------------


def _hostile_sources(marker: Path) -> dict[str, str]:
    touch = f"__import__('os').system('touch {marker}')"
    return {
        "index-expression": edit(SCALE, "TM, TN = 32, 256", f"TM, TN = 32, {touch}"),
        "statement-in-body": in_body(touch),
        "statement-at-top": at_top(touch),
        "module-level": f"{touch}\n{SCALE}",
        "decorator-argument": edit(SCALE, 'target="sm_90a"', f"target={touch}"),
        "second-decorator": edit(SCALE, "@cake.schedule", f"@{touch}\n@cake.schedule"),
        "default-argument": edit(SCALE, "def scale_tile(lm, X, Y):",
                                 f"def scale_tile(lm, X, Y={touch}):"),
        "class-body": f"class Evil:  # pwned_\n    {touch}\n{SCALE}",
        "loop-bound": in_body(f"for i in lm.range(0, {touch}):\n    pass"),
    }


@pytest.mark.parametrize("where", sorted(_hostile_sources(Path("x"))))
def test_schedules_are_never_executed(where: str, tmp_path: Path):
    marker = Path("/tmp") / f"pwned_{uuid.uuid4().hex}"
    source = _hostile_sources(marker)[where]
    path = tmp_path / "hostile.cake"
    path.write_text(source, encoding="utf-8")
    try:
        result = check_file(path)
        assert result.exit_code == 2, result.output
        assert "error[E10" in result.output
        assert f"--> {path}:{line_of(source, 'pwned_')}:" in result.output
        assert not marker.exists(), f"{where}: the schedule was executed"
    finally:
        marker.unlink(missing_ok=True)


# ---- the real console script -----------------------------------------------------------------


def _console_script() -> list[str]:
    beside = Path(sys.executable).with_name("cakegov")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("cakegov")
    if found:
        return [found]
    pytest.skip("the `cakegov` console script is not installed")
    raise AssertionError


def test_console_script_exit_codes_and_no_traceback(tmp_path: Path):
    marker = Path("/tmp") / f"pwned_{uuid.uuid4().hex}"
    hostile = tmp_path / "hostile.cake"
    hostile.write_text(_hostile_sources(marker)["statement-in-body"], encoding="utf-8")
    deep = tmp_path / "deep.cake"
    deep.write_text(CASES["500-nested-parentheses"][0], encoding="utf-8")
    binary = tmp_path / "binary.cake"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe")
    base = [*_console_script(), "check", "--rules", str(RULES), "--workloads", str(WORKLOADS)]
    try:
        for path, code in ((hostile, "E102"), (deep, "E100"), (binary, "E101")):
            for fmt in ("text", "json", "sarif"):
                proc = subprocess.run([*base, "--format", fmt, str(path)], capture_output=True,
                                      text=True, timeout=120, check=False)
                assert proc.returncode == 2, (path, fmt, proc.stdout, proc.stderr)
                assert "Traceback" not in proc.stdout + proc.stderr
                assert code in proc.stdout
        missing = subprocess.run([*base, str(tmp_path / "missing.cake")], capture_output=True,
                                 text=True, timeout=120, check=False)
        assert missing.returncode == 2
        assert "no such file or directory" in missing.stderr
        assert "Traceback" not in missing.stdout + missing.stderr
        assert not marker.exists()
    finally:
        marker.unlink(missing_ok=True)


RING = (Path(__file__).resolve().parent.parent / "corpus" / "valid" / "scale"
        / "ring_1stage.cake").read_text(encoding="utf-8")
RING_TILES = "    TM, TN, TILES = 16, 256, 4\n"


def test_billion_iteration_ring_is_incomplete_not_a_hang(checker):
    """A pipeline loop of 10^9 iterations: the iteration window may not walk the loop
    value by value to look for loops nested in it (there are none), and the unrolling
    bound makes the verdict `incomplete`, never `clean`."""
    source = edit(RING, RING_TILES, "    TM, TN, TILES = 16, 256, 1000000000\n")
    result = checker.check_bytes(source.encode(), "ring_1e9.cake")
    assert result.verdict == "incomplete"
    assert not [f for f in result.findings if f.authority == "internal"]


def test_fragment_past_the_register_file_is_an_analysis_bound_not_a_crash(checker):
    """A 65536 x 65536 fragment (16 GiB of registers): the footprint computation would
    allocate tens of GiB; it stops at its element bound instead (no internal error)."""
    source = edit(RING, '    y = lm.fragment("f32", (TM, TN), role=worker)\n',
                  '    y = lm.fragment("f32", (65536, 65536), role=worker)\n')
    result = checker.check_bytes(source.encode(), "huge_fragment.cake")
    assert result.verdict in ("rejected", "incomplete")
    assert not [f for f in result.findings if f.authority == "internal"]


def test_utf8_byte_order_mark_is_accepted(checker):
    """Editors that write a UTF-8 byte-order mark: Python accepts such a source file, and
    so does the checker, with the same result and the same columns as without it."""
    plain = checker.check_bytes(RING.encode(), "ring.cake")
    marked = checker.check_bytes(b"\xef\xbb\xbf" + RING.encode(), "ring.cake")
    assert plain.verdict == marked.verdict == "clean"
    broken = edit(RING, RING_TILES, "    TM, TN, TILES = 16, 256, 4 +\n")
    a = checker.check_bytes(broken.encode(), "b.cake").findings[0]
    b = checker.check_bytes(b"\xef\xbb\xbf" + broken.encode(), "b.cake").findings[0]
    assert (a.code, a.span) == (b.code, b.span)


@pytest.mark.slow
def test_many_copies_into_one_stage_are_bounded_work(checker):
    """Forty bulk copies into one stage per iteration: ~1,800 pairwise races. One
    execution records at most MAX_ANOMALIES of them, and the repair search stops at its
    counted bounds, so the verdict (a rejection with a witness) comes without the
    quadratic blow-up (100 copies took 7 minutes and 7 GB before the bounds)."""
    from cakegov.analysis.execute import MAX_ANOMALIES
    from cakegov.ir.parse import parse_bytes

    load = ("            x_s[ring.stage(t)].load(X, at=(m0 + t * TM, n0), "
            "barrier=ring.full(t), pad=True)\n")
    source = edit(RING, load, load * 40)
    result = checker.check_bytes(source.encode(), "copies.cake")
    assert result.verdict == "rejected"
    assert all(f.authority != "internal" for f in result.findings)
    assert any(f.evidence.get("witness") or f.evidence.get("anomalies")
               for f in result.findings if f.code.startswith("P"))
    ctx = checker.context(parse_bytes(source.encode(), checker.vocabulary), "copies.cake")
    assert ctx.protocol.runs
    assert all(len(r.outcome.anomalies) <= MAX_ANOMALIES for r in ctx.protocol.runs)


def test_fifo_and_device_links_are_refused_without_reading(tmp_path: Path):
    """A FIFO (the text report re-read the file and blocked forever) and a link to
    /dev/zero (an unbounded read, then MemoryError) are E106, exit 2, in every format."""
    fifo = tmp_path / "fifo.cake"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.cake"
    zero.symlink_to("/dev/zero")
    for path in (fifo, zero):
        for fmt in ("text", "json"):
            result = check_file(path, fmt)
            assert result.exit_code == 2, (path, fmt, result.output)
            assert "E106" in result.output and "not a regular file" in result.output


def test_output_never_replaces_an_input_and_writes_through_links(tmp_path: Path):
    good = tmp_path / "good.cake"
    good.write_text(SCALE, encoding="utf-8")
    refused = cli("check", str(good), "-o", str(good))
    assert refused.exit_code == 2 and "one of the schedules being checked" in refused.output
    assert good.read_text(encoding="utf-8") == SCALE
    target = tmp_path / "report.txt"
    link = tmp_path / "report.link"
    link.symlink_to(target.name)
    assert cli("check", str(good), "-o", str(link)).exit_code in (0, 1, 3)
    assert link.is_symlink() and "checked 1 schedule" in target.read_text(encoding="utf-8")


def test_a_rules_directory_without_rules_is_a_usage_error(tmp_path: Path):
    """`--rules /tmp` loaded nothing and called every schedule clean."""
    good = tmp_path / "good.cake"
    good.write_text(SCALE, encoding="utf-8")
    result = CliRunner().invoke(app, ["check", str(good), "--rules", str(tmp_path),
                                      "--workloads", str(WORKLOADS)])
    assert result.exit_code == 2 and "is not a rulebook" in result.output


def test_a_path_the_file_system_refuses_is_a_usage_error():
    """A 5,000-character file name (ENAMETOOLONG) is the input's problem: exit 2, the
    name shortened, no traceback, not an internal error."""
    proc = subprocess.run([*_console_script(), "check", "--rules", str(RULES), "--workloads",
                           str(WORKLOADS), "a" * 5000 + ".cake"], capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "File name too long" in proc.stderr and "(5005 characters)" in proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr


def test_stdin_filename_with_control_characters_is_refused():
    """The name is printed in the report and on the terminal: an escape sequence there
    would clear or rewrite the reader's screen."""
    result = CliRunner().invoke(app, ["check", "-", "--stdin-filename", "evil\x1b[2J.cake",
                                      "--rules", str(RULES), "--workloads", str(WORKLOADS)],
                                input=SCALE)
    assert result.exit_code == 2 and "control characters" in result.output
