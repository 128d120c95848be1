"""The audit ledger: hash chain, append-only, tamper detection, concurrent writers, blobs,
`check --record`, the in-toto export and `audit replay` under another commit's rulebook."""

from __future__ import annotations

import json
import multiprocessing
import shutil
import sqlite3
from pathlib import Path

import git
import pytest
from typer.testing import CliRunner

from cakegov.cli import app
from cakegov.corpus.labels import read_labels
from cakegov.govern.audit import STATEMENT_TYPE, TEST_RESULT_TYPE
from cakegov.govern.ledger import (
    GENESIS,
    Ledger,
    LedgerError,
    blob_sha256,
    default_path,
    record_hash,
)
from tests.conftest import CORPUS, RULES, WORKLOADS

DIGEST = "d" * 64
INVALID = CORPUS / "invalid" / "gemm" / "smem_over_capacity.cake"
VALID = CORPUS / "valid" / "gemm" / "ws_pipeline_s4.cake"


def cli(*args: str):
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def filled(path: Path, n: int = 5) -> Ledger:
    ledger = Ledger.open(path)
    for i in range(1, n + 1):
        ledger.append("check", {"n": i, "note": f"record-{i}-original"}, DIGEST)
    return ledger


def tamper(path: Path, sql: str, *params, drop: str = "records_no_update") -> None:
    """What an attacker with the file does: drop the guarding trigger, then edit."""
    conn = sqlite3.connect(path)
    conn.execute(f"DROP TRIGGER {drop}")
    conn.execute(sql, params)
    conn.commit()
    conn.close()


# -- chain ---------------------------------------------------------------------------


def test_append_links_every_record_to_the_previous_hash(tmp_path):
    ledger = Ledger.open(tmp_path / "nested" / "ledger.sqlite")
    a = ledger.append("check", {"verdict": "clean"}, DIGEST)
    b = ledger.append("proposal", {"verdict": "blocked", "x": [1, 2.5]}, "e" * 64)
    c = ledger.append("measurement", {"median_us": 12.5}, DIGEST)
    assert [r.id for r in (a, b, c)] == [1, 2, 3]
    assert (a.prev_hash, b.prev_hash, c.prev_hash) == (GENESIS, a.hash, b.hash)
    for r in (a, b, c):
        assert r.hash == record_hash(r.id, r.kind, r.created_at, r.verifier_digest,
                                     r.payload, r.prev_hash)
    assert ledger.records() == [a, b, c]
    assert ledger.records("proposal") == [b]
    result = ledger.verify()
    assert (result.ok, result.records, result.head) == (True, 3, c.hash)
    mode = ledger._conn.execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


@pytest.mark.parametrize("field", ["id", "kind", "created_at", "verifier_digest", "payload",
                                   "prev_hash"])
def test_the_hash_covers_every_field(field):
    fields = {"id": 1, "kind": "check", "created_at": "2025-01-01T00:00:00.000000Z",
              "verifier_digest": DIGEST, "payload": {"a": 1}, "prev_hash": GENESIS}
    changed = {**fields, field: {"id": 2, "kind": "proposal", "created_at": "x",
                                 "verifier_digest": "e" * 64, "payload": {"a": 2},
                                 "prev_hash": "1" * 64}[field]}
    assert record_hash(**fields) != record_hash(**changed)


def test_payload_must_be_json_and_kind_known(tmp_path):
    ledger = Ledger.open(tmp_path / "l.sqlite")
    with pytest.raises(LedgerError, match="unknown record kind 'verdict'"):
        ledger.append("verdict", {}, DIGEST)
    with pytest.raises(LedgerError, match="not JSON-serialisable"):
        ledger.append("check", {"when": object()}, DIGEST)
    record = ledger.append("measurement", {"ratio": float("nan")}, DIGEST)
    assert record.payload == {"ratio": "NaN"}
    assert ledger.verify().ok


@pytest.mark.parametrize("sql", ["UPDATE records SET kind = 'proposal' WHERE id = 2",
                                 "DELETE FROM records WHERE id = 5",
                                 "UPDATE blobs SET data = x'00'",
                                 "DELETE FROM blobs"])
def test_update_and_delete_are_refused(tmp_path, sql):
    ledger = filled(tmp_path / "l.sqlite")
    ledger.append("check", {}, DIGEST, blobs={"source": b"schedule"})
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        ledger._conn.execute(sql)
    raw = sqlite3.connect(tmp_path / "l.sqlite")
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        raw.execute(sql)
    raw.close()
    assert ledger.verify().ok


