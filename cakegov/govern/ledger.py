"""The audit ledger: one append-only SQLite file whose records form a hash chain.

Every record carries the hash of the record before it, so changing, removing or inserting
a record anywhere breaks the chain at that point and `verify()` names it. The file runs in
WAL mode; each append is one `BEGIN IMMEDIATE` transaction, so concurrent writers (several
processes appending at once) queue on SQLite's write lock and never fork the chain.
Triggers abort every UPDATE and DELETE on the records and blobs tables. Blobs (candidate
sources) are stored once, keyed by the sha256 of their content. docs/ledger.md."""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import sqlite3
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

# "tamper": what the gate records instead of a verdict when something other than it
# changed the checkout or the ledger while proposed code ran (cakegov/govern/tamper.py)
KINDS: tuple[str, ...] = ("check", "proposal", "measurement", "tamper")
GENESIS = "0" * 64
SCHEMA_VERSION = "1"
DEFAULT_NAME = Path(".cakegov") / "ledger.sqlite"
ENV_VAR = "CAKEGOV_LEDGER"
BUSY_TIMEOUT_MS = 60_000
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
TRIGGERS: tuple[str, ...] = ("records_no_update", "records_no_delete",
                             "blobs_no_update", "blobs_no_delete")

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS records (
    id INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    created_at TEXT NOT NULL,
    verifier_digest TEXT NOT NULL,
    payload TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL UNIQUE
);
CREATE INDEX IF NOT EXISTS records_kind ON records (kind, id);
CREATE TABLE IF NOT EXISTS blobs (
    sha256 TEXT PRIMARY KEY,
    size INTEGER NOT NULL,
    data BLOB NOT NULL
);
CREATE TRIGGER IF NOT EXISTS records_no_update BEFORE UPDATE ON records
BEGIN SELECT RAISE(ABORT, 'ledger records are append-only: UPDATE refused'); END;
CREATE TRIGGER IF NOT EXISTS records_no_delete BEFORE DELETE ON records
BEGIN SELECT RAISE(ABORT, 'ledger records are append-only: DELETE refused'); END;
CREATE TRIGGER IF NOT EXISTS blobs_no_update BEFORE UPDATE ON blobs
BEGIN SELECT RAISE(ABORT, 'ledger blobs are append-only: UPDATE refused'); END;
CREATE TRIGGER IF NOT EXISTS blobs_no_delete BEFORE DELETE ON blobs
BEGIN SELECT RAISE(ABORT, 'ledger blobs are append-only: DELETE refused'); END;
INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', '{SCHEMA_VERSION}');
"""


class LedgerError(Exception):
    """The ledger cannot be opened or written, or a request to it is malformed. `empty`
    says the ledger is absent or holds no records table (as opposed to corrupt)."""

    def __init__(self, message: str, *, empty: bool = False):
        super().__init__(message)
        self.empty = empty


class LedgerRecord(BaseModel):
    """One ledger entry. `hash` covers every other field, `prev_hash` included."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")
    id: int
    kind: str
    created_at: str
    verifier_digest: str
    payload: dict[str, Any]
    prev_hash: str
    hash: str


@dataclass(frozen=True)
class VerifyResult:
    """The outcome of re-computing the chain: `first_bad` names the first tampered record."""

    ok: bool
    records: int
    head: str
    first_bad: int | None = None
    reason: str | None = None
    blobs: int = 0


def _finite(value: Any) -> Any:
    """JSON has no NaN or infinity: spell them as strings so the hash input is standard."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def canonical_json(value: Any) -> str:
    """Sorted keys, no whitespace, ASCII only, no NaN: one spelling per JSON value."""
    return json.dumps(_finite(value), sort_keys=True, separators=(",", ":"),
                      ensure_ascii=True, allow_nan=False)


def record_hash(id: int, kind: str, created_at: str, verifier_digest: str,
                payload: dict[str, Any], prev_hash: str) -> str:
    """sha256 over the canonical JSON of a record's fields, `prev_hash` included."""
    body = canonical_json({"id": id, "kind": kind, "created_at": created_at,
                           "verifier_digest": verifier_digest, "payload": payload,
                           "prev_hash": prev_hash})
    return hashlib.sha256(body.encode("ascii")).hexdigest()


def blob_sha256(data: bytes) -> str:
    """The key a blob is stored under."""
    return hashlib.sha256(data).hexdigest()


def _project_root(start: Path) -> Path | None:
    for candidate in (start, *start.parents):
        if (candidate / "rules" / "checks").is_dir() and (candidate / "corpus").is_dir():
            return candidate
    return None


