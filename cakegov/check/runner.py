"""Runs a rulebook over schedule files and turns findings into verdicts."""

from __future__ import annotations

import os
import stat
import traceback
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from cakegov.check.context import CheckContext, RuleContext, Work
from cakegov.check.docs_url import rule_url
from cakegov.check.findings import FileResult, Finding, verdict_of
from cakegov.check.rulebook import Rulebook, RulePlugin
from cakegov.corpus.workloads import Workload
from cakegov.ir.canonical import schedule_sha256
from cakegov.ir.errors import InputError
from cakegov.ir.parse import MAX_SOURCE_BYTES, Vocabulary, decode_source, parse_bytes

SCHEDULE_SUFFIX = ".cake"


def expand_paths(paths: Iterable[Path]) -> list[Path]:
    """Files as given; directories become their `*.cake` files, recursively, sorted."""
    out: list[Path] = []
    for path in paths:
        if path.is_dir():
            out.extend(sorted(p for p in path.rglob(f"*{SCHEDULE_SUFFIX}") if p.is_file()))
        else:
            out.append(path)
    return out


def _input_finding(file: str, exc: InputError) -> Finding:
    return Finding(
        code=exc.code, rule="input", severity="blocking", authority="input",
        message=exc.message, file=file, path="source", span=exc.span, hint=exc.hint,
        doc_url=rule_url(exc.code, "input"),
    )


class NotRegular(Exception):
    """A path names a directory, FIFO, socket or device, not a file."""


