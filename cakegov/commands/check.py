"""The `cakegov check` command: parse, check and report schedules; record them with
--record, fix them with --fix."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from cakegov.commands.shared import (
    STDIN_NAME,
    STDIN_PATH,
    Format,
    LedgerOpt,
    QuietOpt,
    RulesOpt,
    WorkloadsOpt,
    err,
    load_rulebook,
    load_wls,
    open_ledger,
    print_text,
    project_root,
    read_stdin,
    select_codes,
    styled,
    usage_error,
)

if TYPE_CHECKING:
    from cakegov.check.findings import FileResult
    from cakegov.check.rulebook import Rulebook
    from cakegov.check.runner import Checker


def check(
    paths: Annotated[list[Path], typer.Argument(metavar="PATH", help="Schedule files or "
                     "directories (directories are searched for *.cake). `-` reads one "
                     "schedule from standard input.")],
    fmt: Annotated[Format, typer.Option("--format", "-f", help="Output format.")] = Format.text,
    target: Annotated[str | None, typer.Option("--target", metavar="TARGET", help="Check "
                      "against this target instead of the one the schedule names.")] = None,
    preview: Annotated[bool, typer.Option("--preview", help="Also run preview rules. "
                       "Without it they run silently and only a note says when they "
                       "would have reported something.")] = False,
    select: Annotated[list[str] | None, typer.Option("--select", metavar="CODE", help="Run "
                      "only these rules, by code or name (repeatable, or comma-separated). "
                      "A code or name no rule has is an error.")] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", metavar="FILE", help="Write "
                      "the report to this file instead of standard output.")] = None,
    stdin_filename: Annotated[str | None, typer.Option("--stdin-filename", metavar="NAME",
                              help="The file name a schedule read from standard input "
                              "(`-`) has in messages and results (default: <stdin>).")]
    = None,
    record: Annotated[bool, typer.Option("--record", help="Append one check record per "
                      "file, with its source, to the audit ledger.")] = False,
    fix: Annotated[bool, typer.Option("--fix", help="Apply the machine-applicable fixes "
                   "in place (atomically), re-check, and report what was fixed and what "
                   "remains (on standard error); the report and exit status are the "
                   "re-check's.")] = False,
    quiet: QuietOpt = False,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Neither read nor write the "
                        "result cache (plain piped checks are remembered by the content "
                        "of every input; $CAKEGOV_NO_CACHE=1 does the same).")] = False,
    ledger: LedgerOpt = None,
    rules: RulesOpt = None,
    workloads: WorkloadsOpt = None,
) -> None:
    """Check schedules. Exit 0 clean, 1 rejected, 2 usage or input error, 3 incomplete."""
    # `no_cache` acts before this function runs: `main` serves and stores only the plain
    # command line (cakegov/check/result_cache.py), and any other option, this one
    # included, makes a line not plain.
    del no_cache
    from cakegov.check.findings import exit_code
    from cakegov.check.runner import Checker, expand_paths
    from cakegov.progress import progress

    book = load_rulebook(rules)
    if target is not None and target not in book.targets:
        raise usage_error(f"unknown target {target!r}; known: {', '.join(sorted(book.targets))}")
    only = select_codes(book, select)
    wls = load_wls(workloads)
    from_stdin = [p for p in paths if p == STDIN_PATH]
    if len(from_stdin) > 1:
        raise usage_error("`-` (standard input) can be given once")
    if stdin_filename is not None and not from_stdin:
        raise usage_error("--stdin-filename names the schedule read from `-`; no `-` given")
    if stdin_filename is not None and not stdin_filename.strip():
        raise usage_error("--stdin-filename is empty")
    if stdin_filename is not None and any(ord(c) < 32 or 127 <= ord(c) < 160
                                          for c in stdin_filename):
        raise usage_error("--stdin-filename contains control characters (it is printed "
                          "in reports and on the terminal)")
    missing = [str(p) for p in paths if p != STDIN_PATH and not p.exists()]
    if missing:
        raise usage_error(f"no such file or directory: {', '.join(missing)}")
    checker = Checker(book, wls, target_override=target, preview=preview, only=only)
    sources: dict[str, bytes] = {}  # what came from standard input, by its name
    if from_stdin:
        sources[stdin_filename or STDIN_NAME] = read_stdin()
    files = expand_paths([p for p in paths if p != STDIN_PATH])
    if not files and not sources:
        raise usage_error("no *.cake schedules found")
    if fix and sources:
        raise usage_error("--fix rewrites files in place; standard input (`-`) cannot be "
                          "fixed")
    results = []
    if fix:
        from cakegov.check.fix import fix_paths, render_fix_summary

        fixed = fix_paths(checker, files)
        results = [r.after for r in fixed]
        err.print(render_fix_summary(fixed), end="", markup=False)
    else:
        with progress("checking", len(files) + len(sources), quiet=quiet) as advance:
            for path in paths:  # in the order given; `-` where it stands
                if path == STDIN_PATH:
                    name, data = next(iter(sources.items()))
                    results.append(checker.check_bytes(data, name))
                    advance(1)
            for file in files:
                results.append(checker.check_path(file))
                advance(1)
    if record:
        _record_checks(results, checker, ledger, sources)
    text = _render_check(results, fmt, book, sources)
    if output is not None:
        from cakegov.fsio import atomic_write

        if any(os.path.realpath(output) == os.path.realpath(r.file) for r in results):
            raise usage_error(f"-o {output} is one of the schedules being checked: the report "
                              "would replace it")
        try:
            atomic_write(output, text)
        except OSError as exc:
            raise usage_error(f"cannot write {output}: {exc.strerror or exc}") from None
    elif fmt is Format.text:
        print_text(text)
    else:
        sys.stdout.write(text)
    if not preview and only is None:
        _preview_note(book, wls, target, results, sources, quiet)
    raise typer.Exit(exit_code(results))


def _render_check(results: list[FileResult], fmt: Format, book: Rulebook,
                  sources: dict[str, bytes]) -> str:
    from cakegov.check.render_json import render_json
    from cakegov.check.render_sarif import render_sarif
    from cakegov.check.render_text import render_text
    from cakegov.ir.parse import source_lines

    if fmt is Format.json:
        return render_json(results, book.digest())
    if fmt is Format.sarif:
        return render_sarif(results, book, root=project_root())

    def read(file: str) -> list[str]:
        from cakegov.check.runner import NotRegular, read_regular

        data = sources.get(file)
        if data is None:
            try:
                data = read_regular(Path(file))  # never a FIFO or a device
            except (OSError, NotRegular):
                return []
        return source_lines(data.decode("utf-8", "replace"))

    return render_text(results, read=read)


def _preview_note(book: Rulebook, wls: dict[str, Any], target: str | None,
                  results: list[FileResult], sources: dict[str, bytes], quiet: bool) -> None:
    """Run the preview rules silently and say, on standard error, which would have
    reported something. The verdict and the report above never count them."""
    from cakegov.check.runner import Checker

    previews = {r.code: r for r in book.rules if r.status == "preview"}
    if not previews:
        return
    again = Checker(book, wls, target_override=target, preview=True)
    hits: dict[str, set[str]] = {}
    for result in results:
        if result.verdict == "error":  # did not parse: no rule runs on it
            continue
        data = sources.get(result.file)
        redo = (again.check_bytes(data, result.file) if data is not None
                else again.check_path(Path(result.file)))
        for f in redo.findings:
            if f.code in previews and f.authority != "internal":
                hits.setdefault(f.code, set()).add(result.file)
    if not hits:
        return
    named = ", ".join(f"{code} {previews[code].name} ({len(files)} file"
                      f"{'s' if len(files) != 1 else ''})" for code, files in sorted(hits.items()))
    err.print(styled(f"note: preview rule(s) would have reported findings: {named}; run "
                     "with --preview to see them (the verdict above does not count preview "
                     "rules)", style="bold yellow"))


def _record_checks(results: list[FileResult], checker: Checker, ledger_path: Path | None,
                   sources: dict[str, bytes] | None = None) -> None:
    """`check --record`: one ledger record per file; the summary goes to standard error."""
    from cakegov.govern.audit import record_checks
    from cakegov.govern.ledger import LedgerError

    with open_ledger(ledger_path, create=True) as ledger:
        try:
            records = record_checks(ledger, results, checker, sources)
        except LedgerError as exc:
            raise usage_error(str(exc)) from None
    err.print(f"recorded {len(records)} check record(s) in {ledger.path} "
              f"(#{records[0].id}-#{records[-1].id})", markup=False)

COMMANDS = {"check": check}
