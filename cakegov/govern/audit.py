"""Check records for the ledger, their one-line summaries and their in-toto export.

`cakegov check --record` appends one "check" record per file (`record_checks`); `cakegov
audit export` turns each check record into an in-toto Statement v1 with the test-result
predicate (https://in-toto.io/attestation/test-result/v0.1). docs/ledger.md."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from cakegov import __version__
from cakegov.check.findings import FileResult, Finding
from cakegov.check.runner import Checker
from cakegov.govern.ledger import Ledger, LedgerError, LedgerRecord, blob_sha256, canonical_json
from cakegov.ir.canonical import schedule_sha256
from cakegov.ir.errors import InputError
from cakegov.ir.parse import MAX_SOURCE_BYTES, parse_bytes

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
TEST_RESULT_TYPE = "https://in-toto.io/attestation/test-result/v0.1"


def rulebook_digest(checker: Checker) -> str:
    """sha256 of the rulebook's plugin table alone (the verifier digest adds the engine)."""
    data = canonical_json(checker.rulebook.lock_data())
    return hashlib.sha256(data.encode("ascii")).hexdigest()


def finding_entry(finding: Finding) -> dict[str, Any]:
    """The part of a finding the ledger keeps: enough to say what changed on replay."""
    span = finding.span
    return {
        "code": finding.code, "rule": finding.rule, "severity": finding.severity,
        "authority": finding.authority, "line": span.line if span else None,
        "col": span.col if span else None, "message": finding.message,
        "condition": finding.condition, "hint": finding.hint, "resource": finding.resource,
        "role": finding.role, "stage": finding.stage,
    }


def check_options(checker: Checker) -> dict[str, Any]:
    """The checker settings a replay must reuse to judge the same question again."""
    return {"preview": checker.preview, "target": checker.target_override,
            "select": sorted(checker.only) if checker.only is not None else None}


def check_payload(result: FileResult, source: bytes | None, checker: Checker) -> dict[str, Any]:
    """The payload of one "check" record."""
    return {
        "file": result.file,
        "schedule": result.schedule,
        "schedule_sha256": result.sha256,
        "source_sha256": blob_sha256(source) if source is not None else None,
        "source_bytes": len(source) if source is not None else None,
        "target": result.target,
        "workload": result.workload,
        "verdict": result.verdict,
        "findings": [finding_entry(f) for f in result.findings],
        "incomplete_reasons": list(result.incomplete_reasons),
        "rules_run": [r.code for r in checker.active_rules()],
        "options": check_options(checker),
        "rulebook": str(checker.rulebook.root),
        "rulebook_digest": rulebook_digest(checker),
        "engine_version": __version__,
    }


def _source(result: FileResult, checker: Checker,
            given: Mapping[str, bytes] | None = None) -> bytes | None:
    """The bytes that were judged (`given`: what was read from standard input, by name),
    else read again; refused when the file changed meanwhile."""
    if given is not None and result.file in given:
        data = given[result.file]
    else:
        try:
            with Path(result.file).open("rb") as handle:
                data = handle.read(MAX_SOURCE_BYTES + 1)
        except OSError:
            return None
    if len(data) > MAX_SOURCE_BYTES:
        return None
    if result.sha256 is not None:
        try:
            schedule = parse_bytes(data, checker.vocabulary)
        except InputError:
            schedule = None
        if schedule is not None and checker.target_override is not None:
            schedule = schedule.model_copy(update={"target": checker.target_override})
        if schedule is None or schedule_sha256(schedule) != result.sha256:
            raise LedgerError(f"{result.file} changed while it was checked; not recorded")
    return data


def record_checks(ledger: Ledger, results: Iterable[FileResult],
                  checker: Checker, sources: Mapping[str, bytes] | None = None,
                  ) -> list[LedgerRecord]:
    """Append one "check" record per result, with the judged source stored as a blob.

    `sources`: the bytes of schedules that have no file (standard input), by name."""
    digest = checker.rulebook.digest()
    out = []
    for result in results:
        source = _source(result, checker, sources)
        blobs = {blob_sha256(source): source} if source is not None else None
        out.append(ledger.append("check", check_payload(result, source, checker), digest,
                                 blobs=blobs))
    return out


def summary(record: LedgerRecord) -> str:
    """One line for `audit list`: the verdict (or outcome) and what it is about."""
    p = record.payload
    if record.kind == "check":
        codes = sorted({f.get("code", "?") for f in p.get("findings", [])
                        if f.get("severity") == "blocking"})
        why = f" ({', '.join(codes)})" if codes else ""
        return f"{p.get('verdict', '?')}{why} {p.get('file', '?')}"
    if record.kind == "tamper":
        foreign = [str(r.get("id")) for r in p.get("foreign") or [] if isinstance(r, dict)]
        files = len({*(p.get("added") or []), *(p.get("changed") or []),
                     *(p.get("removed") or [])})
        return (f"tampered: {files} file(s) changed, foreign record(s) "
                f"{', '.join(foreign) or 'none'}" + (", ledger rewritten" if p.get("ledger")
                                                     else ""))
    head = next((str(p[k]) for k in ("verdict", "outcome", "status", "result") if k in p), "")
    about = next((str(p[k]) for k in ("summary", "title", "schedule", "file", "change")
                  if k in p and isinstance(p[k], str | int | float)), "")
    return " ".join(x for x in (head, about) if x) or f"{len(p)} fields"


def _test_results(payload: dict[str, Any]) -> tuple[str, list[str], list[str], list[str]]:
    findings = payload.get("findings", [])
    failed = sorted({f["code"] for f in findings if f.get("severity") == "blocking"})
    warned = sorted({f["code"] for f in findings} - set(failed))
    passed = sorted(set(payload.get("rules_run", [])) - set(failed) - set(warned))
    verdict = payload.get("verdict")
    if verdict in ("rejected", "error") or failed:
        result = "FAILED"
    elif verdict == "incomplete" or warned:
        result = "WARNED"
    else:
        result = "PASSED"
    return result, passed, warned, failed


def statement(record: LedgerRecord) -> dict[str, Any] | None:
    """The in-toto Statement v1 (test-result predicate) of a check record; None for a
    record that is not a check or has no stored source to name as subject."""
    p = record.payload
    if record.kind != "check" or not p.get("source_sha256"):
        return None
    result, passed, warned, failed = _test_results(p)
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": p.get("file", ""), "digest": {"sha256": p["source_sha256"]}}],
        "predicateType": TEST_RESULT_TYPE,
        "predicate": {
            "result": result,
            "configuration": [
                {"name": "cakegov-verifier", "digest": {"sha256": record.verifier_digest},
                 "annotations": {"engineVersion": p.get("engine_version"),
                                 "options": p.get("options")}},
                {"name": "cakegov-rulebook", "digest": {"sha256": p.get("rulebook_digest")},
                 "annotations": {"path": p.get("rulebook")}},
                {"name": f"cakegov-ledger-record-{record.id}",
                 "digest": {"sha256": record.hash},
                 "annotations": {"createdAt": record.created_at, "verdict": p.get("verdict"),
                                 "scheduleSha256": p.get("schedule_sha256")}},
            ],
            "passedTests": passed,
            "warnedTests": warned,
            "failedTests": failed,
        },
    }


def export_lines(records: Iterable[LedgerRecord]) -> Iterator[str]:
    """One JSON line per exportable record, oldest first."""
    for record in records:
        stmt = statement(record)
        if stmt is not None:
            yield json.dumps(stmt, sort_keys=True, separators=(",", ":")) + "\n"