# -- tampering -----------------------------------------------------------------------


def test_verify_names_the_first_tampered_row(tmp_path):
    path = tmp_path / "l.sqlite"
    filled(path).close()
    tamper(path, "UPDATE records SET payload = ? WHERE id = 3",
           '{"n":3,"note":"record-3-tampered"}')
    conn = sqlite3.connect(path)
    conn.execute("UPDATE records SET verifier_digest = ? WHERE id = 4", ("0" * 64,))
    conn.commit()
    conn.close()
    result = Ledger.open(path).verify()
    assert (result.ok, result.first_bad) == (False, 3)
    assert "record 3: content does not match its hash" in result.reason
    run = cli("audit", "verify", "--ledger", str(path))
    assert run.exit_code == 1
    assert "first tampered record: #3" in run.output


def test_verify_catches_edited_file_bytes(tmp_path):
    path = tmp_path / "l.sqlite"
    filled(path).close()  # closing the last connection checkpoints the WAL into the file
    data = path.read_bytes()
    assert data.count(b"record-2-original") == 1
    path.write_bytes(data.replace(b"record-2-original", b"record-2-tampered"))
    run = cli("audit", "verify", "--ledger", str(path))
    assert run.exit_code == 1
    assert "first tampered record: #2" in run.output


def test_a_record_rewritten_with_a_fresh_hash_breaks_the_next_link(tmp_path):
    path = tmp_path / "l.sqlite"
    ledger = filled(path)
    old = ledger.record(2)
    ledger.close()
    payload = {"n": 2, "note": "record-2-tampered"}
    forged = record_hash(2, old.kind, old.created_at, old.verifier_digest, payload,
                         old.prev_hash)
    tamper(path, "UPDATE records SET payload = ?, hash = ? WHERE id = 2",
           json.dumps(payload, sort_keys=True, separators=(",", ":")), forged)
    result = Ledger.open(path).verify()
    assert (result.ok, result.first_bad) == (False, 2)
    assert "record 3" in result.reason


def test_a_deleted_record_is_named(tmp_path):
    path = tmp_path / "l.sqlite"
    filled(path).close()
    tamper(path, "DELETE FROM records WHERE id = 2", drop="records_no_delete")
    result = Ledger.open(path).verify()
    assert (result.ok, result.first_bad) == (False, 2)
    assert "record 2 is missing" in result.reason


def test_a_cut_tail_is_caught_against_a_known_head(tmp_path):
    path = tmp_path / "l.sqlite"
    ledger = filled(path)
    head = ledger.verify().head
    ledger.close()
    tamper(path, "DELETE FROM records WHERE id = 5", drop="records_no_delete")
    conn = sqlite3.connect(path)  # a careful attacker puts the trigger back
    conn.execute("CREATE TRIGGER records_no_delete BEFORE DELETE ON records "
                 "BEGIN SELECT RAISE(ABORT, 'append-only'); END")
    conn.commit()
    conn.close()
    assert cli("audit", "verify", "--ledger", str(path)).exit_code == 0  # a shorter chain
    run = cli("audit", "verify", "--ledger", str(path), "--head", head)
    assert run.exit_code == 1
    assert f"expected head {head} is not in the chain" in run.output


def test_removed_triggers_fail_verification(tmp_path):
    path = tmp_path / "l.sqlite"
    filled(path).close()
    tamper(path, "SELECT 1", drop="records_no_delete")
    result = Ledger.open(path).verify()
    assert not result.ok
    assert result.reason == "append-only triggers removed: records_no_delete"


def test_triggers_replaced_by_no_ops_fail_verification(tmp_path):
    """Same names, bodies that refuse nothing: the append-only guarantee is gone."""
    path = tmp_path / "l.sqlite"
    filled(path).close()
    conn = sqlite3.connect(path)
    conn.execute("DROP TRIGGER records_no_delete")
    conn.execute("CREATE TRIGGER records_no_delete BEFORE DELETE ON records BEGIN SELECT 1; END")
    conn.execute("DELETE FROM records WHERE id = 5")
    conn.commit()
    conn.close()
    result = Ledger.open(path).verify()
    assert not result.ok
    assert result.reason.startswith("append-only triggers replaced: records_no_delete")