def read_regular(path: Path, limit: int = MAX_SOURCE_BYTES + 1) -> bytes:
    """At most `limit` bytes of the regular file at `path` (one past the size limit is
    enough to refuse a schedule). Opened without blocking and checked on the open handle,
    so a FIFO, a device or a symlink to one (swapped in after any earlier look) is never
    read: NotRegular."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegular(str(path))
        chunks, left = [], limit
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


@dataclass
class Checker:
    """A rulebook plus the workloads it checks against."""

    rulebook: Rulebook
    workloads: dict[str, Workload]
    target_override: str | None = None
    preview: bool = False
    only: frozenset[str] | None = None
    _vocab: Vocabulary | None = field(default=None, init=False, repr=False)

    @property
    def vocabulary(self) -> Vocabulary:
        if self._vocab is None:
            self._vocab = Vocabulary(
                primitives=self.rulebook.spellings(),
                workloads={name: wl.sig for name, wl in self.workloads.items()},
            )
        return self._vocab

    def active_rules(self) -> list[RulePlugin]:
        rules = []
        for rule in self.rulebook.rules:
            if self.only is not None:
                if rule.code in self.only or rule.name in self.only:
                    rules.append(rule)
                continue
            if rule.status == "stable" or (rule.status == "preview" and self.preview):
                rules.append(rule)
        return rules

    def check_path(self, path: Path) -> FileResult:
        file = str(path)

        def unreadable(reason: str) -> FileResult:
            return FileResult(file=file, verdict="error", findings=(Finding(
                code="E106", rule="input", severity="blocking", authority="input",
                message=f"cannot read file: {reason}", file=file, path="source",
                doc_url=rule_url("E106", "input"),
            ),))

        try:
            data = read_regular(path)
        except NotRegular:
            return unreadable("not a regular file")
        except OSError as exc:
            return unreadable(exc.strerror or str(exc))
        return self.check_bytes(data, file)

    def check_bytes(self, data: bytes, file: str) -> FileResult:
        return self.check_bytes_with_work(data, file)[0]

    def check_bytes_with_work(self, data: bytes, file: str) -> tuple[FileResult, Work]:
        """The result, and the analysis work units the check spent (its own analysis and
        the repair search's re-analyses: context.Work), which the diagnosis budget bounds
        and tests compare between a schedule and its edits."""
        work = Work()
        try:
            schedule = parse_bytes(data, self.vocabulary)
        except InputError as exc:
            return FileResult(file=file, verdict="error",
                              findings=(_input_finding(file, exc),)), work
        if self.target_override is not None:
            schedule = schedule.model_copy(update={"target": self.target_override})
        ctx = self.context(schedule, file)
        ctx.work = work
        ctx._source = decode_source(data)
        ctx._reanalyze = self._reanalyze
        findings: list[Finding] = []
        rules = self.active_rules()
        structural = [r for r in rules if r.phase == "main" and r.category != "protocol"]
        protocol = [r for r in rules if r.phase in ("early", "main", "late")
                    and r.category == "protocol"]
        final = [r for r in rules if r.phase == "final"]
        self._run(structural, ctx, findings, file)
        if not any(f.severity == "blocking" for f in findings):
            # The protocol analysis runs once, in the engine, before any protocol rule and
            # charged to none; a schedule a structural rule rejected is not analysed (its
            # lowered protocol may not mean what it says: one root cause, one finding).
            try:
                _ = ctx.protocol
            except Exception as exc:  # an engine failure is internal, never a verdict
                tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
                return FileResult(file=file, verdict="error", findings=(*findings, Finding(
                    code="P098", rule="protocol-bounds", severity="blocking",
                    authority="internal", message=f"the protocol analysis failed: {tb}",
                    file=file, path="schedule", doc_url=rule_url("P098", "protocol-bounds")))
                ), work
        else:
            ctx.__dict__["protocol"] = None
        # Repairs are first accepted only when they leave no anomaly at all, so that the
        # rule whose fix explains everything wins; then, for what is left (a schedule with
        # several defects), when they remove their anomaly without adding one.
        ctx.strict = True
        self._run(protocol, ctx, findings, file)
        ctx.strict = False
        ctx.findings = list(findings)
        if ctx.unclaimed() and not any(f.authority == "internal" for f in findings):
            self._run(protocol, ctx, findings, file)
        self._run(final, ctx, findings, file)
        findings.sort(key=Finding.sort_key)
        reasons = tuple(f.message for f in findings if f.authority == "coverage")
        analysed = ctx.__dict__.get("protocol")
        notes = tuple(f"symmetry: {note}" for note in analysed.reductions) \
            if analysed is not None else ()
        return FileResult(
            file=file, schedule=schedule.name, sha256=schedule_sha256(schedule),
            target=schedule.target, workload=schedule.workload,
            verdict=verdict_of(findings, incomplete=bool(reasons)),
            findings=tuple(findings), incomplete_reasons=reasons, analysis_notes=notes,
        ), work

    @staticmethod
    def _run(rules: list[RulePlugin], ctx: CheckContext, findings: list[Finding],
             file: str) -> None:
        for rule in rules:
            try:
                ctx.findings = list(findings)
                ctx._begin_rule()
                findings.extend(rule.check(RuleContext(ctx, rule)))
            except Exception as exc:  # a crashing rule is an internal error, never a finding
                tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
                findings.append(Finding(
                    code=rule.code, rule=rule.name, severity="blocking", authority="internal",
                    message=f"rule {rule.code} {rule.name} crashed: {tb}", file=file,
                    path="schedule", doc_url=rule_url(rule.code, rule.name),
                ))

    def context(self, schedule, file: str) -> CheckContext:
        return CheckContext(
            schedule=schedule,
            file=file,
            target=self.rulebook.targets.get(schedule.target),
            workload=self.workloads.get(schedule.workload),
            primitives=self.rulebook.primitives,
            known_targets=tuple(sorted(self.rulebook.targets)),
        )

    def _reanalyze(self, source: str, only=None, meter: Work | None = None,
                   tolerate: frozenset[str] = frozenset()):
        """The protocol anomalies of an edited schedule: how the engine re-checks a rule's
        proposed repair; `only` limits the analysis to those (sizes, CTA) programs. None
        when the edited schedule does not parse or lower, when a structural rule rejects
        it, or when its analysis is incomplete other than where the original's was
        (`tolerate`: the original's incomplete reasons): a repair must leave a schedule
        that is checked in full wherever the original was. `meter` adds up the
        analysis work (context.units)."""
        try:
            schedule = parse_bytes(source.encode("utf-8"), self.vocabulary)
        except InputError:
            return None
        if self.target_override is not None:
            schedule = schedule.model_copy(update={"target": self.target_override})
        ctx = self.context(schedule, "<repair>")
        findings: list[Finding] = []
        self._run([r for r in self.active_rules() if r.phase == "main"
                   and r.category != "protocol"], ctx, findings, "<repair>")
        if any(f.severity == "blocking" for f in findings):
            return None
        result = ctx.protocol if only is None else ctx.protocol_only(only)
        if meter is not None and result is not None:
            meter.add(result, whole=only is None)
        if result is None or not set(result.incomplete) <= tolerate:
            return None
        return tuple(result.anomalies)

    def check_paths(self, paths: Iterable[Path]) -> list[FileResult]:
        return [self.check_path(p) for p in expand_paths(paths)]
