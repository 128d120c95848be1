"""JSON findings for agents. The schema is `docs/findings.schema.json` (generated from
`CheckReport`; a test keeps it in sync)."""

from __future__ import annotations

import json

from cakegov import __version__
from cakegov.check.findings import CheckReport, FileResult


def build_report(results: list[FileResult], digest: str) -> CheckReport:
    return CheckReport(engine_version=__version__, verifier_digest=digest,
                       results=tuple(results))


def render_json(results: list[FileResult], digest: str) -> str:
    data = build_report(results, digest).model_dump(mode="json")
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def json_schema() -> str:
    """The JSON Schema (draft 2020-12) of `render_json` output."""
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema",
              **CheckReport.model_json_schema()}
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"
