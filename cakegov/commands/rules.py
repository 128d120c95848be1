"""The rulebook's commands: `lock`, `version`, `docs` and the `rules` group (`list`,
`new`, `explain`)."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from cakegov import __version__
from cakegov.check.exits import EXIT_REJECTED
from cakegov.commands.shared import (
    RulesOpt,
    err,
    load_rulebook,
    out,
    project_root,
    styled,
    usage_error,
)

rules_app = typer.Typer(help="Inspect the rulebook's rules, or scaffold a new one.",
                        no_args_is_help=True, rich_markup_mode=None)


def lock(
    check_only: Annotated[bool, typer.Option("--check", help="Verify the lock instead of "
                          "writing it.")] = False,
    rules: RulesOpt = None,
) -> None:
    """Write rules/rulebook.lock, or verify it with --check."""
    from cakegov.check.lock import check_lock, lock_path, read_lock, write_lock

    book = load_rulebook(rules)
    problems = check_lock(book)
    if check_only:
        if problems:
            for p in problems:
                err.print(styled(f"lock: {p}", style="red"))
            raise typer.Exit(EXIT_REJECTED)
        out.print(f"lock ok: {len(book.entries())} plugins, verifier {book.digest()[:16]}")
        return
    locked = read_lock(lock_path(book))
    unbumped = [p for p in problems if "without a version bump" in p] if locked else []
    if unbumped:
        for p in unbumped:
            err.print(styled(f"lock: {p}", style="red"))
        raise typer.Exit(EXIT_REJECTED)
    path = write_lock(book)
    out.print(f"wrote {path} ({len(book.entries())} plugins, verifier {book.digest()[:16]})")


def version(rules: RulesOpt = None) -> None:
    """Print the engine version and the verifier digest of the rulebook."""
    book = load_rulebook(rules)
    typer.echo(f"cakegov {__version__}")
    typer.echo(f"verifier {book.digest()}")
    typer.echo(f"rulebook {book.root} ({len(book.rules)} rules, {len(book.primitives)} "
               f"primitives, {len(book.targets)} targets)")



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
            err.print(styled(f"docs: {page.path} is out of date with the rulebook; run "
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



class ListFormat(StrEnum):
    text = "text"
    json = "json"


@rules_app.command("list")
def rules_list(
    fmt: Annotated[ListFormat, typer.Option("--format", "-f", help="text: a table on a "
                   "terminal, tab-separated lines otherwise; json: one object per rule.")]
    = ListFormat.text,
    rules: RulesOpt = None,
) -> None:
    """List every rule with its code, severity, status and summary."""
    book = load_rulebook(rules)
    if fmt is ListFormat.json:
        import json

        data = [{"code": r.code, "name": r.name, "version": r.version, "severity": r.severity,
                 "authority": r.authority, "category": r.category, "status": r.status,
                 "phase": r.phase, "summary": r.summary, "file": r.relpath,
                 "motivated_by": list(r.motivated_by)} for r in book.rules]
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
        return
    columns = ("code", "name", "version", "severity", "category", "status", "summary")
    rows = [(r.code, r.name, r.version, r.severity, r.category, r.status, r.summary)
            for r in book.rules]
    if not out.is_terminal:  # piped: one tab-separated line per rule, never wrapped
        for row in [columns, *rows]:
            typer.echo("\t".join(row))
        return
    from rich.table import Table

    table = Table(show_lines=False)
    for col in columns:
        table.add_column(col, no_wrap=col in ("code", "name"))
    for row in rows:
        table.add_row(*row)
    out.print(table)


@rules_app.command("new")
def rules_new(
    name: Annotated[str, typer.Argument(metavar="NAME", help="The rule's kebab-case name, "
                    "which is also its file name, e.g. fragment-owner.")],
    category: Annotated[str, typer.Option("--category", metavar="CATEGORY", help="The "
                        "rule's category (resources, hardware, names, protocol, ...); the "
                        "code is the next free one of its letter series.")],
    workload: Annotated[str, typer.Option("--workload", metavar="WORKLOAD", help="Workload "
                        "of the corpus case; the case starts as a copy of its shortest valid "
                        "schedule.")] = "scale",
    severity: Annotated[str, typer.Option("--severity", metavar="SEVERITY", help="blocking, "
                        "report or hint.")] = "blocking",
    code: Annotated[str | None, typer.Option("--code", metavar="CODE", help="Use this code "
                    "instead of the next free one (for a new series).")] = None,
) -> None:
    """Scaffold a new rule: rules/checks/NAME.py, its corpus case and its docs entry.

    The rule starts as preview with the next free code of its category. The corpus case is
    a real schedule (a copy of a valid one) labelled with the new code: the tests fail on
    it until the case has the defect and the rule reports it, which is the first step."""
    from cakegov.check.scaffold import ScaffoldError, plan, write
    from cakegov.docs import DocsError
    from cakegov.docs import plan as docs_plan

    root = project_root()
    if root is None:
        raise usage_error("not inside a cakegov project (no rules/checks and corpus/)")
    book = load_rulebook(root / "rules")
    try:
        scaffold = plan(root, name=name, category=category, severity=severity,
                        workload=workload, rules=[(r.code, r.category) for r in book.rules],
                        code=code)
        written = write(scaffold)
    except ScaffoldError as exc:
        raise usage_error(str(exc)) from None
    rel = lambda p: p.relative_to(root).as_posix()  # noqa: E731
    for path in written:
        out.print(f"created {rel(path)}", markup=False)
    try:  # the docs entry is generated from the docstring, as for every rule
        from cakegov.docs import write_pages

        for path in write_pages(docs_plan(load_rulebook(root / "rules"), root / "docs")):
            out.print(f"updated {rel(path)} (generated from the rule's docstring)",
                      markup=False)
    except DocsError as exc:
        err.print(f"warning: docs not regenerated: {exc}", markup=False)
    case, rule = rel(scaffold.case_path), rel(scaffold.rule_path)
    out.print(f"""
{scaffold.code} {name} (preview). Next steps:
  1. edit {case} so that it has the defect, on line {scaffold.label_line} (labelled
     `# expect: {scaffold.code}`; move the label if the defect belongs elsewhere);
  2. write check(ctx) in {rule} and fill in its docstring; until {scaffold.code} reports
     that line, `pytest tests/test_corpus.py tests/test_rule_docs.py` fails on it;
  3. cakegov check --preview {case}
  4. cakegov lock && cakegov docs && cakegov corpus manifest
  5. cakegov propose-rule {rule}""", markup=False)


@rules_app.command("explain")
def rules_explain(code: Annotated[str, typer.Argument(help="Rule code or name.")],
                  rules: RulesOpt = None) -> None:
    """Print a rule's documentation."""
    book = load_rulebook(rules)
    rule = book.rule(code)
    if rule is None:
        import difflib

        names = [r.code for r in book.rules] + [r.name for r in book.rules]
        def edits(a: str, b: str) -> int:  # Levenshtein distance: breaks difflib's ties
            row = list(range(len(b) + 1))
            for i, ca in enumerate(a, 1):
                prev, row[0] = row[0], i
                for j, cb in enumerate(b, 1):
                    prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
            return row[-1]

        from cakegov.check.select import LOOKALIKE

        folded = code.upper().translate(LOOKALIKE)  # O typed for 0, I or l for 1
        close = sorted(difflib.get_close_matches(code, names, n=3),
                       key=lambda name: (edits(folded, name.upper()),
                                         edits(code.upper(), name.upper())))
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise usage_error(f"no rule {code!r}{hint}")
    out.print(styled(f"{rule.code} {rule.name} (v{rule.version}, {rule.severity}, "
                   f"{rule.category}, {rule.status})", style="bold"))
    if rule.motivated_by:
        out.print(f"motivated by: {', '.join(rule.motivated_by)}")
    out.print()
    out.print(rule.doc, markup=False)


COMMANDS = {"lock": lock, "version": version, "docs": docs}
GROUPS = {"rules": rules_app}
