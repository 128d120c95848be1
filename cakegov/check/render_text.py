"""Human-readable findings, rustc style: the source line with a caret under the span."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from cakegov.check.findings import FileResult, Finding
from cakegov.ir.parse import source_lines

_LEVEL = {"blocking": "error", "report": "warning", "hint": "help"}
WITNESS_STEPS = 12  # the end of a witness is where the protocol goes wrong


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
            out.append(f"{gutter} |")
            out.append(f"{f.span.line} | {text}")
            out.append(f"{gutter} | {' ' * (f.span.col - 1)}{'^' * length}")
    where = [f"{k}: {v}" for k, v in (("resource", f.resource), ("role", f.role),
                                          ("stage", f.stage)) if v]
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
        for edit in fix.edits:
            what = "insert" if (edit.span.line, edit.span.col) == (edit.span.end_line,
                                                                   edit.span.end_col) \
                else "replace"
            shown = edit.text.strip() or "(delete)"
            out.append(f"   = fix ({fix.applicability}): line {edit.span.line}: {what} "
                       f"`{shown}`")
    return "\n".join(out)


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
            blocks.append(f"clean: {r.file} ({r.schedule}, sha256 {r.sha256[:12]})")
    summary = ", ".join(f"{counts[v]} {v}" for v in ("clean", "rejected", "incomplete", "error")
                        if counts.get(v))
    n = len(results)
    blocks.append(f"checked {n} schedule{'s' if n != 1 else ''}: {summary or 'nothing'}")
    return "\n\n".join(blocks) + "\n"
