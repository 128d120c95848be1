"""SARIF 2.1.0 for GitHub code scanning: stable ruleIds (the rule codes) and
partialFingerprints that survive line moves (code, file, IR path, resource, role, stage)."""

from __future__ import annotations

import hashlib
import json
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

from cakegov import __version__
from cakegov.check.docs_url import doc_base, rule_url
from cakegov.check.findings import FileResult, Finding
from cakegov.check.repair import Fix
from cakegov.check.rulebook import Rulebook
from cakegov.ir import errors

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_LEVEL = {"blocking": "error", "report": "warning", "hint": "note"}
_INPUT_CODES = {
    errors.SYNTAX: "syntax error",
    errors.ENCODING: "source is not UTF-8 text",
    errors.FORBIDDEN: "construct outside the schedule language",
    errors.ARG_TYPE: "argument of the wrong type",
    errors.LIMIT: "input exceeds a front-end limit",
    errors.STRUCTURE: "malformed schedule structure",
    "E106": "file cannot be read",
}


def fingerprint(f: Finding) -> str:
    stage = "" if f.stage is None else str(f.stage)  # stage 0 is a stage
    key = "\x1f".join([f.code, f.file, f.path, f.resource or "", f.role or "", stage,
                       f.message if f.authority in ("input", "internal") else ""])
    return hashlib.sha256(key.encode()).hexdigest()


def _uri(file: str, root: Path | None) -> str:
    """A URI reference for `file`: relative to the project root when inside it (what code
    scanning expects), else a `file://` URI; never a bare path with spaces or `%`."""
    path = Path(file)
    if root is not None:
        try:
            return quote(path.resolve().relative_to(root.resolve()).as_posix())
        except ValueError:
            pass
    return path.resolve().as_uri() if path.is_absolute() else quote(path.as_posix())


def _descriptors(rulebook: Rulebook) -> list[dict]:
    base = doc_base()
    out = []
    for rule in rulebook.rules:
        out.append({
            "id": rule.code,
            "name": "".join(part.capitalize() for part in rule.name.split("-")),
            "shortDescription": {"text": rule.summary},
            "fullDescription": {"text": rule.section("What it does") or rule.summary},
            "help": {"text": rule.doc, "markdown": rule.doc},
            "helpUri": rule_url(rule.code, rule.name, base),
            "defaultConfiguration": {"level": _LEVEL[rule.severity]},
            "properties": {"category": rule.category, "status": rule.status,
                           "version": rule.version, "tags": [rule.category, rule.name]},
        })
    for code, text in sorted(_INPUT_CODES.items()):
        out.append({
            "id": code, "name": "InputError",
            "shortDescription": {"text": text},
            "defaultConfiguration": {"level": "error"},
            "helpUri": rule_url(code, "input", base),
            "properties": {"category": "input"},
        })
    return out


def _result(f: Finding, index: dict[str, int], root: Path | None) -> dict:
    location: dict = {"physicalLocation": {"artifactLocation": {"uri": _uri(f.file, root)}}}
    if f.span is not None:
        location["physicalLocation"]["region"] = {
            "startLine": f.span.line, "startColumn": f.span.col,
            "endLine": f.span.end_line, "endColumn": max(f.span.end_col, f.span.col + 1)
            if f.span.end_line == f.span.line else f.span.end_col,
        }
    location["logicalLocations"] = [{"fullyQualifiedName": f.path, "kind": "member"}]
    result: dict = {
        "ruleId": f.code,
        "level": _LEVEL.get(f.severity, "error"),
        "message": {"text": f.message + (f" Hint: {f.hint}" if f.hint else "")},
        "locations": [location],
        "partialFingerprints": {"cakegovFinding/v1": fingerprint(f)},
        "properties": {k: v for k, v in (("resource", f.resource), ("role", f.role),
                       ("stage", f.stage), ("condition", f.condition),
                       ("authority", f.authority)) if v is not None and v != ""},
    }
    fixes = [_fix(fix, f.file, root) for fix in f.fixes if fix.edits
             and fix.applicability != "none"]
    if fixes:
        result["fixes"] = fixes
    if f.code in index:
        result["ruleIndex"] = index[f.code]
    steps = f.evidence.get("witness")
    if isinstance(steps, list):
        steps = [s if isinstance(s, dict) else {"text": str(s)} for s in steps]
    if steps:
        result["codeFlows"] = [{"threadFlows": [{"locations": [
            {"location": {
                "physicalLocation": {"artifactLocation": {"uri": _uri(f.file, root)},
                                     "region": {"startLine": max(1, int(s.get("line") or 1))}},
                "message": {"text": str(s.get("text", ""))}}}
            for s in steps]}]}]
    return result


def _fix(fix: Fix, file: str, root: Path | None) -> dict:
    """A SARIF fix: one artifactChange of the finding's file, a replacement per edit (an
    empty deletedRegion inserts). `machine` and `maybe` fixes are rendered, advice is
    not; the applicability is a property (SARIF has none)."""
    return {
        "description": {"text": fix.description},
        "artifactChanges": [{
            "artifactLocation": {"uri": _uri(file, root)},
            "replacements": [{
                "deletedRegion": {"startLine": e.span.line, "startColumn": e.span.col,
                                  "endLine": e.span.end_line, "endColumn": e.span.end_col},
                "insertedContent": {"text": e.text},
            } for e in fix.edits],
        }],
        "properties": {"applicability": fix.applicability},
    }


def render_sarif(results: list[FileResult], rulebook: Rulebook, root: Path | None = None
                 ) -> str:
    descriptors = _descriptors(rulebook)
    index = {d["id"]: i for i, d in enumerate(descriptors)}
    findings = [f for r in results for f in r.findings]
    internal = any(f.authority == "internal" for f in findings)
    doc = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "cakegov",
                "version": __version__,
                "semanticVersion": __version__,
                "rules": descriptors,
                "properties": {"verifierDigest": rulebook.digest()},
            }},
            "invocations": [{"executionSuccessful": not internal}],
            "results": [_result(f, index, root) for f in findings],
            "columnKind": "unicodeCodePoints",
        }],
    }
    problems = sarif_problems(doc)
    if problems:  # a renderer bug: never write (or upload) a document code scanning rejects
        raise SarifInvalid("; ".join(problems[:5]))
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


class SarifInvalid(Exception):
    """A SARIF document that does not validate against the SARIF 2.1.0 schema."""


@cache
def _validator() -> Any:
    import jsonschema

    schema = json.loads((Path(__file__).parent / "schemas" / "sarif-schema-2.1.0.json")
                        .read_text(encoding="utf-8"))
    return jsonschema.Draft4Validator(schema)


def sarif_problems(doc: Any) -> list[str]:
    """Where `doc` violates the OASIS SARIF 2.1.0 schema (vendored in schemas/; empty when
    it validates)."""
    return [f"{'/'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message}"[:300]
            for e in sorted(_validator().iter_errors(doc), key=lambda e: list(e.path))]
