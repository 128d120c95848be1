"""The `cakegov audit` group: list, show, verify, export and replay the audit ledger."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from cakegov.check.exits import EXIT_REJECTED
from cakegov.commands.shared import (
    LedgerOpt,
    WorkloadsOpt,
    err,
    load_rulebook,
    load_wls,
    open_ledger,
    out,
    resolve_rules,
    styled,
    usage_error,
)

audit_app = typer.Typer(help="Inspect, verify, export and replay the audit ledger.",
                        no_args_is_help=True, rich_markup_mode=None)


class RecordKind(StrEnum):
    check = "check"
    proposal = "proposal"
    measurement = "measurement"
    tamper = "tamper"


@audit_app.command("list")
def audit_list(
    kind: Annotated[RecordKind | None, typer.Option("--kind", help="Only records of this "
                    "kind.")] = None,
    ledger: LedgerOpt = None,
) -> None:
    """List ledger records: id, time, kind, verdict or summary, verifier digest prefix."""
    from cakegov.govern.audit import summary

    with open_ledger(ledger) as book:
        records = book.records(kind.value if kind else None)
    columns = ("id", "time", "kind", "summary", "verifier")
    rows = [(str(r.id), r.created_at, r.kind, summary(r), r.verifier_digest[:12])
            for r in records]
    if not out.is_terminal:
        for row in [columns, *rows]:
            typer.echo("\t".join(row))
        return
    from rich.table import Table

    table = Table(show_lines=False)
    for col in columns:
        table.add_column(col, no_wrap=col != "summary")
    for row in rows:
        table.add_row(*row)
    out.print(table)


@audit_app.command("show")
def audit_show(
    record_id: Annotated[int, typer.Argument(help="Record id.")],
    source: Annotated[bool, typer.Option("--source", help="Print the stored candidate "
                      "source instead of the record.")] = False,
    ledger: LedgerOpt = None,
) -> None:
    """Print one record as JSON (or, with --source, the candidate source it judged)."""
    import json

    with open_ledger(ledger) as book:
        record = book.record(record_id)
        if record is None:
            raise usage_error(f"no record #{record_id} in {book.path}")
        if source:
            key = record.payload.get("source_sha256")
            if not key or not book.has_blob(key):
                raise usage_error(f"record #{record_id} has no stored source")
            sys.stdout.buffer.write(book.blob(key))
            return
    sys.stdout.write(json.dumps(record.model_dump(mode="json"), indent=2, sort_keys=True)
                     + "\n")


@audit_app.command("verify")
def audit_verify(
    head: Annotated[str | None, typer.Option("--head", metavar="HASH", help="A head hash "
                    "printed earlier "
                    "(reports and PR comments carry it): it must still be in the chain "
                    "(catches a truncated or rewritten tail).")] = None,
    allow_empty: Annotated[bool, typer.Option("--allow-empty", help="Accept a missing or "
                           "empty ledger (exit 0) instead of failing.")] = False,
    ledger: LedgerOpt = None,
) -> None:
    """Recompute the hash chain, reading only. Exit 0 intact, 1 tampered (the first bad
    record is named), missing or empty (unless --allow-empty)."""
    from cakegov.govern.ledger import Ledger, LedgerError

    try:
        book = Ledger.open_readonly(ledger)
    except LedgerError as exc:
        if exc.empty and allow_empty and head is None:
            out.print(f"ledger empty: {exc} (accepted: --allow-empty)", markup=False)
            return
        err.print(styled(f"ledger FAILED verification: {exc}", style="bold red"))
        raise typer.Exit(EXIT_REJECTED) from None
    with book:
        result = book.verify(head=head)
    if not result.ok:
        where = f"first tampered record: #{result.first_bad}: " if result.first_bad else ""
        err.print(styled(f"ledger {book.path} FAILED verification: {where}{result.reason}",
                       style="bold red"))
        raise typer.Exit(EXIT_REJECTED)
    if result.records == 0 and not allow_empty:
        err.print(styled(f"ledger {book.path} FAILED verification: it holds no records "
                       "(pass --allow-empty to accept an empty ledger)", style="bold red"))
        raise typer.Exit(EXIT_REJECTED)
    out.print(f"ledger ok: {result.records} record(s), {result.blobs} blob(s), head "
              f"{result.head}", markup=False)


@audit_app.command("export")
def audit_export(
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the JSON "
                      "lines to this file instead of standard output.")] = None,
    ledger: LedgerOpt = None,
) -> None:
    """Export check records as in-toto Statement v1 JSON lines (test-result predicate)."""
    from cakegov.check.lock import atomic_write
    from cakegov.govern.audit import export_lines

    with open_ledger(ledger) as book:
        records = book.records()
    lines = list(export_lines(records))
    if output is not None:
        atomic_write(output, "".join(lines))
        err.print(f"wrote {len(lines)} statement(s) to {output}", markup=False)
    else:
        sys.stdout.write("".join(lines))


class ReplayFormat(StrEnum):
    text = "text"
    json = "json"


@audit_app.command("replay")
def audit_replay(
    ref: Annotated[str, typer.Option("--rulebook", metavar="REF", help="Git ref "
                   "whose rules/ tree judges the stored candidates.")],
    show_all: Annotated[bool, typer.Option("--all", help="Also list candidates whose "
                        "verdict stays but whose findings change.")] = False,
    fmt: Annotated[ReplayFormat, typer.Option("--format", "-f", help="Output format.")]
    = ReplayFormat.text,
    ledger: LedgerOpt = None,
    rules: Annotated[Path | None, typer.Option("--rules", help="Rulebook directory whose "
                     "git history holds REF (default: ./rules of the enclosing "
                     "project).")] = None,
    workloads: WorkloadsOpt = None,
) -> None:
    """Re-judge stored candidates under the rulebook at REF: which verdicts change, why.

    Lists the findings that appear or disappear. Exit 0, or 2 on a bad ref."""
    import json

    from cakegov.govern.replay import ReplayError, render_replay, replay, rulebook_at

    wls = load_wls(workloads)
    with open_ledger(ledger) as book:
        try:
            with rulebook_at(ref, resolve_rules(rules)) as at:
                result = replay(book, load_rulebook(at.root), wls, ref=ref, commit=at.commit)
        except ReplayError as exc:
            raise usage_error(str(exc)) from None
    if fmt is ReplayFormat.json:
        sys.stdout.write(json.dumps(result.as_dict(), indent=2, sort_keys=True) + "\n")
    else:
        sys.stdout.write(render_replay(result, show_all=show_all))


GROUPS = {"audit": audit_app}