def test_a_missing_source_blob_fails_verification(tmp_path):
    path = tmp_path / "l.sqlite"
    with Ledger.open(path) as ledger:
        source = b"schedule source"
        ledger.append("check", {"source_sha256": blob_sha256(source)}, DIGEST,
                      blobs={"src": source})
        assert ledger.verify().ok
    tamper(path, "DELETE FROM blobs", drop="blobs_no_delete")
    result = Ledger.open(path).verify()
    assert not result.ok and "its judged source" in result.reason and "is missing" in \
        result.reason


@pytest.mark.parametrize(("sql", "words"), [
    ("UPDATE meta SET value = '2' WHERE key = 'schema_version'", "schema version '2'"),
    ("INSERT INTO records VALUES (6, 'zzz', 'not-a-date', 'd', '{}', 'x', 'y')",
     "kind 'zzz' or time 'not-a-date'"),
])
def test_unknown_schema_or_record_fields_fail_verification(tmp_path, sql, words):
    path = tmp_path / "l.sqlite"
    filled(path).close()
    conn = sqlite3.connect(path)
    conn.execute(sql)
    conn.commit()
    conn.close()
    result = Ledger(path, sqlite3.connect(path)).verify() if "meta" in sql else \
        Ledger.open(path).verify()
    assert not result.ok and words in result.reason


def test_a_corrupt_page_fails_verification(tmp_path):
    """Bytes overwritten inside the file: SQLite's integrity check finds it even where
    no record's content is touched."""
    path = tmp_path / "l.sqlite"
    filled(path, 40).close()
    data = bytearray(path.read_bytes())
    data[5000:9000] = b"\xff" * 4000
    path.write_bytes(bytes(data))
    try:
        result = Ledger.open(path).verify()
    except LedgerError:
        return  # refused to open: also not "ok"
    assert not result.ok and "corrupt" in result.reason


# -- concurrency, blobs, location ----------------------------------------------------


def _writer(path: str, worker: int, count: int, start) -> None:
    start.wait(timeout=60)  # every process creates the file and appends at the same time
    with Ledger.open(Path(path)) as ledger:
        for n in range(count):
            ledger.append("measurement", {"worker": worker, "n": n}, DIGEST,
                          blobs={"x": f"{worker}:{n}".encode()})


