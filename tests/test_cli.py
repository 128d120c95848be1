"""The command line fails loudly: unknown selections, standard input, preview rules that
would have fired, the rule scaffold, output file permissions and help text."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from cakegov.check.rulebook import Rulebook
from cakegov.check.runner import Checker
from cakegov.check.select import resolve, split_selectors
from cakegov.cli import app
from cakegov.corpus.labels import read_label_file
from cakegov.corpus.workloads import load_workloads
from cakegov.fsio import atomic_write
from cakegov.govern.inputs import _unproposed
from cakegov.govern.models import ProposedFile

from .conftest import CORPUS, ROOT, RULES, WORKLOADS
from .profiles import examples

VALID = CORPUS / "valid" / "scale" / "ring_1stage.cake"
PROPOSAL = ROOT / "examples" / "proposals" / "fragment-owner.py"
MOTIVATING = (ROOT / "examples" / "proposals" / "corpus" / "invalid" / "scale"
              / "fragment_written_by_loader.cake")
BOOK = Rulebook.load(RULES)
RULE_KEYS = [(r.code, r.name) for r in BOOK.rules]


def cli(*args: str, input: bytes | None = None, rules: Path = RULES):
    result = CliRunner().invoke(app, [*args, "--rules", str(rules), "--workloads",
                                      str(WORKLOADS)], input=input)
    assert "Traceback" not in result.output
    if result.exception is not None:
        assert isinstance(result.exception, SystemExit), repr(result.exception)
    return result


# ---- --select ------------------------------------------------------------------------

def test_unknown_select_is_a_usage_error_with_a_suggestion():
    result = cli("check", str(VALID), "--select", "R999")
    assert result.exit_code == 2
    assert "R999" in result.stderr and "did you mean" in result.stderr
    assert "R009" in result.stderr  # the closest code


def test_misspelt_rule_name_suggests_the_name():
    result = cli("check", str(VALID), "--select", "threads-per-ct")
    assert result.exit_code == 2
    assert "threads-per-cta" in result.stderr


def test_known_select_runs_that_rule_only():
    result = cli("check", str(VALID), "--select", "p003,threads-per-cta", "--format", "json")
    assert result.exit_code == 0, result.output


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.sampled_from(RULE_KEYS), min_size=1, max_size=6),
       st.lists(st.booleans(), min_size=6, max_size=6),
       st.integers(min_value=1, max_value=3))
def test_selection_resolves_exactly_the_named_rules(picked, by_name, per_value):
    keys = [name if by_name[i] else code.lower() if i % 2 else code
            for i, (code, name) in enumerate(picked)]
    values = [", ".join(keys[i:i + per_value]) for i in range(0, len(keys), per_value)]
    codes, unknown = resolve(values, RULE_KEYS)
    assert unknown == []
    assert codes == {code for code, _ in picked}


@settings(max_examples=examples(80), deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8", exclude_characters=","), min_size=1,
               max_size=20))
def test_a_selector_no_rule_has_is_reported(selector):
    known = {c for c, _ in RULE_KEYS} | {n for _, n in RULE_KEYS}
    stripped = selector.strip()
    codes, unknown = resolve([selector], RULE_KEYS)
    if not stripped:
        assert (codes, unknown) == (frozenset(), [])
    elif stripped in known or stripped.upper() in known:
        assert unknown == [] and len(codes) == 1
    else:
        assert codes == frozenset()
        assert [u.selector for u in unknown] == [stripped]
        assert all(s in known for s in unknown[0].suggestions)


@given(st.lists(st.text(max_size=10), max_size=5))
def test_split_selectors_drops_blanks_and_keeps_order(values):
    parts = split_selectors(values)
    assert all(p and p == p.strip() and "," not in p for p in parts)
    assert parts == [p.strip() for v in values for p in v.split(",") if p.strip()]


def test_empty_select_is_a_usage_error():
    assert cli("check", str(VALID), "--select", " , ").exit_code == 2


# ---- standard input ------------------------------------------------------------------

def test_stdin_is_checked_under_the_given_name():
    result = cli("check", "-", "--stdin-filename", "mine.cake", "--format", "json",
                 input=VALID.read_bytes())
    assert result.exit_code == 0, result.output
    [res] = json.loads(result.stdout)["results"]
    assert res["file"] == "mine.cake" and res["verdict"] == "clean"


def test_stdin_error_is_located_with_the_default_name():
    result = cli("check", "-", input=b"x = (\n")
    assert result.exit_code == 2
    assert "<stdin>:1:" in result.stdout
    assert "1 | x = (" in result.stdout  # the source line, read from memory


def test_stdin_filename_without_dash_is_a_usage_error():
    result = cli("check", str(VALID), "--stdin-filename", "x.cake")
    assert result.exit_code == 2 and "--stdin-filename" in result.stderr


def test_dash_twice_is_a_usage_error():
    assert cli("check", "-", "-", input=b"").exit_code == 2


_CHECKER = Checker(BOOK, load_workloads(WORKLOADS))


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.binary(max_size=300),
                 st.integers(min_value=0, max_value=len(VALID.read_bytes())).map(
                     lambda n: VALID.read_bytes()[:n])))
def test_any_stdin_gives_a_verdict_never_a_traceback(data):
    result = cli("check", "-", "--stdin-filename", "in.cake", "--format", "json",
                 input=data)
    assert result.exit_code in (0, 1, 2, 3), result.output
    [res] = json.loads(result.stdout)["results"]
    assert res["file"] == "in.cake"
    # standard input is judged exactly as the same bytes in a file would be
    assert res["verdict"] == _CHECKER.check_bytes(data, "in.cake").verdict
    if res["verdict"] == "error":
        assert all(f["file"] == "in.cake" for f in res["findings"])


# ---- preview rules -------------------------------------------------------------------

@pytest.fixture(scope="module")
def preview_rules(tmp_path_factory) -> Path:
    rules = tmp_path_factory.mktemp("book") / "rules"
    shutil.copytree(RULES, rules, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(PROPOSAL, rules / "checks" / PROPOSAL.name)
    return rules


def test_preview_rule_that_would_fire_is_named_and_the_verdict_stays(preview_rules):
    result = cli("check", str(MOTIVATING), rules=preview_rules)
    assert result.exit_code == 0, result.output  # the stable rules accept it
    assert "clean:" in result.stdout
    assert "R020 fragment-owner" in result.stderr and "--preview" in result.stderr
    assert cli("check", str(MOTIVATING), "--preview", rules=preview_rules).exit_code == 1


def test_no_preview_note_when_no_preview_rule_fires(preview_rules):
    result = cli("check", str(VALID), rules=preview_rules)
    assert result.exit_code == 0 and "preview" not in result.stderr


# ---- output files --------------------------------------------------------------------

def test_atomic_write_follows_the_umask(tmp_path):
    old = os.umask(0o027)
    try:
        atomic_write(tmp_path / "new.txt", "x")
        existing = tmp_path / "kept.txt"
        existing.write_text("old")
        existing.chmod(0o604)
        atomic_write(existing, b"y")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.txt").stat().st_mode) == 0o640
    assert stat.S_IMODE(existing.stat().st_mode) == 0o604
    assert existing.read_bytes() == b"y"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.txt", "new.txt"]


def test_check_output_file_is_not_private(tmp_path):
    old = os.umask(0o022)
    try:
        result = cli("check", str(VALID), "-f", "json", "-o", str(tmp_path / "r.json"))
    finally:
        os.umask(old)
    assert result.exit_code == 0
    assert stat.S_IMODE((tmp_path / "r.json").stat().st_mode) == 0o644


def test_unwritable_output_is_a_usage_error(tmp_path):
    result = cli("check", str(VALID), "-o", str(tmp_path / "no" / "such" / "dir.txt"))
    assert result.exit_code == 2 and "cannot write" in result.stderr


# ---- rules ---------------------------------------------------------------------------

def test_rules_list_json_has_every_rule():
    result = CliRunner().invoke(app, ["rules", "list", "--format", "json", "--rules",
                                      str(RULES)])
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert [d["code"] for d in data] == [r.code for r in BOOK.rules]
    assert {"code", "name", "status", "category", "severity", "summary"} <= set(data[0])


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    for part in ("rules", "corpus", "docs", "examples"):
        shutil.copytree(ROOT / part, tmp_path / part,
                        ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_rules_new_scaffolds_a_loadable_rule_and_a_real_case(project):
    result = CliRunner().invoke(app, ["rules", "new", "my-check", "--category", "resources"])
    assert result.exit_code == 0, result.output
    rule = project / "rules" / "checks" / "my-check.py"
    case = project / "corpus" / "invalid" / "scale" / "my_check.cake"
    assert f"created {rule.relative_to(project)}" in result.stdout
    book = Rulebook.load(project / "rules")
    new = book.rule("my-check")
    taken = {r.code for r in BOOK.rules} | {"R020"}  # R020: the pending proposal's
    assert new is not None and new.status == "preview" and new.code not in taken
    assert new.code.startswith("R") and new.motivated_by == (case.relative_to(project)
                                                             .as_posix(),)
    labels = read_label_file(case)
    assert labels.codes == {new.code}
    # the case is a real schedule: it parses and the rest of the rulebook accepts it
    checker = Checker(book, load_workloads(project / "corpus" / "workloads"), preview=True)
    assert checker.check_path(case).verdict == "clean"
    # the docstring examples quote the case and a valid schedule verbatim
    for section in ("Failing example", "Passing example"):
        text = new.section(section)
        path = project / text.split("`")[1]
        quoted = [ln.strip() for ln in text.split("```python\n")[1].split("```")[0]
                  .splitlines() if ln.strip()]
        assert all(q in path.read_text(encoding="utf-8") for q in quoted)
    assert "my-check" in (project / "docs" / "rules.md").read_text(encoding="utf-8")
    again = CliRunner().invoke(app, ["rules", "new", "my-check", "--category", "resources"])
    assert again.exit_code == 2 and "exists" in again.stderr


def test_rules_new_unknown_category_is_a_usage_error(project):
    result = CliRunner().invoke(app, ["rules", "new", "x-y", "--category", "nope"])
    assert result.exit_code == 2 and "known categories" in result.stderr
    assert not (project / "rules" / "checks" / "x-y.py").exists()


# ---- propose-rule --------------------------------------------------------------------

def test_unproposed_working_tree_changes_are_listed(tmp_path):
    rules = tmp_path / "rules"
    shutil.copytree(RULES, rules, ignore=shutil.ignore_patterns("__pycache__"))
    from cakegov.govern.cache import plugin_hashes

    base = plugin_hashes(rules)
    (rules / "checks" / "cluster-size.py").write_text("# edited\n")
    (rules / "checks" / "smem-capacity.py").write_text("# edited and proposed\n")
    (rules / "targets" / "sm_80.toml").unlink()
    proposed = [ProposedFile(source="rules/checks/smem-capacity.py",
                             placed_at="rules/checks/smem-capacity.py", kind="check",
                             sha256="0" * 64)]
    assert _unproposed(rules, base, proposed) == ["rules/checks/cluster-size.py",
                                                  "rules/targets/sm_80.toml"]
    assert _unproposed(rules, plugin_hashes(rules), []) == []


# ---- help, version, progress ---------------------------------------------------------

def _commands(group, prefix=()):
    import typer.main

    cmd = typer.main.get_command(group)
    stack = [(prefix, cmd)]
    while stack:
        path, node = stack.pop()
        yield path
        for name, sub in getattr(node, "commands", {}).items():
            stack.append(((*path, name), sub))


@pytest.mark.parametrize("path", sorted(_commands(app)), ids=lambda p: " ".join(p) or "-")
def test_help_reads_as_text(path):
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "100"})
    assert result.exit_code == 0
    assert "<bool>" not in result.stdout
    options = [ln for ln in result.stdout.splitlines() if ln.lstrip().startswith("-")]
    assert not [ln for ln in options if "<list[" in ln or "<str>" in ln]
    # arguments too: a variadic argument shows its element type, not typer's annotation
    assert "<list[" not in result.stdout


def test_a_variadic_argument_shows_its_element_type():
    result = CliRunner().invoke(app, ["check", "--help"], env={"COLUMNS": "100"})
    assert "PATH <path>" in result.stdout
    assert "╭" not in result.stdout  # plain help: sentences are rewrapped, not boxed


def test_version_flag():
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout.startswith("cakegov ")


def test_no_progress_when_stderr_is_not_a_terminal():
    result = cli("check", str(CORPUS / "valid" / "scale"))
    assert result.exit_code == 0
    assert result.stderr == ""


@pytest.mark.parametrize("path", sorted(p for p in _commands(app) if p), ids=" ".join)
def test_narrowed_app_behaves_as_the_whole_app(path):
    """`main` builds only the invoked top-level command; its help and its usage errors
    must be the whole app's, word for word."""
    from cakegov.cli import narrowed

    narrow = narrowed(list(path))
    assert narrow is not app  # every top-level name narrows
    for args in ([*path, "--help"], [*path, "--no-such-option"]):
        whole = CliRunner().invoke(app, args, env={"COLUMNS": "100"})
        part = CliRunner().invoke(narrow, args, env={"COLUMNS": "100"})
        assert (part.exit_code, part.stdout, part.stderr) == (
            whole.exit_code, whole.stdout, whole.stderr)


def test_unknown_or_absent_command_gets_the_whole_app():
    from cakegov.cli import narrowed

    assert narrowed([]) is app
    assert narrowed(["--version"]) is app
    assert narrowed(["chek", "x.cake"]) is app
    result = CliRunner().invoke(narrowed(["chek"]), ["chek"])
    assert result.exit_code == 2 and "check" in result.stderr
