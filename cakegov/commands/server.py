"""The `cakegov server` command: the checker as a Language Server over standard input and
output (cakegov/server.py)."""

from __future__ import annotations

from typing import Annotated

import typer

from cakegov.commands.shared import RulesOpt, WorkloadsOpt, resolve_rules, resolve_workloads


def server(
    preview: Annotated[bool, typer.Option("--preview", help="Also publish the findings of "
                       "preview rules.")] = False,
    rules: RulesOpt = None,
    workloads: WorkloadsOpt = None,
) -> None:
    """Serve diagnostics and machine fixes over the Language Server Protocol (stdio): the
    findings `cakegov check` reports, published on open, change and save; each machine
    fix a quick-fix code action. The rulebook is reloaded when its files change."""
    from cakegov.commands.shared import load_rulebook, load_wls

    load_rulebook(rules)  # a usage error (exit 2) before any client is answered
    load_wls(workloads)
    try:
        from cakegov.server import serve
    except ImportError as exc:
        from cakegov.commands.shared import usage_error

        raise usage_error(f"cakegov server needs pygls ({exc}); pip install 'pygls>=2'") from None
    serve(resolve_rules(rules).resolve(), resolve_workloads(workloads).resolve(), preview)


COMMANDS = {"server": server}
