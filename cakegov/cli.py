"""The `cakegov` command line. Each command is a thin call into one module."""

from __future__ import annotations

import os
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from cakegov import __version__
from cakegov.check.findings import EXIT_INTERNAL, EXIT_REJECTED, EXIT_USAGE, exit_code
from cakegov.check.lock import check_lock, lock_path, read_lock, write_lock
from cakegov.check.rulebook import PluginError, Rulebook
from cakegov.corpus.workloads import WorkloadError, load_workloads

app = typer.Typer(
    name="cakegov",
    help="Governs a verifier for GPU kernel schedules: check schedules, manage the rulebook.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
rules_app = typer.Typer(help="Inspect the rulebook's rules.", no_args_is_help=True)
app.add_typer(rules_app, name="rules")

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


class Format(StrEnum):
    text = "text"
    json = "json"
    sarif = "sarif"


def project_root(start: Path | None = None) -> Path | None:
    """The nearest directory at or above `start` that holds `rules/` and `corpus/`."""
    here = (start or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        if (candidate / "rules" / "checks").is_dir() and (candidate / "corpus").is_dir():
            return candidate
    return None


def usage_error(message: str) -> typer.Exit:
    err.print(Text(f"error: {message}", style="bold red"))
    return typer.Exit(EXIT_USAGE)


def resolve_rules(rules: Path | None) -> Path:
    if rules is None and os.environ.get("CAKEGOV_RULES"):
        rules = Path(os.environ["CAKEGOV_RULES"])
    if rules is None:
        root = project_root()
        if root is None:
            raise usage_error("no rulebook found: run inside a cakegov project or pass --rules")
        rules = root / "rules"
    return rules


def resolve_workloads(workloads: Path | None) -> Path:
    if workloads is None and os.environ.get("CAKEGOV_WORKLOADS"):
        workloads = Path(os.environ["CAKEGOV_WORKLOADS"])
    if workloads is None:
        root = project_root()
        if root is None:
            raise usage_error("no workloads found: pass --workloads")
        workloads = root / "corpus" / "workloads"
    return workloads


def load_rulebook(rules: Path | None) -> Rulebook:
    try:
        return Rulebook.load(resolve_rules(rules))
    except PluginError as exc:
        raise usage_error(f"invalid plugin {exc}") from None


RulesOpt = Annotated[Path | None, typer.Option("--rules", help="Rulebook directory "
                     "(default: ./rules of the enclosing project, or $CAKEGOV_RULES).")]
WorkloadsOpt = Annotated[Path | None, typer.Option("--workloads", help="Workload directory "
                         "(default: corpus/workloads of the enclosing project).")]


@app.command()
def check(
    paths: Annotated[list[Path], typer.Argument(help="Schedule files or directories.")],
    fmt: Annotated[Format, typer.Option("--format", "-f", help="Output format.")] = Format.text,
    target: Annotated[str | None, typer.Option("--target", help="Check against this target "
                      "instead of the one the schedule names.")] = None,
    preview: Annotated[bool, typer.Option("--preview", help="Also run preview rules.")] = False,
    select: Annotated[list[str] | None, typer.Option("--select", help="Run only these rule "
                      "codes or names (repeatable).")] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the report "
                      "to this file instead of standard output.")] = None,
    rules: RulesOpt = None,
    workloads: WorkloadsOpt = None,
) -> None:
    """Check schedules. Exit 0 clean, 1 rejected, 2 usage or input error, 3 incomplete."""
    from cakegov.check.lock import atomic_write
    from cakegov.check.render_json import render_json
    from cakegov.check.render_sarif import render_sarif
    from cakegov.check.render_text import render_text
    from cakegov.check.runner import Checker

    book = load_rulebook(rules)
    if target is not None and target not in book.targets:
        raise usage_error(f"unknown target {target!r}; known: {', '.join(sorted(book.targets))}")
    try:
        wls = load_workloads(resolve_workloads(workloads))
    except WorkloadError as exc:
        raise usage_error(str(exc)) from None
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise usage_error(f"no such file or directory: {', '.join(missing)}")
    only = frozenset(select) if select else None
    checker = Checker(book, wls, target_override=target, preview=preview, only=only)
    results = checker.check_paths(paths)
    if not results:
        raise usage_error("no *.cake schedules found")
    if fmt is Format.json:
        text = render_json(results, book.digest())
    elif fmt is Format.sarif:
        text = render_sarif(results, book, root=project_root())
    else:
        text = render_text(results)
    if output is not None:
        atomic_write(output, text)
    elif fmt is Format.text:
        _print_text(text)
    else:
        sys.stdout.write(text)
    raise typer.Exit(exit_code(results))


def _print_text(text: str) -> None:
    styles = {"error[": "bold red", "warning[": "bold yellow", "help[": "bold cyan",
              "internal error[": "bold magenta", "clean:": "green", "incomplete:": "yellow"}
    for line in text.splitlines():
        style = next((s for prefix, s in styles.items() if line.startswith(prefix)), None)
        out.print(Text(line, style=style or ""))


