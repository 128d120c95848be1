"""Findings and verdicts: diagnostics are data."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from cakegov.check.exits import (  # re-exported: callers name them here
    EXIT_CLEAN,
    EXIT_INCOMPLETE,
    EXIT_INTERNAL,
    EXIT_REJECTED,
    EXIT_USAGE,
)
from cakegov.check.repair import Fix
from cakegov.ir.nodes import Span

Severity = Literal["blocking", "report", "hint"]
Authority = Literal["legality", "estimate", "coverage", "input", "internal"]
Verdict = Literal["clean", "rejected", "incomplete", "error"]

SEVERITIES: tuple[str, ...] = ("blocking", "report", "hint")


class Finding(BaseModel):
    """One diagnostic: what is wrong, where, which resource/role/stage, and why."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")
    code: str
    rule: str
    severity: Severity
    authority: Authority
    message: str
    file: str
    path: str
    span: Span | None = None
    resource: str | None = None
    role: str | None = None
    stage: int | None = None
    condition: str = ""
    hint: str | None = None
    evidence: dict[str, Any] = Field(default_factory=dict)
    fixes: tuple[Fix, ...] = ()
    doc_url: str | None = None  # the rule's section of docs/rules.md (docs_url.py)

    @field_validator("stage", mode="before")
    @classmethod
    def _stage_index(cls, value: Any) -> Any:
        """A stage is one ring index: `3`, also written `"3"` or `"stage 3"`; a range or
        any other text is not a stage (put it in `evidence`)."""
        if isinstance(value, str):
            text = value.strip().removeprefix("stage").strip()
            if not text.isdigit():
                raise ValueError(f"a stage is an integer index, not {value!r}")
            return int(text)
        if isinstance(value, bool):
            raise ValueError("a stage is an integer index, not a boolean")
        return value

    def sort_key(self) -> tuple:
        line = self.span.line if self.span else 0
        col = self.span.col if self.span else 0
        return (self.file, line, col, self.code, self.message)


class FileResult(BaseModel):
    """The verdict on one schedule file."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")
    file: str
    schedule: str | None = None
    sha256: str | None = None
    target: str | None = None
    workload: str | None = None
    verdict: Verdict
    findings: tuple[Finding, ...] = ()
    incomplete_reasons: tuple[str, ...] = ()
    # what the protocol analysis did that a reader of the verdict should know, e.g. that
    # symmetric warpgroups were explored through one (docs/checker.md)
    analysis_notes: tuple[str, ...] = ()


class CheckReport(BaseModel):
    """The result of one `cakegov check` run."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")
    schema_version: Literal[1] = 1
    engine_version: str
    verifier_digest: str
    results: tuple[FileResult, ...]


def verdict_of(findings: tuple[Finding, ...] | list[Finding], incomplete: bool) -> Verdict:
    """The verdict implied by a file's findings (DESIGN.md, Findings and verdicts)."""
    if any(f.authority in ("input", "internal") for f in findings):
        return "error"
    if any(f.severity == "blocking" for f in findings):
        return "rejected"
    if incomplete or any(f.authority == "coverage" for f in findings):
        return "incomplete"
    return "clean"




def exit_code(results: tuple[FileResult, ...] | list[FileResult]) -> int:
    """Exit status for a set of results: internal > input > rejected > incomplete > clean."""
    findings = [f for r in results for f in r.findings]
    if any(f.authority == "internal" for f in findings):
        return EXIT_INTERNAL
    if any(r.verdict == "error" for r in results):
        return EXIT_USAGE
    if any(r.verdict == "rejected" for r in results):
        return EXIT_REJECTED
    if any(r.verdict == "incomplete" for r in results):
        return EXIT_INCOMPLETE
    return EXIT_CLEAN