def default_path() -> Path:
    """$CAKEGOV_LEDGER, else `.cakegov/ledger.sqlite` under the project root (or here)."""
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR])
    here = Path.cwd().resolve()
    return (_project_root(here) or here) / DEFAULT_NAME


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


class Ledger:
    """An open ledger file. Not shared between threads; open one per process or thread."""

    def __init__(self, path: Path, conn: sqlite3.Connection):
        self.path = path
        self._conn = conn

    @classmethod
    def open(cls, path: Path | None = None, *, create: bool = True) -> Ledger:
        """Open (and, unless `create` is false, create) the ledger at `path`."""
        path = Path(path) if path is not None else default_path()
        if not path.exists():
            if not create:
                raise LedgerError(f"no ledger at {path}")
            path.parent.mkdir(parents=True, exist_ok=True)
        try:
            conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        except sqlite3.Error as exc:
            raise LedgerError(f"cannot open ledger {path}: {exc}") from None
        ledger = cls(path, conn)
        try:
            ledger._setup()
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise LedgerError(f"cannot open ledger {path}: {exc}") from None
        return ledger

    @classmethod
    def open_readonly(cls, path: Path | None = None) -> Ledger:
        """Open an existing ledger for reading only: nothing is created, no schema is
        written, the journal mode is left alone (`audit verify` never writes). A missing
        file, a 0-byte file and a file without the records table are `LedgerError`s that
        say which; the caller decides whether an empty ledger is acceptable."""
        path = Path(path) if path is not None else default_path()
        if not path.is_file():
            raise LedgerError(f"no ledger at {path}", empty=True)
        if path.stat().st_size == 0:
            raise LedgerError(f"{path} is an empty file (0 bytes), not a ledger", empty=True)
        try:
            conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True,
                                   timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
            has = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' "
                               "AND name = 'records'").fetchone() is not None
        except sqlite3.Error as exc:
            raise LedgerError(f"cannot open ledger {path}: {exc}") from None
        if not has:
            conn.close()
            raise LedgerError(f"{path} has no records table: not a cakegov ledger, or one "
                              "that was never written", empty=True)
        return cls(path, conn)

    def head(self) -> tuple[int, str]:
        """(number of records, hash of the last record): what a report prints so that a
        truncated ledger shows."""
        row = self._conn.execute("SELECT COUNT(*), (SELECT hash FROM records ORDER BY id "
                                 "DESC LIMIT 1) FROM records").fetchone()
        return int(row[0]), row[1] or GENESIS

    def _setup(self) -> None:
        conn = self._conn
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        for attempt in range(50):  # switching to WAL needs a moment of exclusive access
            try:
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                break
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or attempt == 49:
                    raise
                time.sleep(0.05)
        if str(mode).lower() != "wal":
            raise LedgerError(f"{self.path}: cannot switch to WAL mode (got {mode})")
        conn.execute("PRAGMA synchronous = FULL")
        fresh = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' "
                             "AND name = 'records'").fetchone() is None
        if fresh:  # an existing ledger keeps its triggers as they are: verify reports them
            try:
                conn.executescript(f"BEGIN IMMEDIATE;\n{_SCHEMA}\nCOMMIT;")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if version is None or version[0] != SCHEMA_VERSION:
            raise LedgerError(f"{self.path}: unknown ledger schema version "
                              f"{version[0] if version else None!r}")

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def append(self, kind: str, payload: dict[str, Any], verifier_digest: str, *,
               blobs: dict[str, bytes] | None = None) -> LedgerRecord:
        """Append one record (and its blobs) in one transaction; return it with its hash.

        `blobs` maps a label or the content's sha256 to the bytes; each is stored under the
        sha256 of its content (a key that looks like a sha256 must match the content)."""
        if kind not in KINDS:
            raise LedgerError(f"unknown record kind {kind!r}; expected one of {KINDS}")
        if not isinstance(payload, dict):
            raise LedgerError("payload must be a JSON object")
        try:
            payload = json.loads(canonical_json(payload))
        except (TypeError, ValueError) as exc:
            raise LedgerError(f"payload is not JSON-serialisable: {exc}") from None
        stored = [(blob_sha256(data), data) for data in self._checked_blobs(blobs or {})]
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            last = conn.execute("SELECT id, hash FROM records ORDER BY id DESC LIMIT 1"
                                ).fetchone()
            rid, prev = (last[0] + 1, last[1]) if last else (1, GENESIS)
            created = _now()
            digest = record_hash(rid, kind, created, verifier_digest, payload, prev)
            conn.executemany("INSERT OR IGNORE INTO blobs (sha256, size, data) VALUES (?, ?, ?)",
                             [(key, len(data), data) for key, data in stored])
            conn.execute(
                "INSERT INTO records (id, kind, created_at, verifier_digest, payload, "
                "prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (rid, kind, created, verifier_digest, canonical_json(payload), prev, digest))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return LedgerRecord(id=rid, kind=kind, created_at=created,
                            verifier_digest=verifier_digest, payload=payload,
                            prev_hash=prev, hash=digest)

    @staticmethod
    def _checked_blobs(blobs: dict[str, bytes]) -> list[bytes]:
        out = []
        for key, data in blobs.items():
            if not isinstance(data, bytes | bytearray):
                raise LedgerError(f"blob {key!r} is not bytes")
            if SHA256_RE.match(key) and key != blob_sha256(bytes(data)):
                raise LedgerError(f"blob key {key} is not the sha256 of its content")
            out.append(bytes(data))
        return out

    def blob(self, sha256: str) -> bytes:
        """The blob stored under `sha256`; KeyError when absent, LedgerError when altered."""
        row = self._conn.execute("SELECT data FROM blobs WHERE sha256 = ?", (sha256,)
                                 ).fetchone()
        if row is None:
            raise KeyError(sha256)
        data = bytes(row[0])
        if blob_sha256(data) != sha256:
            raise LedgerError(f"blob {sha256[:16]} does not match its content hash")
        return data

    def has_blob(self, sha256: str) -> bool:
        return self._conn.execute("SELECT 1 FROM blobs WHERE sha256 = ?", (sha256,)
                                  ).fetchone() is not None

    def records(self, kind: str | None = None) -> list[LedgerRecord]:
        """Every record (of `kind`), oldest first."""
        sql = "SELECT id, kind, created_at, verifier_digest, payload, prev_hash, hash " \
              "FROM records"
        rows = (self._conn.execute(sql + " WHERE kind = ? ORDER BY id", (kind,)) if kind
                else self._conn.execute(sql + " ORDER BY id"))
        return [_record(row) for row in rows]

    def record(self, record_id: int) -> LedgerRecord | None:
        row = self._conn.execute(
            "SELECT id, kind, created_at, verifier_digest, payload, prev_hash, hash "
            "FROM records WHERE id = ?", (record_id,)).fetchone()
        return _record(row) if row else None

    def verify(self, head: str | None = None) -> VerifyResult:
        """Recompute every hash and link, oldest first; stop at the first broken record.

        `head`, a hash exported earlier, must still be in the chain: that catches a tail cut
        off or a chain rewritten from some record on."""
        try:
            return self._verify(head)
        except sqlite3.DatabaseError as exc:
            return VerifyResult(False, 0, GENESIS, None, f"ledger file is corrupt: {exc}")

    def _verify(self, head: str | None) -> VerifyResult:
        prev_id, prev_hash, count, seen = 0, GENESIS, 0, head is None
        tampers: list[tuple[int, dict[str, Any]]] = []
        problem = self._file_problem()
        if problem is not None:
            return VerifyResult(False, 0, GENESIS, None, problem)
        rows = self._conn.execute("SELECT id, kind, created_at, verifier_digest, payload, "
                                  "prev_hash, hash FROM records ORDER BY id")
        for rid, kind, created, vdigest, text, prev, stored in rows:
            count += 1
            if kind not in KINDS or not _is_timestamp(created):
                return VerifyResult(False, count, prev_hash, rid,
                                    f"record {rid}: kind {str(kind)[:20]!r} or time "
                                    f"{str(created)[:40]!r} is not one this ledger writes")
            if rid != prev_id + 1:
                return VerifyResult(False, count, prev_hash, prev_id + 1,
                                    f"record {prev_id + 1} is missing (deleted); the next "
                                    f"record is {rid}")
            try:
                payload = json.loads(text)
                ok_payload = isinstance(payload, dict) and canonical_json(payload) == text
            except ValueError:
                payload, ok_payload = None, False
            if not ok_payload:
                return VerifyResult(False, count, prev_hash, rid,
                                    f"record {rid}: payload is not the canonical JSON "
                                    "that was hashed")
            if record_hash(rid, kind, created, vdigest, payload, prev) != stored:
                return VerifyResult(False, count, prev_hash, rid,
                                    f"record {rid}: content does not match its hash")
            if prev != prev_hash:
                return VerifyResult(False, count, prev_hash, prev_id,
                                    f"record {prev_id}: its hash is not the prev_hash that "
                                    f"record {rid} stores (record {prev_id} was rewritten "
                                    f"with a new hash, or record {rid} was re-linked)")
            source = payload.get("source_sha256")
            if isinstance(source, str) and not self.has_blob(source):
                return VerifyResult(False, count, prev_hash, rid,
                                    f"record {rid}: its judged source (blob {source[:16]}) "
                                    "is missing")
            prev_id, prev_hash = rid, stored
            seen = seen or stored == head
            if kind == "tamper":
                tampers.append((rid, payload))
        if not seen:
            return VerifyResult(False, count, prev_hash, None,
                                f"expected head {head} is not in the chain: records were "
                                "cut off or the chain was rewritten")
        named = _tampered(tampers)
        if named is not None:
            return VerifyResult(False, count, prev_hash, named[0], named[1])
        blobs = 0
        for key, data in self._conn.execute("SELECT sha256, data FROM blobs ORDER BY sha256"):
            blobs += 1
            if blob_sha256(bytes(data)) != key:
                return VerifyResult(False, count, prev_hash, None,
                                    f"blob {key}: content does not match its hash", blobs)
        have = {name: _normal_sql(sql) for name, sql in self._conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'trigger'")}
        missing = [t for t in TRIGGERS if t not in have]
        if missing:
            return VerifyResult(False, count, prev_hash, None,
                                f"append-only triggers removed: {', '.join(missing)}", blobs)
        changed = [t for t in TRIGGERS if not _refuses(t, have[t])]
        if changed:
            return VerifyResult(False, count, prev_hash, None,
                                f"append-only triggers replaced: {', '.join(changed)} no "
                                "longer refuse the change they are named for", blobs)
        return VerifyResult(True, count, prev_hash, None, None, blobs)

    def _file_problem(self) -> str | None:
        """SQLite's own integrity check, then the schema version."""
        result = [r[0] for r in self._conn.execute("PRAGMA integrity_check")]
        if result != ["ok"]:
            return f"ledger file is corrupt: {'; '.join(map(str, result[:3]))}"
        row = self._conn.execute("SELECT value FROM meta WHERE key = 'schema_version'"
                                 ).fetchone()
        if row is None or row[0] != SCHEMA_VERSION:
            return (f"unknown ledger schema version {row[0] if row else None!r} (this "
                    f"engine writes {SCHEMA_VERSION})")
        return None


def _tampered(tampers: list[tuple[int, dict[str, Any]]]) -> tuple[int | None, str] | None:
    """(first bad record, reason) when a `tamper` record names foreign records or a
    rewritten ledger: the chain may be intact, but not every record in it is the gate's."""
    for rid, payload in tampers:
        run = str(payload.get("run_id", ""))[:32] or "?"
        foreign = [r for r in payload.get("foreign") or [] if isinstance(r, dict)]
        ids = sorted(int(r["id"]) for r in foreign if isinstance(r.get("id"), int))
        if ids:
            shown = ", ".join(map(str, ids[:20])) + (" ..." if len(ids) > 20 else "")
            return ids[0], (f"record(s) {shown} were appended by something other than the "
                            f"gate while proposed code ran (run {run}); record {rid} names "
                            "them as foreign: only the gate appends")
        if payload.get("ledger"):
            return rid, (f"record {rid}: while proposed code ran (run {run}) the ledger was "
                         f"tampered with: {str(payload['ledger'])[:300]}")
    return None


def _normal_sql(sql: str | None) -> str:
    return " ".join((sql or "").replace("IF NOT EXISTS ", "").split())


def _refuses(name: str, sql: str) -> bool:
    """Does trigger `name` (`<table>_no_<update|delete>`) still abort that statement on
    that table before it runs, whatever its message?"""
    table, _, event = name.rpartition("_no_")
    pattern = (rf"CREATE TRIGGER {name} BEFORE {event} ON {table} BEGIN SELECT "
               r"RAISE ?\( ?ABORT ?, ?'[^']*' ?\) ?; END;?")
    return re.fullmatch(pattern, sql.replace("( ", "(").replace(" )", ")"),
                        flags=re.IGNORECASE) is not None


def _is_timestamp(text: object) -> bool:
    if not isinstance(text, str):
        return False
    try:
        datetime.fromisoformat(text)
    except ValueError:
        return False
    return True


def _record(row: tuple) -> LedgerRecord:
    rid, kind, created, vdigest, text, prev, digest = row
    try:
        payload = json.loads(text)
    except ValueError:
        payload = None
    if not isinstance(payload, dict):  # a damaged row still lists; `verify` names it
        payload = {"unparseable_payload": str(text)}
    return LedgerRecord(id=rid, kind=kind, created_at=created, verifier_digest=vdigest,
                        payload=payload, prev_hash=prev, hash=digest)