@pytest.mark.slow
def test_concurrent_writers_keep_the_chain_intact(tmp_path):
    path = tmp_path / "shared" / "ledger.sqlite"
    workers, per_worker = 4, 25
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(workers)
    procs = [ctx.Process(target=_writer, args=(str(path), w, per_worker, start))
             for w in range(workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0] * workers
    ledger = Ledger.open(path)
    records = ledger.records()
    assert [r.id for r in records] == list(range(1, workers * per_worker + 1))
    pairs = sorted((r.payload["worker"], r.payload["n"]) for r in records)
    assert pairs == [(w, n) for w in range(workers) for n in range(per_worker)]
    result = ledger.verify()
    assert (result.ok, result.records, result.blobs) == (True, 100, 100)


def test_blobs_are_stored_once_by_content_hash(tmp_path):
    ledger = Ledger.open(tmp_path / "l.sqlite")
    source = b"@cake.schedule(...)\n"
    key = blob_sha256(source)
    ledger.append("check", {"source_sha256": key}, DIGEST, blobs={key: source})
    ledger.append("check", {"source_sha256": key}, DIGEST, blobs={"again": source})
    assert ledger.blob(key) == source
    assert ledger._conn.execute("SELECT COUNT(*) FROM blobs").fetchone()[0] == 1
    with pytest.raises(KeyError):
        ledger.blob("0" * 64)
    with pytest.raises(LedgerError, match="not the sha256 of its content"):
        ledger.append("check", {}, DIGEST, blobs={"0" * 64: source})
    assert len(ledger.records()) == 2  # the refused append left nothing behind


def test_ledger_location(tmp_path, monkeypatch):
    project = tmp_path / "project"
    (project / "rules" / "checks").mkdir(parents=True)
    (project / "corpus").mkdir()
    (project / "corpus" / "sub").mkdir()
    monkeypatch.chdir(project / "corpus" / "sub")
    monkeypatch.delenv("CAKEGOV_LEDGER", raising=False)
    assert default_path() == project / ".cakegov" / "ledger.sqlite"
    monkeypatch.setenv("CAKEGOV_LEDGER", str(tmp_path / "elsewhere.sqlite"))
    assert default_path() == tmp_path / "elsewhere.sqlite"
    with Ledger.open() as ledger:
        ledger.append("check", {}, DIGEST)
    assert (tmp_path / "elsewhere.sqlite").is_file()
    run = cli("audit", "list", "--ledger", str(tmp_path / "missing.sqlite"))
    assert run.exit_code == 2
    assert "no ledger at" in run.output


# -- check --record, list, show, export ----------------------------------------------


def _record(ledger: Path, *files: Path, rules: Path = RULES):
    return cli("check", "--record", "--ledger", str(ledger), "--rules", str(rules),
               "--workloads", str(WORKLOADS), *map(str, files))


def test_check_record_stores_the_source_and_the_verdict(tmp_path, rulebook):
    path = tmp_path / "l.sqlite"
    run = _record(path, INVALID, VALID)
    assert run.exit_code == 1, run.output
    assert "recorded 2 check record(s)" in run.output
    ledger = Ledger.open(path)
    bad, good = ledger.records("check")
    labels = read_labels(INVALID.read_text())
    assert bad.payload["verdict"] == "rejected"
    assert {(f["code"], f["line"]) for f in bad.payload["findings"]} == set(labels.expected)
    assert bad.payload["findings"][0]["message"].startswith("shared memory needs")
    assert good.payload["verdict"] == "clean" and good.payload["findings"] == []
    for record, path_ in ((bad, INVALID), (good, VALID)):
        assert record.verifier_digest == rulebook.digest()
        assert record.payload["file"] == str(path_)
        assert record.payload["engine_version"]
        assert len(record.payload["rulebook_digest"]) == 64
        assert record.payload["schedule_sha256"]
        assert ledger.blob(record.payload["source_sha256"]) == path_.read_bytes()
    assert "R001" in bad.payload["rules_run"]

    listing = cli("audit", "list", "--ledger", str(path), "--kind", "check")
    assert listing.exit_code == 0
    rows = [line.split("\t") for line in listing.output.splitlines()]
    assert rows[0] == ["id", "time", "kind", "summary", "verifier"]
    assert rows[1][0] == "1" and rows[1][2] == "check"
    assert rows[1][3] == f"rejected (R001) {INVALID}"
    assert rows[1][4] == rulebook.digest()[:12]
    shown = cli("audit", "show", "1", "--ledger", str(path))
    assert json.loads(shown.output) == bad.model_dump(mode="json")
    source = cli("audit", "show", "2", "--source", "--ledger", str(path))
    assert source.output == VALID.read_text()
    assert cli("audit", "show", "9", "--ledger", str(path)).exit_code == 2


def test_export_writes_in_toto_test_result_statements(tmp_path):
    path = tmp_path / "l.sqlite"
    _record(path, INVALID, VALID)
    with Ledger.open(path) as ledger:
        ledger.append("proposal", {"verdict": "eligible"}, DIGEST)  # not a check: skipped
        records = ledger.records("check")
    out = tmp_path / "statements.jsonl"
    run = cli("audit", "export", "--ledger", str(path), "--output", str(out))
    assert run.exit_code == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 2
    for stmt, record, file in zip(lines, records, (INVALID, VALID), strict=True):
        assert stmt["_type"] == STATEMENT_TYPE == "https://in-toto.io/Statement/v1"
        assert stmt["predicateType"] == TEST_RESULT_TYPE
        assert stmt["subject"] == [{"name": str(file),
                                    "digest": {"sha256": blob_sha256(file.read_bytes())}}]
        pred = stmt["predicate"]
        assert pred["result"] in ("PASSED", "WARNED", "FAILED")
        assert pred["configuration"], "configuration is required"
        for descriptor in pred["configuration"]:  # a ResourceDescriptor needs a digest
            assert len(next(iter(descriptor["digest"].values()))) == 64
        assert pred["configuration"][0]["digest"] == {"sha256": record.verifier_digest}
        assert {"sha256": record.hash} in [d["digest"] for d in pred["configuration"]]
    failed, passed = lines[0]["predicate"], lines[1]["predicate"]
    assert (failed["result"], failed["failedTests"]) == ("FAILED", ["R001"])
    assert "R001" not in failed["passedTests"]
    assert passed["result"] == "PASSED"
    assert passed["failedTests"] == [] and "R001" in passed["passedTests"]


# -- replay --------------------------------------------------------------------------


def _set_smem(repo_rules: Path, value: int) -> None:
    target = repo_rules / "targets" / "sm_90a.toml"
    text = target.read_text()
    old = next(line for line in text.splitlines() if line.startswith("value = 232448"))
    target.write_text(text.replace(old, f"value = {value}", 1))


@pytest.fixture
def history(tmp_path):
    """A git repository whose rulebook has three commits: base, raised and lowered smem."""
    repo = git.Repo.init(tmp_path / "repo", initial_branch="main")
    rules = Path(repo.working_tree_dir) / "rules"
    shutil.copytree(RULES, rules, ignore=shutil.ignore_patterns("__pycache__"))
    repo.index.add(["rules"])
    repo.index.commit("base rulebook")
    repo.create_tag("base")
    _set_smem(rules, 300_000)
    repo.index.add(["rules/targets/sm_90a.toml"])
    repo.index.commit("raise sm_90a shared memory")
    repo.create_tag("raised")
    repo.git.checkout("base", "--", "rules/targets/sm_90a.toml")
    _set_smem(rules, 65_536)
    repo.index.add(["rules/targets/sm_90a.toml"])
    repo.index.commit("lower sm_90a shared memory")
    repo.create_tag("lowered")
    repo.git.checkout("base", "--", "rules/targets/sm_90a.toml")  # working tree = base
    return repo, rules


def _replay(ledger: Path, rules: Path, ref: str, *extra: str):
    return cli("audit", "replay", "--rulebook", ref, "--ledger", str(ledger), "--rules",
               str(rules), "--workloads", str(WORKLOADS), *extra)


@pytest.mark.slow
def test_replay_lists_changed_verdicts_and_why(tmp_path, history):
    repo, rules = history
    path = tmp_path / "l.sqlite"
    assert _record(path, INVALID, VALID, rules=rules).exit_code == 1
    status = repo.git.status("--porcelain")

    raised = json.loads(_replay(path, rules, "raised", "--format", "json").output)
    assert raised["commit"] == repo.tags["raised"].commit.hexsha
    assert raised["candidates"] == 2 and raised["verdict_changes"] == 1
    (change,) = raised["changes"]
    assert (change["file"], change["before"], change["after"]) == (str(INVALID), "rejected",
                                                                   "clean")
    assert [(f["code"], f["line"]) for f in change["disappeared"]] == \
        sorted(read_labels(INVALID.read_text()).expected)
    assert change["appeared"] == []

    lowered = _replay(path, rules, "lowered")
    assert lowered.exit_code == 0
    text = lowered.output
    assert "2 stored candidate(s), 1 verdict(s) change" in text
    assert f"#2 {VALID}: clean -> rejected" in text
    assert "+ R001 line" in text and "but sm_90a allows 65,536" in text

    same = json.loads(_replay(path, rules, "base", "--format", "json").output)
    assert same["changes"] == []
    assert repo.git.status("--porcelain") == status, "replay must not touch the working tree"


def test_replay_refuses_an_unknown_ref(tmp_path, history):
    _, rules = history
    path = tmp_path / "l.sqlite"
    Ledger.open(path).close()
    run = _replay(path, rules, "no-such-ref")
    assert run.exit_code == 2
    assert "no commit 'no-such-ref'" in run.output


def test_verify_fails_on_a_missing_or_empty_ledger_and_never_writes(tmp_path):
    missing = tmp_path / "none.sqlite"
    run = cli("audit", "verify", "--ledger", str(missing))
    assert run.exit_code == 1 and "no ledger at" in run.output
    assert not missing.exists()  # verify created nothing
    empty = tmp_path / "empty.sqlite"
    empty.write_bytes(b"")
    run = cli("audit", "verify", "--ledger", str(empty))
    assert run.exit_code == 1 and "empty file (0 bytes)" in run.output
    assert empty.read_bytes() == b""  # no schema was written into it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.sqlite"]
    run = cli("audit", "verify", "--ledger", str(empty), "--allow-empty")
    assert run.exit_code == 0 and "accepted: --allow-empty" in run.output
    schema_only = tmp_path / "schema.sqlite"
    Ledger.open(schema_only).close()  # a ledger with its tables and no record
    assert cli("audit", "verify", "--ledger", str(schema_only)).exit_code == 1
    assert cli("audit", "verify", "--ledger", str(schema_only), "--allow-empty").exit_code == 0


def test_verify_leaves_the_file_byte_identical(tmp_path):
    path = tmp_path / "l.sqlite"
    filled(path).close()
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    run = cli("audit", "verify", "--ledger", str(path))
    assert run.exit_code == 0 and "ledger ok: 5 record(s)" in run.output
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()
            if p.name in before} == before


def test_the_head_counts_records_and_names_the_last_hash(tmp_path):
    path = tmp_path / "l.sqlite"
    ledger = filled(path, 3)
    count, head = ledger.head()
    assert count == 3 and head == ledger.records()[-1].hash == ledger.verify().head
