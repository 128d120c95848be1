"""`cakegov check --fix`: apply the findings' machine-applicable fixes to the files.

A `machine` fix was re-checked by the engine on its own (cakegov/check/context.py,
`attempt`); several fixes in one file were not checked together. So the fixes of a file
are taken one at a time, in the order of the findings: a fix is kept when none of its
edits overlaps an edit already kept and the schedule with every kept fix applied
re-checks without a finding it did not have before (identity across edits: code,
resource, role; lines and IR paths move). The file is then replaced atomically (a
temporary file in the same directory, then a rename; its permission bits kept), but only
if it still holds the bytes that were checked. The result is the re-check of what was
written: what was fixed, what remains, and the verdict the exit status reports."""

from __future__ import annotations

import os
import stat
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from cakegov.check.findings import FileResult, Finding
from cakegov.check.repair import EditConflict, Fix, apply_edits, edit_offsets, overlapping
from cakegov.check.runner import Checker, expand_paths
from cakegov.ir.errors import InputError
from cakegov.ir.parse import decode_source


def identity(f: Finding) -> tuple[str, str, str]:
    """A finding's identity across an edit of its file."""
    return (f.code, f.resource or "", f.role or "")


@dataclass
class FileFix:
    """What `--fix` did to one file."""

    file: str
    before: FileResult
    after: FileResult
    applied: list[tuple[Finding, Fix]] = field(default_factory=list)
    skipped: list[tuple[Finding, Fix, str]] = field(default_factory=list)
    written: bool = False
    note: str = ""

    @property
    def fixed(self) -> list[Finding]:
        """Findings of the original check that the re-check no longer reports."""
        left = Counter(identity(f) for f in self.after.findings)
        out = []
        for f in self.before.findings:
            if left[identity(f)] > 0:
                left[identity(f)] -= 1
            else:
                out.append(f)
        return out


def machine_fixes(result: FileResult) -> list[tuple[Finding, Fix]]:
    return [(f, fix) for f in result.findings for fix in f.fixes
            if fix.applicability == "machine" and fix.edits]


def _new_findings(before: FileResult, after: FileResult) -> list[Finding]:
    had = Counter(identity(f) for f in before.findings)
    out = []
    for f in after.findings:
        if had[identity(f)] > 0:
            had[identity(f)] -= 1
        else:
            out.append(f)
    return out


def _count(result: FileResult, finding: Finding) -> int:
    return sum(1 for f in result.findings if identity(f) == identity(finding))


def plan_file(checker: Checker, data: bytes, file: str, before: FileResult
              ) -> tuple[str | None, FileFix]:
    """The fixed source of `data` (None when no fix is kept) and what was decided."""
    report = FileFix(file=file, before=before, after=before)
    candidates = machine_fixes(before)
    if not candidates:
        return None, report
    try:
        source = decode_source(data)  # the text the spans count in (no byte-order mark)
    except InputError:
        report.note = "not UTF-8 text"
        return None, report
    kept: list = []  # the edits of every kept fix
    for finding, fix in candidates:
        edits = [*kept, *fix.edits]
        try:
            if overlapping(edit_offsets(source, edits)) is not None:
                report.skipped.append((finding, fix, "overlaps an edit already applied: "
                                                     "run --fix again"))
                continue
            new = apply_edits(source, edits)
        except EditConflict as exc:
            report.skipped.append((finding, fix, str(exc)))
            continue
        after = checker.check_bytes(new.encode("utf-8"), file)
        added = _new_findings(before, after)
        if added or after.verdict == "error":
            what = ", ".join(sorted({f.code for f in added})) or "an error"
            report.skipped.append((finding, fix, f"together with the fixes before it, "
                                                 f"it brings {what}"))
            continue
        if _count(after, finding) >= _count(report.after, finding):
            report.skipped.append((finding, fix, "together with the fixes before it, "
                                                 "it does not remove its finding"))
            continue
        kept, report.after = edits, after
        report.applied.append((finding, fix))
    if not report.applied:
        return None, report
    return apply_edits(source, kept), report


def write_atomically(path: Path, data: bytes) -> None:
    """Replace `path` by `data` through a temporary file in its directory and a rename,
    keeping the file's permission bits; a symbolic link is written through (its target
    is fixed, the link stays)."""
    path = Path(os.path.realpath(path))
    mode = stat.S_IMODE(path.stat().st_mode)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".fix")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def fix_file(checker: Checker, path: Path) -> FileFix:
    """Check `path`, apply its kept machine fixes in place and re-check it."""
    file = str(path)
    try:
        data = path.read_bytes()
    except OSError:
        result = checker.check_path(path)
        return FileFix(file=file, before=result, after=result)
    before = checker.check_bytes(data, file)
    new, report = plan_file(checker, data, file, before)
    if new is None:
        return report
    try:
        if path.read_bytes() != data:
            report.note = "changed on disk while it was checked: not written"
            report.after, report.applied = before, []
            return report
        write_atomically(path, new.encode("utf-8"))
    except OSError as exc:
        report.note = f"not written: {exc.strerror or exc}"
        report.after, report.applied = before, []
        return report
    report.written = True
    return report


def fix_paths(checker: Checker, paths: list[Path]) -> list[FileFix]:
    """`fix_file` for every schedule the paths name (directories: their `*.cake`)."""
    return [fix_file(checker, p) for p in expand_paths(paths)]


def render_fix_summary(reports: list[FileFix]) -> str:
    """What was fixed and what remains, one line each, then a count."""
    lines: list[str] = []
    for r in reports:
        for f in r.fixed:
            line = f.span.line if f.span else 0
            lines.append(f"fixed: {r.file}:{line}: [{f.code}] {f.message}")
        for f, fix, why in r.skipped:
            lines.append(f"not applied: {r.file}: [{f.code}] {fix.description} ({why})")
        if r.note:
            lines.append(f"{r.file}: {r.note}")
        for f in r.after.findings:
            line = f.span.line if f.span else 0
            lines.append(f"remains: {r.file}:{line}: [{f.code}] {f.message}")
    fixed = sum(len(r.fixed) for r in reports)
    files = sum(1 for r in reports if r.written)
    left = sum(len(r.after.findings) for r in reports)
    lines.append(f"fixed {fixed} finding(s) in {files} file(s); {left} remain")
    return "\n".join(lines) + "\n"