@app.command()
def lock(
    check_only: Annotated[bool, typer.Option("--check", help="Verify the lock instead of "
                          "writing it.")] = False,
    rules: RulesOpt = None,
) -> None:
    """Write rules/rulebook.lock, or verify it with --check."""
    book = load_rulebook(rules)
    problems = check_lock(book)
    if check_only:
        if problems:
            for p in problems:
                err.print(Text(f"lock: {p}", style="red"))
            raise typer.Exit(EXIT_REJECTED)
        out.print(f"lock ok: {len(book.entries())} plugins, verifier {book.digest()[:16]}")
        return
    locked = read_lock(lock_path(book))
    unbumped = [p for p in problems if "without a version bump" in p] if locked else []
    if unbumped:
        for p in unbumped:
            err.print(Text(f"lock: {p}", style="red"))
        raise typer.Exit(EXIT_REJECTED)
    path = write_lock(book)
    out.print(f"wrote {path} ({len(book.entries())} plugins, verifier {book.digest()[:16]})")


@app.command()
def version(rules: RulesOpt = None) -> None:
    """Print the engine version and the verifier digest of the rulebook."""
    book = load_rulebook(rules)
    out.print(f"cakegov {__version__}")
    out.print(f"verifier {book.digest()}")
    out.print(f"rulebook {book.root} ({len(book.rules)} rules, {len(book.primitives)} "
              f"primitives, {len(book.targets)} targets)")


@app.command()
def docs(
    check_only: Annotated[bool, typer.Option("--check", help="Exit 1 if a generated page is "
                          "out of date instead of writing it.")] = False,
    docs_dir: Annotated[Path | None, typer.Option("--docs", help="Documentation directory "
                        "(default: docs/ of the enclosing project).")] = None,
    rules: RulesOpt = None,
) -> None:
    """Regenerate docs/rules.md and the primitive reference in docs/language.md."""
    from cakegov.docs import DocsError, plan, stale_pages, write_pages

    book = load_rulebook(rules)
    if docs_dir is None:
        root = project_root()
        if root is None:
            raise usage_error("no docs directory found: run inside a cakegov project or "
                              "pass --docs")
        docs_dir = root / "docs"
    try:
        pages = plan(book, docs_dir)
    except DocsError as exc:
        raise usage_error(str(exc)) from None
    if check_only:
        stale = stale_pages(pages)
        for page in stale:
            err.print(Text(f"docs: {page.path} is out of date with the rulebook; run "
                           "`cakegov docs`", style="red"))
        if stale:
            raise typer.Exit(EXIT_REJECTED)
        out.print(f"docs ok: {len(pages)} generated pages match {len(book.rules)} rules and "
                  f"{len(book.primitives)} primitives")
        return
    written = write_pages(pages)
    for path in written:
        out.print(f"wrote {path}")
    if not written:
        out.print("docs already up to date")


@rules_app.command("list")
def rules_list(rules: RulesOpt = None) -> None:
    """List every rule with its code, severity, status and summary."""
    book = load_rulebook(rules)
    columns = ("code", "name", "version", "severity", "category", "status", "summary")
    rows = [(r.code, r.name, r.version, r.severity, r.category, r.status, r.summary)
            for r in book.rules]
    if not out.is_terminal:  # piped: one tab-separated line per rule, never wrapped
        for row in [columns, *rows]:
            typer.echo("\t".join(row))
        return
    table = Table(show_lines=False)
    for col in columns:
        table.add_column(col, no_wrap=col in ("code", "name"))
    for row in rows:
        table.add_row(*row)
    out.print(table)


@rules_app.command("explain")
def rules_explain(code: Annotated[str, typer.Argument(help="Rule code or name.")],
                  rules: RulesOpt = None) -> None:
    """Print a rule's documentation."""
    book = load_rulebook(rules)
    rule = book.rule(code)
    if rule is None:
        import difflib

        names = [r.code for r in book.rules] + [r.name for r in book.rules]
        close = difflib.get_close_matches(code, names, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise usage_error(f"no rule {code!r}{hint}")
    out.print(Text(f"{rule.code} {rule.name} (v{rule.version}, {rule.severity}, "
                   f"{rule.category}, {rule.status})", style="bold"))
    if rule.motivated_by:
        out.print(f"motivated by: {', '.join(rule.motivated_by)}")
    out.print()
    out.print(rule.doc, markup=False)


def main() -> None:
    """Console entry point: internal errors exit 101, never with a bare traceback."""
    try:
        app()
    except SystemExit:
        raise
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:  # last resort: the tool failed, not the input
        import traceback

        err.print(Text(f"internal error: {type(exc).__name__}: {exc}", style="bold magenta"))
        if os.environ.get("CAKEGOV_DEBUG"):
            traceback.print_exc()
        else:
            err.print("set CAKEGOV_DEBUG=1 for the traceback; please report this")
        sys.exit(EXIT_INTERNAL)
