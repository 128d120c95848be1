"""The parent of a proposal survives hostile sizes (issue 42, item 3): each ends in a clear
blocked verdict or a usage error (exit 2), with no traceback and bounded memory."""

from __future__ import annotations

import resource
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cakegov.cli import app

from .test_propose import MOTIVATING, propose, rule_file, template  # noqa: F401


@pytest.fixture
def project(template, tmp_path, monkeypatch):  # noqa: F811
    root = tmp_path / "project"
    shutil.copytree(template, root)
    monkeypatch.chdir(root)
    return root


def _run(*args: str):
    result = CliRunner().invoke(app, ["propose-rule", *args, "--no-record", "--jobs", "2",
                                      "--gpu", "off", "--corpus", "corpus/invalid/gemm"])
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        result.output
    assert "Traceback" not in result.output
    return result


def test_a_100_mb_proposal_file_is_a_usage_error_read_no_further(project, tmp_path):
    path = tmp_path / "huge.py"
    with path.open("wb") as f:
        f.write(b'"""doc"""\nCODE = "T970"\n')
        f.truncate(100 << 20)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = _run(str(path))
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak) / 1024
    assert result.exit_code == 2, result.output
    assert "huge.py" in result.output and "over 1048576 bytes" in " ".join(
        result.output.split())
    assert grown_mib < 50


def test_a_plugin_that_is_not_utf8_is_a_usage_error(project, tmp_path):
    path = tmp_path / "latin.py"
    path.write_bytes(b'"""Caf\xe9."""\nCODE = "T971"\n')
    result = _run(str(path))
    assert result.exit_code == 2, result.output
    assert "latin.py" in result.output and "UTF-8" in result.output


@pytest.mark.parametrize("expr", ["(" * 100_000 + "1" + ")" * 100_000,
                                  "-" * 100_000 + "1", "[" * 100_000 + "]" * 100_000])
def test_a_deeply_nested_plugin_is_a_usage_error_or_a_block(project, tmp_path, expr):
    path = rule_file(tmp_path / "deep.py", "T972", "deep", "yield from ()\n",
                     motivated_by=(MOTIVATING,))
    path.write_text(path.read_text() + f"\nX = {expr}\n")
    result = _run(str(path))
    assert result.exit_code in (1, 2), result.output
    if result.exit_code == 2:
        assert "deep.py" in result.output


@pytest.mark.slow
def test_a_plugin_yielding_a_million_findings_is_blocked_and_the_parent_stays_small(
        project, tmp_path):
    path = rule_file(tmp_path / "flood.py", "T973", "flood", """\
        for i in range(1_000_000):
            yield ctx.finding(None, f"finding {i}")
        """, motivated_by=(MOTIVATING,))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    code, data, md = propose(str(path), "--no-record", "--corpus", "corpus/invalid/gemm")
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak) / 1024
    assert code == 1, md
    kinds = {b["kind"] for b in data["blockers"] if b.get("rule") == "T973"}
    assert kinds & {"rule-output", "rule-hang", "rule-memory", "rule-crash"}, data["blockers"]
    assert grown_mib < 200


@pytest.mark.slow
def test_a_deeply_nested_schedule_in_the_corpus_is_judged_and_blocks(project):
    case = project / "corpus" / "invalid" / "gemm" / "deep.cake"
    base = (project / "corpus" / "invalid" / "gemm" / "smem_over_capacity.cake").read_text()
    case.write_text(base.replace("    BM, BN", "    X = " + "-" * 100_000 + "1\n    BM, BN", 1))
    result = _run()
    assert result.exit_code == 1, result.output
    code, data, _ = propose("--no-record", "--corpus", "corpus/invalid/gemm")
    assert code == 1
    assert "corpus/invalid/gemm/deep.cake" in {c["path"] for c in data["contract_changes"]}


@pytest.mark.slow
def test_hundreds_of_long_findings_are_capped_counted_and_bounded(project, tmp_path,
                                                                 monkeypatch):
    """A rule yielding 300 findings of 5,000 characters per schedule: 20 per schedule are
    kept, each text cut at 1,000 characters, the dropped count is in the notes; past the
    flips' size bound (lowered here so a small corpus reaches it) a `size` blocker names
    the rule, and the reports stay small."""
    from cakegov.govern import verdict

    monkeypatch.setattr(verdict, "FLIPS_CAP", 20_000)
    path = rule_file(tmp_path / "loud.py", "T974", "loud", """\
        for i in range(300):
            yield ctx.finding(None, f"finding {i} " + "x" * 5000)
        """, motivated_by=(MOTIVATING,))
    code, data, md = propose(str(path), "--no-record", "--corpus", "corpus/invalid/gemm")
    assert code == 1, md
    note = next(n for n in data["notes"] if n.startswith("candidate: T974 yielded more"))
    schedules = int(note.split(" on ")[1].split(" ")[0])
    assert f"{280 * schedules} over the cap were dropped" in note
    for flip in data["flips"]:
        loud = [f for f in flip["new_findings"] if f["code"] == "T974"]
        assert len(loud) <= 20
        assert all(len(f["message"]) < 1100 and "[cut:" in f["message"] for f in loud)
    [size] = [b for b in data["blockers"] if b["kind"] == "size"]
    assert size["rule"] == "T974" and "T974 (" in size["message"]
    assert all(len(f["new_findings"]) <= 5 for f in data["flips"])
    total = sum(p.stat().st_size for p in Path("reports").iterdir())
    assert total < 2 << 20, total
