"""The gate detects what it cannot contain (cakegov/govern/tamper.py): a checkout, cache or
ledger changed while proposed code ran blocks the proposal, is named file by file and
record by record, and the ledger then fails `audit verify` on the records that are not the
gate's. Unit tests of the snapshot, then hostile proposals end to end in the fallback
(where the writes succeed and must be detected) and under bwrap (where they must fail)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import git
import pytest
from typer.testing import CliRunner

from cakegov.cli import app
from cakegov.govern import isolate
from cakegov.govern.ledger import Ledger
from cakegov.govern.tamper import Snapshot

from .test_propose import ACTOR, propose, rule_file, template  # noqa: F401


def _repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "rules" / "checks").mkdir(parents=True)
    (root / "corpus" / "valid").mkdir(parents=True)
    (root / "rules" / "rulebook.lock").write_text("lock\n")
    (root / "corpus" / "valid" / "a.cake").write_text("kernel a\n")
    (root / ".gitignore").write_text(".cakegov/\nreports/\n")
    repo = git.Repo.init(root, initial_branch="main")
    repo.git.add(A=True)
    repo.index.commit("base", author=ACTOR, committer=ACTOR)
    (root / "notes.txt").write_text("untracked, not ignored\n")
    return root


def test_an_unchanged_checkout_compares_clean(tmp_path):
    root = _repo(tmp_path)
    (root / ".cakegov").mkdir()
    snap = Snapshot(root, root / ".cakegov" / "ledger.sqlite")
    assert not snap.compare()
    assert "corpus/valid/a.cake" in snap.files and "notes.txt" in snap.files
    assert ".git/HEAD" in snap.files


def test_edits_deletions_additions_and_hooks_are_named(tmp_path):
    root = _repo(tmp_path)
    snap = Snapshot(root)
    (root / "corpus" / "valid" / "a.cake").write_text("kernel a  # defused\n")
    (root / "rules" / "rulebook.lock").unlink()
    (root / "notes.txt").unlink()
    (root / "corpus" / "valid" / "b.cake").write_text("kernel b\n")
    (root / ".git" / "hooks" / "post-checkout").write_text("#!/bin/sh\n")
    (root / ".cakegov" / "cache" / "ab").mkdir(parents=True)
    (root / ".cakegov" / "cache" / "ab" / "abc.json").write_text("{}")
    (root / "reports").mkdir()
    (root / "reports" / "link").symlink_to("/etc/passwd")
    tamper = snap.compare()
    assert tamper.changed == ["corpus/valid/a.cake"]
    assert tamper.removed == ["notes.txt", "rules/rulebook.lock"]
    assert tamper.added == [".cakegov/cache/ab/abc.json", ".git/hooks/post-checkout",
                            "corpus/valid/b.cake"]
    message = tamper.message()
    assert "removed notes.txt, rules/rulebook.lock" in message
    assert "changed corpus/valid/a.cake" in message


def test_extra_directories_and_symlinks_are_watched(tmp_path):
    root = _repo(tmp_path)
    reports = root / "reports"
    reports.mkdir()
    snap = Snapshot(root, extra=(reports,))
    (reports / "proposal.sarif").symlink_to(root / ".git" / "config")
    assert snap.compare().added == ["reports/proposal.sarif"]


def test_the_parents_own_cache_writes_are_excused_by_content(tmp_path):
    root = _repo(tmp_path)
    snap = Snapshot(root)
    entry = root / ".cakegov" / "cache" / "ab" / "abc.json"
    entry.parent.mkdir(parents=True)
    entry.write_text('{"format": 1}')
    import hashlib

    snap.excuse(entry, hashlib.sha256(b'{"format": 1}').hexdigest())
    assert not snap.compare()
    entry.write_text('{"format": 1, "forged": true}')  # overwritten after the parent wrote
    assert snap.compare().added == [".cakegov/cache/ab/abc.json"]


def test_a_project_without_git_is_walked(tmp_path):
    root = tmp_path / "plain"
    (root / "rules").mkdir(parents=True)
    (root / "rules" / "rulebook.lock").write_text("lock\n")
    snap = Snapshot(root)
    (root / "rules" / "rulebook.lock").write_text("other\n")
    assert snap.compare().changed == ["rules/rulebook.lock"]


def _ledger(path: Path, n: int) -> None:
    with Ledger.open(path) as book:
        for i in range(n):
            book.append("check", {"i": i}, verifier_digest="d" * 64)


def test_records_appended_while_proposed_code_ran_are_foreign(tmp_path):
    root = _repo(tmp_path)
    ledger = root / ".cakegov" / "ledger.sqlite"
    _ledger(ledger, 2)
    snap = Snapshot(root, ledger)
    _ledger(ledger, 2)  # a plugin appending correctly chained records
    tamper = snap.compare()
    assert [r["id"] for r in tamper.foreign] == [3, 4]
    assert not tamper.files  # the ledger's own files are not compared as files
    assert "appended ledger record(s) 3, 4" in tamper.message()


def test_a_ledger_rewritten_below_its_head_is_named(tmp_path):
    root = _repo(tmp_path)
    ledger = root / ".cakegov" / "ledger.sqlite"
    _ledger(ledger, 2)
    snap = Snapshot(root, ledger)
    for suffix in ("", "-wal", "-shm"):
        Path(str(ledger) + suffix).unlink(missing_ok=True)
    _ledger(ledger, 3)  # a fresh chain with other timestamps: record 2 has another hash
    tamper = snap.compare()
    assert tamper.ledger.startswith(f"rewrote the ledger {ledger}: record 2 had hash")
    assert not tamper.foreign


def test_a_ledger_created_by_proposed_code_is_all_foreign(tmp_path):
    root = _repo(tmp_path)
    ledger = root / ".cakegov" / "ledger.sqlite"
    snap = Snapshot(root, ledger)
    _ledger(ledger, 1)
    assert [r["id"] for r in snap.compare().foreign] == [1]


def test_audit_verify_fails_on_records_a_tamper_record_names(tmp_path):
    ledger = tmp_path / "ledger.sqlite"
    _ledger(ledger, 3)
    with Ledger.open(ledger) as book:
        assert book.verify().ok
        book.append("tamper", {"run_id": "r1", "foreign": [{"id": 2, "hash": "x"},
                                                           {"id": 3, "hash": "y"}],
                               "ledger": "", "added": [], "changed": [], "removed": []},
                    verifier_digest="d" * 64)
        result = book.verify()
    assert not result.ok and result.first_bad == 2
    assert "record(s) 2, 3 were appended by something other than the gate" in result.reason
    assert "record 4 names them as foreign" in result.reason


# ---- hostile proposals, end to end ----------------------------------------------------

# The attack: the checkout's absolute path (a runner's is predictable, e.g.
# $GITHUB_WORKSPACE), append two correctly chained "eligible" records to the gate's ledger,
# defuse a labelled corpus file and delete the rulebook lock. The fallback runs workers as
# the gate's own user, so these writes succeed there; under bwrap the path does not exist.
ATTACK = '''\
    import pathlib
    done = []
    root = pathlib.Path("{root}")
    if (root / "rules").is_dir():
        try:
            from cakegov.govern.ledger import Ledger
            with Ledger.open(root / ".cakegov" / "ledger.sqlite") as book:
                for _ in range(2):
                    book.append("proposal", {"verdict": "eligible"}, verifier_digest="0" * 64)
            done.append("ledger")
        except Exception as exc:
            done.append(f"ledger failed: {exc}")
        for rel in ("corpus/invalid/scale/threads_over_limit.cake", "rules/rulebook.lock"):
            try:
                target = root / rel
                if rel.endswith(".lock"):
                    target.unlink()
                else:
                    target.write_text(target.read_text().replace("expect", "expected"))
                done.append(rel)
            except OSError:
                pass
    yield ctx.finding(None, "did: " + (", ".join(done) or "nothing"))
    '''


def attack(root: Path) -> str:
    return ATTACK.replace("{root}", str(root))


@pytest.fixture
def gate(template, tmp_path, monkeypatch) -> Path:  # noqa: F811
    root = tmp_path / "gate" / "project"
    shutil.copytree(template, root)
    monkeypatch.chdir(root)
    _ledger(root / ".cakegov" / "ledger.sqlite", 1)  # the gate's earlier record
    return root


def _verify(root: Path) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["audit", "verify", "--ledger",
                                      str(root / ".cakegov" / "ledger.sqlite")])
    return result.exit_code, result.output


@pytest.mark.slow
def test_a_fallback_plugin_that_forges_records_and_edits_the_checkout_is_blocked(
        gate, tmp_path, monkeypatch):
    monkeypatch.setenv("CAKEGOV_CONTAINMENT", "fallback")
    path = rule_file(tmp_path / "forger.py", "T960", "forger", attack(gate))
    code, data, md = propose(str(path), "--no-cache", "--corpus", "corpus/invalid/scale")
    assert code == 1, md
    [tampered] = [b for b in data["blockers"] if b["kind"] == "tampered"]
    assert "corpus/invalid/scale/threads_over_limit.cake" in tampered["files"]
    assert "rules/rulebook.lock" in tampered["files"]
    assert "appended ledger record(s) 2, 3" in tampered["message"]
    assert data["verdict"] == "blocked" and data["blockers"][0]["kind"] == "tampered"
    assert "- while proposed code ran, something other than the gate changed" in md
    with Ledger.open_readonly(gate / ".cakegov" / "ledger.sqlite") as book:
        kinds = [(r.id, r.kind) for r in book.records()]
    # no verdict recorded: the gate's only new record is the tamper record naming 2 and 3
    assert kinds == [(1, "check"), (2, "proposal"), (3, "proposal"), (4, "tamper")]
    code, output = _verify(gate)
    assert code != 0 and "record(s) 2, 3 were appended by something other than the gate" \
        in " ".join(output.split())
    listed = CliRunner().invoke(app, ["audit", "list", "--kind", "tamper", "--ledger",
                                      str(gate / ".cakegov" / "ledger.sqlite")]).output
    assert "tampered: 2 file(s) changed, foreign record(s) 2, 3" in listed


@pytest.mark.slow
@pytest.mark.skipif(isolate.bwrap_available() is None, reason="bwrap is not available")
def test_under_bwrap_the_same_plugin_changes_nothing(gate, tmp_path, monkeypatch):
    monkeypatch.setenv("CAKEGOV_CONTAINMENT", "bwrap")
    path = rule_file(tmp_path / "forger.py", "T960", "forger", attack(gate))
    _, data, _ = propose(str(path), "--no-cache", "--corpus", "corpus/invalid/scale")
    assert not [b for b in data["blockers"] if b["kind"] == "tampered"], data["blockers"]
    assert (gate / "rules" / "rulebook.lock").is_file()
    assert subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True,
                          check=True).stdout == ""
    code, output = _verify(gate)
    assert code == 0, output
    with Ledger.open_readonly(gate / ".cakegov" / "ledger.sqlite") as book:
        assert [r.kind for r in book.records()] == ["check", "proposal"]
    assert json.dumps(data)  # the report was written from the parent's result
    assert os.environ["CAKEGOV_CONTAINMENT"] == "bwrap"


FORGER = '''\
    import stat
    for fd in range(3, 64):
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                os.write(fd, b'{"ev": "rule", "file": "x", "rule": "R001"}\\n')
        except OSError:
            pass
    yield from ()
    '''


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["fallback", pytest.param("bwrap", marks=pytest.mark.skipif(
    isolate.bwrap_available() is None, reason="bwrap is not available"))])
def test_a_plugin_forging_progress_lines_is_blocked_by_name_and_the_ledger_verifies(
        gate, tmp_path, monkeypatch, mode):
    """Forged progress naming another rule, written on every pipe the plugin holds: the
    proposal is blocked naming the forger (never R001), and the ledger holds only the
    gate's records, so it verifies."""
    monkeypatch.setenv("CAKEGOV_CONTAINMENT", mode)
    path = rule_file(tmp_path / "forger.py", "T961", "forger", FORGER)
    code, data, md = propose(str(path), "--no-cache", "--corpus", "corpus/invalid/scale")
    assert code == 1, md
    forged = [b for b in data["blockers"] if b["kind"] == "rule-forged-output"]
    assert forged and forged[0]["rule"] == "T961", data["blockers"]
    assert not [b for b in data["blockers"] if b.get("rule") == "R001"]
    assert not [b for b in data["blockers"] if b["kind"] == "tampered"]
    assert "rule T961 forger forged a frame on the worker's result channel" in md
    assert _verify(gate)[0] == 0
    with Ledger.open_readonly(gate / ".cakegov" / "ledger.sqlite") as book:
        assert [r.kind for r in book.records()] == ["check", "proposal"]


def test_the_check_result_cache_beside_the_proposal_cache_is_not_watched(tmp_path):
    """With $CAKEGOV_CACHE_DIR the proposal cache and `cakegov check`'s result cache
    (`check/`) share a directory; other processes write the latter at any time."""
    root = _repo(tmp_path)
    cache = tmp_path / "cache"
    (cache / "check").mkdir(parents=True)
    snap = Snapshot(root, cache=cache)
    (cache / "check" / "entry.json").write_text("{}")
    assert not snap.compare()
    (cache / "ab").mkdir()
    (cache / "ab" / "abc.json").write_text("{}")
    assert snap.compare().added == [str(cache.resolve() / "ab" / "abc.json")]
