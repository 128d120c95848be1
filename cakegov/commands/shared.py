"""What every command shares, below all of them: the consoles, the usage error (exit 2
with one red line), the rulebook, workload and ledger loaders, and the option types whose
help reads the same everywhere. Nothing here imports a command module or cakegov.cli;
everything heavier than typer is imported by the function that needs it."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from cakegov.check.exits import EXIT_USAGE
from cakegov.project import default_rules, default_workloads, project_root

if TYPE_CHECKING:
    from rich.text import Text

    from cakegov.check.rulebook import Rulebook
    from cakegov.govern.ledger import Ledger

__all__ = ["STDIN_NAME", "STDIN_PATH", "Format", "LedgerOpt", "QuietOpt", "RulesOpt",
           "WorkloadsOpt", "err", "load_rulebook", "load_wls", "open_ledger", "out",
           "print_text", "project_root", "read_stdin", "resolve_rules", "resolve_workloads",
           "select_codes", "styled", "usage_error"]


class _LazyConsole:
    """A rich Console built on first use: importing rich costs more than a --help."""

    def __init__(self, stderr: bool):
        self._stderr = stderr
        self._console: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._console is None:
            from rich.console import Console

            self._console = Console(stderr=self._stderr, highlight=False, soft_wrap=True)
        return getattr(self._console, name)


out: Any = _LazyConsole(stderr=False)
err: Any = _LazyConsole(stderr=True)


def styled(text: str, style: str = "") -> Text:
    """`text` in `style`, never read as rich markup."""
    from rich.text import Text

    return Text(text, style=style)


class Format(StrEnum):
    text = "text"
    json = "json"
    sarif = "sarif"


def usage_error(message: str) -> typer.Exit:
    err.print(styled(f"error: {message}", style="bold red"))
    return typer.Exit(EXIT_USAGE)


def resolve_rules(rules: Path | None) -> Path:
    rules = rules or default_rules()
    if rules is None:
        raise usage_error("no rulebook found: run inside a cakegov project or pass --rules")
    return rules


def resolve_workloads(workloads: Path | None) -> Path:
    workloads = workloads or default_workloads()
    if workloads is None:
        raise usage_error("no workloads found: pass --workloads")
    return workloads


def load_rulebook(rules: Path | None) -> Rulebook:
    from cakegov.check.rulebook import PluginError, Rulebook

    where = resolve_rules(rules)
    try:
        book = Rulebook.load(where)
    except PluginError as exc:
        raise usage_error(f"invalid plugin {exc}") from None
    if not book.rules and not book.targets:  # `--rules /tmp`: a clean verdict from nothing
        raise usage_error(f"{where} is not a rulebook: it has no rules (checks/*.py) and no "
                          "targets (targets/*.toml)")
    return book


def load_wls(workloads: Path | None) -> dict[str, Any]:
    """The workloads, or a usage error naming the bad file."""
    from cakegov.corpus.workloads import WorkloadError, load_workloads

    try:
        return load_workloads(resolve_workloads(workloads))
    except WorkloadError as exc:
        raise usage_error(str(exc)) from None


RulesOpt = Annotated[Path | None, typer.Option("--rules", help="Rulebook directory "
                     "(default: ./rules of the enclosing project, or $CAKEGOV_RULES).")]
WorkloadsOpt = Annotated[Path | None, typer.Option("--workloads", help="Workload directory "
                         "(default: corpus/workloads of the enclosing project).")]
LedgerOpt = Annotated[Path | None, typer.Option("--ledger", help="Audit ledger file "
                      "(default: $CAKEGOV_LEDGER, or .cakegov/ledger.sqlite of the "
                      "enclosing project).")]


STDIN_PATH = Path("-")
STDIN_NAME = "<stdin>"
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="Show no progress bar.")]


def select_codes(book: Rulebook, select: list[str] | None) -> frozenset[str] | None:
    """The rule codes `--select` names, or a usage error naming what matched no rule."""
    from cakegov.check.select import resolve, split_selectors

    if not select:
        return None
    if not split_selectors(select):
        raise usage_error("--select names no rule (empty value)")
    codes, unknown = resolve(select, [(r.code, r.name) for r in book.rules])
    if unknown:
        raise usage_error("; ".join(u.describe() for u in unknown)
                          + " (`cakegov rules list` shows every rule)")
    return codes


def read_stdin() -> bytes:
    """Standard input, one byte past the schedule size limit at most (enough to refuse)."""
    from cakegov.ir.parse import MAX_SOURCE_BYTES

    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:  # a text-only stdin (embedding): its text, as UTF-8
        return sys.stdin.read(MAX_SOURCE_BYTES + 1).encode("utf-8")
    return stream.read(MAX_SOURCE_BYTES + 1)


def print_text(text: str) -> None:
    styles = {"error[": "bold red", "warning[": "bold yellow", "help[": "bold cyan",
              "internal error[": "bold magenta", "clean:": "green", "incomplete:": "yellow"}
    if not sys.stdout.isatty():  # what rich would print without colour, without rich
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return
    for line in text.splitlines():
        style = next((s for prefix, s in styles.items() if line.startswith(prefix)), None)
        out.print(styled(line, style=style or ""))


def open_ledger(path: Path | None, create: bool = False) -> Ledger:
    from cakegov.govern.ledger import Ledger, LedgerError

    try:
        return Ledger.open(path, create=create)
    except LedgerError as exc:
        raise usage_error(str(exc)) from None
