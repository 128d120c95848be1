"""`cakegov check` remembers the output of plain, piped checks by the content of every
input (cakegov/check/result_cache.py): a repeat is answered from the cache, and any change
to a schedule, the rulebook, the workloads, the options or the environment that reaches
the output is a miss."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cakegov.check.result_cache import FORMATS, Recorder, plain_check

from .conftest import CORPUS, ROOT

VALID = CORPUS / "valid" / "scale" / "ring_1stage.cake"
INVALID = next((CORPUS / "invalid" / "scale").glob("*.cake"))
SENTINEL = "answered from the cache\n"


def run(*args: str, cache: Path, cwd: Path = ROOT, **env: str):
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith("CAKEGOV_") or k == "CAKEGOV_DEBUG"}
    environ.update(CAKEGOV_CACHE_DIR=str(cache), **env)
    return subprocess.run([sys.executable, "-m", "cakegov", *args], cwd=cwd, env=environ,
                          capture_output=True, text=True, timeout=300, check=False)


def entries(cache: Path) -> list[Path]:
    return sorted((cache / "check").rglob("*.json")) if (cache / "check").exists() else []


def forge(cache: Path) -> None:
    """Replace the stored output of every entry by the sentinel, so a hit shows."""
    for path in entries(cache):
        data = json.loads(path.read_text())
        data["value"]["stdout"] = SENTINEL
        path.write_text(json.dumps(data))


@pytest.fixture
def stored(tmp_path) -> Path:
    """A cache holding the result of `check VALID`, forged to print the sentinel."""
    cache = tmp_path / "cache"
    first = run("check", str(VALID), cache=cache)
    assert first.returncode == 0 and "clean:" in first.stdout
    assert len(entries(cache)) == 1
    forge(cache)
    return cache


def test_a_repeat_is_answered_from_the_cache_with_the_same_bytes(tmp_path):
    cache = tmp_path / "cache"
    first = run("check", "-f", "json", str(INVALID), cache=cache)
    second = run("check", "-f", "json", str(INVALID), cache=cache)
    assert first.returncode == second.returncode == 1
    assert (first.stdout, first.stderr) == (second.stdout, second.stderr)
    assert json.loads(second.stdout)["results"][0]["verdict"] == "rejected"
    assert len(entries(cache)) == 1


def test_the_stored_entry_is_what_is_served(stored):
    again = run("check", str(VALID), cache=stored)
    assert again.stdout == SENTINEL and again.returncode == 0


@pytest.mark.slow
def test_a_changed_schedule_is_a_miss(stored, tmp_path):
    copy = tmp_path / "copy.cake"
    shutil.copy(VALID, copy)
    assert run("check", str(copy), cache=stored).stdout != SENTINEL  # another path
    first = run("check", str(copy), cache=stored)
    copy.write_text(copy.read_text() + "\n# a comment moves nothing but the bytes\n")
    after = run("check", str(copy), cache=stored)
    assert "clean:" in after.stdout and first.stdout == after.stdout
    assert len(entries(stored)) == 3  # VALID, copy before and after the edit


@pytest.mark.slow
@pytest.mark.parametrize("args", [
    ("check", "-f", "json", str(VALID)),
    ("check", "--preview", str(VALID)),
    ("check", "-q", str(VALID)),
])
def test_other_options_are_other_entries(stored, args):
    assert run(*args, cache=stored).stdout != SENTINEL


@pytest.mark.slow
def test_a_changed_rule_plugin_is_a_miss(stored, tmp_path):
    rules = tmp_path / "rules"
    shutil.copytree(ROOT / "rules", rules)
    plugin = rules / "checks" / "grid-coverage.py"
    plugin.write_text(plugin.read_text() + "\n# an edit\n")
    result = run("check", str(VALID), cache=stored, CAKEGOV_RULES=str(rules))
    assert result.stdout != SENTINEL and "clean:" in result.stdout


@pytest.mark.slow
def test_the_environment_that_reaches_the_output_is_part_of_the_key(stored):
    moved = run("check", "-f", "json", str(VALID), cache=stored)
    forge(stored)
    docs = run("check", "-f", "json", str(VALID), cache=stored,
               CAKEGOV_DOC_BASE="https://example.org/docs/")
    assert docs.stdout != SENTINEL and moved.returncode == docs.returncode == 0


@pytest.mark.slow
@pytest.mark.parametrize("args", [
    ("check", "--no-cache", str(VALID)),
    ("check", "--select", "R001", str(VALID)),
    ("check", "--target", "sm_90a", str(VALID)),
    ("check", "-", str(VALID)),
])
def test_other_command_lines_neither_read_nor_write_the_cache(stored, args):
    before = entries(stored)
    result = run(*args, cache=stored)
    assert result.stdout != SENTINEL
    assert entries(stored) == before


@pytest.mark.slow
def test_the_switch_turns_it_off(stored):
    result = run("check", str(VALID), cache=stored, CAKEGOV_NO_CACHE="1")
    assert result.stdout != SENTINEL and "clean:" in result.stdout


@pytest.mark.slow
def test_a_corrupt_entry_is_a_miss(stored):
    for path in entries(stored):
        path.write_text("{not json")
    result = run("check", str(VALID), cache=stored)
    assert "clean:" in result.stdout and result.returncode == 0


def test_an_unwritable_cache_costs_nothing_but_speed(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    result = run("check", str(VALID), cache=blocker)
    assert result.returncode == 0 and "clean:" in result.stdout


def test_usage_errors_are_not_served_for_missing_files(tmp_path):
    cache = tmp_path / "cache"
    result = run("check", str(tmp_path / "absent.cake"), cache=cache)
    assert result.returncode == 2 and entries(cache) == []


def test_an_output_file_is_written_and_nothing_is_stored(tmp_path):
    cache = tmp_path / "cache"
    out = tmp_path / "report.json"
    result = run("check", "-f", "json", "-o", str(out), str(VALID), cache=cache)
    assert result.returncode == 0 and json.loads(out.read_text())["results"]
    assert entries(cache) == []


# ---- the plain form ---------------------------------------------------------------------

def test_plain_forms():
    assert plain_check(["check", "a.cake"]).paths == ("a.cake",)
    assert plain_check(["check", "-f", "json", "a", "b"]).fmt == "json"
    assert plain_check(["check", "--format=sarif", "a"]).fmt == "sarif"
    assert plain_check(["check", "--preview", "-q", "a"]).preview
    for argv in (["check"], ["check", "-"], ["check", "-o", "x", "a"], ["check", "-fjson", "a"],
                 ["check", "-f", "yaml", "a"], ["lower", "a"], [], ["check", "--", "a"]):
        assert plain_check(argv) is None, argv


@given(st.lists(st.sampled_from(["check", "a.cake", "dir", "-f", "--format", "json", "text",
                                 "--preview", "-q", "--quiet", "-o", "--select", "-", "",
                                 "--format=json", "--no-cache", "--rules"]), max_size=8))
def test_a_plain_form_accounts_for_every_token(argv):
    plain = plain_check(argv)
    if plain is None:
        return
    assert argv[0] == "check" and plain.fmt in FORMATS and plain.paths
    assert not any(p.startswith("-") or not p for p in plain.paths)
    flags = {"--preview", "-q", "--quiet"}
    # every token is a path, a flag, or a format option with its value
    rest = [t for t in argv[1:] if t not in plain.paths and t not in flags]
    assert all(t in ("-f", "--format") or t in FORMATS or t.startswith("--format=")
               for t in rest)


def test_the_recorder_keeps_what_passes_through(capsys):
    import sys as system

    rec = Recorder(system.stdout)
    rec.write("one ")
    print("two", file=rec)
    assert rec.text() == "one two\n"
    assert capsys.readouterr().out == "one two\n"
