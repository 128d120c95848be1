"""Human-readable findings, rustc style: the source line with a caret under the span."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from cakegov.check.findings import FileResult, Finding
from cakegov.check.repair import Edit
from cakegov.ir.parse import source_lines

_LEVEL = {"blocking": "error", "report": "warning", "hint": "help"}
WITNESS_STEPS = 12  # the end of a witness is where the protocol goes wrong


SNIPPET_WIDTH = 160  # characters of a source line shown under a finding


def _source_lines(file: str, cache: dict[str, list[str]]) -> list[str]:
    if file not in cache:
        try:
            cache[file] = source_lines(Path(file).read_bytes().decode("utf-8", "replace"))
        except OSError:
            cache[file] = []
    return cache[file]


def render_finding(f: Finding, lines: list[str]) -> str:
    level = "internal error" if f.authority == "internal" else _LEVEL.get(f.severity, "error")
    out = [f"{level}[{f.code}]: {f.message}"]
    if f.span is None:
        out.append(f"  --> {f.file}")
    else:
        out.append(f"  --> {f.file}:{f.span.line}:{f.span.col}")
        width = len(str(f.span.line))
        gutter = " " * width
        if 1 <= f.span.line <= len(lines):
            text = lines[f.span.line - 1].replace("\t", " ")
            end = f.span.end_col if f.span.end_line == f.span.line else len(text) + 1
            length = max(1, min(end, len(text) + 1) - f.span.col)
            col = f.span.col
            if len(text) > SNIPPET_WIDTH:  # a window of the line around the span
                start = max(0, min(col - 1 - SNIPPET_WIDTH // 4, len(text) - SNIPPET_WIDTH))
                lead = "..." if start else ""
                tail = "..." if start + SNIPPET_WIDTH < len(text) else ""
                text = lead + text[start:start + SNIPPET_WIDTH] + tail
                col = col - start + len(lead)
                length = max(1, min(length, SNIPPET_WIDTH - (col - 1 - len(lead))))
            out.append(f"{gutter} |")
            out.append(f"{f.span.line} | {text}")
            out.append(f"{gutter} | {' ' * (col - 1)}{'^' * length}")
    where = [f"{k}: {v}" for k, v in (("resource", f.resource), ("role", f.role),
                                          ("stage", f.stage)) if v is not None and v != ""]
    if where:
        out.append(f"   = {'   '.join(where)}")
    out.append(f"   = at: {f.path}")
    if f.condition:
        out.append(f"   = violated: {f.condition}")
    trace = f.evidence.get("witness")
    if isinstance(trace, list) and trace:
        shown = trace[-WITNESS_STEPS:]
        skipped = len(trace) - len(shown)
        out.append(f"   = witness ({len(trace)} steps from the start"
                   + (f", last {len(shown)} shown; --format json has all" if skipped else "")
                   + "):")
        out.extend(f"       {skipped + i + 1}. "
                   f"{step.get('text', '') if isinstance(step, dict) else step}"
                   for i, step in enumerate(shown))
    if f.hint:
        out.append(f"   = help: {f.hint}")
    for fix in f.fixes:
        out.append(f"   = fix ({fix.applicability}): {fix.description}")
        out.extend(f"       {edit_text(edit, lines)}" for edit in fix.edits)
    return "\n".join(out)


def _shown(text: str) -> str:
    return "`" + text.replace("\n", "\\n") + "`"


def edit_text(edit: Edit, lines: list[str]) -> str:
    """One edit as `LINE:COL: replace `old` with `new`` (insert, delete), in the source's
    own text; a multi-line or unreadable old text is named by its lines only."""
    s = edit.span
    at = f"{s.line}:{s.col}"
    new = edit.text
    if (s.line, s.col) == (s.end_line, s.end_col):
        return f"{at}: insert {_shown(new)}"
    old = None
    if s.line == s.end_line and 1 <= s.line <= len(lines):
        old = lines[s.line - 1][s.col - 1:s.end_col - 1]
    elif s.end_col == 1 and s.end_line == s.line + 1 and 1 <= s.line <= len(lines):
        old = lines[s.line - 1][s.col - 1:] + "\n"  # a whole line with its end
    what = _shown(old) if old is not None else f"lines {s.line}-{s.end_line}"
    if not new:
        return f"{at}: delete {what}"
    return f"{at}: replace {what} with {_shown(new)}"


def render_text(results: list[FileResult], *, show_clean: bool = True,
                read: Callable[[str], list[str]] | None = None) -> str:
    cache: dict[str, list[str]] = {}
    blocks: list[str] = []
    counts: dict[str, int] = {}
    for r in results:
        counts[r.verdict] = counts.get(r.verdict, 0) + 1
        lines = read(r.file) if read else _source_lines(r.file, cache)
        for f in r.findings:
            blocks.append(render_finding(f, lines))
        if r.verdict == "incomplete":
            for reason in r.incomplete_reasons:
                blocks.append(f"incomplete: {r.file}: {reason}")
        if show_clean and r.verdict == "clean":
            blocks.append(f"clean: {r.file} ({r.schedule}, sha256 {r.sha256[:12]})"
                          + "".join(f"\n  note: {note}" for note in r.analysis_notes))
    summary = ", ".join(f"{counts[v]} {v}" for v in ("clean", "rejected", "incomplete", "error")
                        if counts.get(v))
    n = len(results)
    blocks.append(f"checked {n} schedule{'s' if n != 1 else ''}: {summary or 'nothing'}")
    return "\n\n".join(blocks) + "\n"
