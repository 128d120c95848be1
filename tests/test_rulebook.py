"""The rulebook as versioned plugins: side-by-side loading, the lock and its version-bump
rule, malformed plugins, and the rulebook commands of the CLI."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cakegov.check.rulebook import PluginError, Rulebook
from cakegov.check.runner import Checker
from cakegov.cli import app

from .conftest import CORPUS, RULES, WORKLOADS

OVER = CORPUS / "invalid" / "gemm" / "smem_over_capacity.cake"
SMEM_RULE = Path("checks") / "smem-capacity.py"


def cli(*args: str, rules: Path = RULES):
    result = CliRunner().invoke(app, [*args, "--rules", str(rules)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert "Traceback" not in result.output
    return result


def copy_rules(dst: Path) -> Path:
    shutil.copytree(RULES, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return dst


def edit_plugin(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new), encoding="utf-8")


def bump(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    major, minor, patch = re.search(r'^VERSION = "(\d+)\.(\d+)\.(\d+)"$', text, re.M).groups()
    new = f"{major}.{minor}.{int(patch) + 1}"
    path.write_text(re.sub(r'^VERSION = ".*"$', f'VERSION = "{new}"', text, flags=re.M),
                    encoding="utf-8")
    return new


# ---- two rulebooks side by side ------------------------------------------------------------


def test_two_rulebooks_side_by_side_do_not_interfere(tmp_path: Path, workloads):
    base = copy_rules(tmp_path / "base")
    proposal = copy_rules(tmp_path / "proposal")
    edit_plugin(proposal / SMEM_RULE, 'f"shared memory needs {', 'f"CTA shared memory of {')
    book_a, book_b = Rulebook.load(base), Rulebook.load(proposal)
    rule_a, rule_b = book_a.rule("R001"), book_b.rule("R001")
    assert rule_a is not None and rule_b is not None
    assert rule_a.check is not rule_b.check
    assert rule_a.sha256 != rule_b.sha256 and book_a.digest() != book_b.digest()

    def messages(book: Rulebook) -> list[str]:
        result = Checker(book, workloads, only=frozenset({"R001"})).check_path(OVER)
        return [f.message for f in result.findings if f.code == "R001"]

    for _ in range(2):  # interleaved, repeatedly: neither load nor run leaks into the other
        (a,) = messages(book_a)
        (b,) = messages(book_b)
        assert a.startswith("shared memory needs ")
        assert b.startswith("CTA shared memory of ")
        assert a.removeprefix("shared memory needs ") == b.removeprefix("CTA shared memory of ")
    # loading a third copy again does not change the books already loaded
    Rulebook.load(copy_rules(tmp_path / "third"))
    assert messages(book_b)[0].startswith("CTA shared memory of ")


def test_json_reports_name_the_rulebook_that_judged(tmp_path: Path):
    proposal = copy_rules(tmp_path / "proposal")
    edit_plugin(proposal / SMEM_RULE, 'f"shared memory needs {', 'f"CTA shared memory of {')
    reports = []
    for rules in (RULES, proposal, RULES):
        result = CliRunner().invoke(app, ["check", str(OVER), "--format", "json", "--rules",
                                          str(rules), "--workloads", str(WORKLOADS)])
        assert result.exit_code == 1
        reports.append(result.stdout)
    assert reports[0] == reports[2]
    first, second = json.loads(reports[0]), json.loads(reports[1])
    assert first["verifier_digest"] == Rulebook.load(RULES).digest()
    assert second["verifier_digest"] == Rulebook.load(proposal).digest()
    assert first["verifier_digest"] != second["verifier_digest"]


# ---- the lock ------------------------------------------------------------------------------


def test_lock_check_passes_on_the_repository():
    result = cli("lock", "--check")
    assert result.exit_code == 0, result.output
    assert "lock ok: " in result.output


def test_lock_requires_a_version_bump_for_changed_content(tmp_path: Path):
    rules = copy_rules(tmp_path / "rules")
    assert cli("lock", "--check", rules=rules).exit_code == 0
    edit_plugin(rules / SMEM_RULE, 'hint = "use fewer stages or smaller tiles"',
                'hint = "use fewer stages, or smaller tiles"')
    lock_before = (rules / "rulebook.lock").read_bytes()

    checked = cli("lock", "--check", rules=rules)
    assert checked.exit_code == 1
    assert "checks/smem-capacity.py: content changed without a version bump" in checked.output

    refused = cli("lock", rules=rules)
    assert refused.exit_code == 1
    assert "without a version bump" in refused.output
    assert (rules / "rulebook.lock").read_bytes() == lock_before

    version = bump(rules / SMEM_RULE)
    unrecorded = cli("lock", "--check", rules=rules)
    assert unrecorded.exit_code == 1
    assert f"-> {version} is not recorded" in unrecorded.output

    assert cli("lock", rules=rules).exit_code == 0
    assert cli("lock", "--check", rules=rules).exit_code == 0
    locked = json.loads((rules / "rulebook.lock").read_text())
    assert locked["plugins"]["checks/smem-capacity.py"]["version"] == version


def test_lock_notices_added_and_removed_plugins(tmp_path: Path):
    rules = copy_rules(tmp_path / "rules")
    shutil.copy(rules / "targets" / "sm_80.toml", rules / "targets" / "sm_80.toml.bak")
    (rules / "targets" / "sm_80.toml").unlink()
    result = cli("lock", "--check", rules=rules)
    assert result.exit_code == 1
    assert "targets/sm_80.toml: in the lock but not on disk" in result.output


# ---- malformed plugins ---------------------------------------------------------------------

MALFORMED = {
    "missing-code": ('CODE = "R001"\n', "", "missing `CODE`"),
    "name-differs": ('NAME = "smem-capacity"', 'NAME = "smem-capacity2"',
                     "must be kebab-case and equal the file name"),
    "no-doc-sections": ("## Why is this bad?", "## Why it matters", "docstring lacks section"),
    "syntax-error": ("def check(ctx):", "def check(ctx:", "failed to load"),
    "bad-version": ('VERSION = "', 'VERSION = "v', "is not MAJOR.MINOR.PATCH"),
    "not-a-generator": ("def check(ctx):", "def check(ctx):\n    return []\n\n\ndef _old(ctx):",
                        "must be a generator function"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_plugin_is_a_usage_error_naming_the_file(case: str, tmp_path: Path):
    rules = copy_rules(tmp_path / "rules")
    old, new, fragment = MALFORMED[case]
    edit_plugin(rules / SMEM_RULE, old, new)
    with pytest.raises(PluginError) as info:
        Rulebook.load(rules)
    assert info.value.path == "checks/smem-capacity.py"
    for command in (("lock", "--check"), ("rules", "list"), ("version",)):
        result = cli(*command, rules=rules)
        assert result.exit_code == 2, (command, result.output)
        assert "invalid plugin checks/smem-capacity.py: " in result.output
        assert fragment in result.output


def test_duplicate_rule_code_is_refused(tmp_path: Path):
    rules = copy_rules(tmp_path / "rules")
    twin = rules / "checks" / "smem-capacity-twin.py"
    twin.write_text((rules / SMEM_RULE).read_text().replace('NAME = "smem-capacity"',
                                                           'NAME = "smem-capacity-twin"'))
    result = cli("rules", "list", rules=rules)
    assert result.exit_code == 2
    assert "code R001 is also used by" in result.output


# ---- commands --------------------------------------------------------------------------------


def test_version_prints_the_verifier_digest(rulebook):
    result = cli("version")
    assert result.exit_code == 0
    assert f"verifier {rulebook.digest()}" in result.output
    assert re.search(r"^cakegov \d+\.\d+\.\d+", result.output, re.M)


def test_rules_list_and_explain(rulebook):
    listed = cli("rules", "list")
    assert listed.exit_code == 0
    rows = [line.split("\t") for line in listed.output.splitlines()]
    assert rows[0] == ["code", "name", "version", "severity", "category", "status", "summary"]
    assert [row[:3] for row in rows[1:]] == [[r.code, r.name, r.version]
                                             for r in rulebook.rules]
    assert ["R001", "smem-capacity"] in [row[:2] for row in rows]
    explained = cli("rules", "explain", "R001")
    assert explained.exit_code == 0
    assert explained.output.startswith("R001 smem-capacity (v")
    assert "## What it does" in explained.output
    assert "corpus/invalid/gemm/smem_over_capacity.cake" in explained.output
    by_name = cli("rules", "explain", "smem-capacity")
    assert by_name.output == explained.output


def test_explain_suggests_the_closest_code():
    result = cli("rules", "explain", "R0O1")
    assert result.exit_code == 2
    assert "no rule 'R0O1'; did you mean R001" in result.output


def test_unknown_target_is_a_usage_error():
    result = CliRunner().invoke(app, ["check", str(OVER), "--target", "sm_75", "--rules",
                                      str(RULES), "--workloads", str(WORKLOADS)])
    assert result.exit_code == 2
    assert "unknown target 'sm_75'; known: sm_100a, sm_80, sm_90a" in result.output
