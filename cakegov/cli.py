"""The `cakegov` command line: builds the Typer app from the command modules under
cakegov/commands/ and runs one command line. Nothing else lives here.

Start-up matters (`cakegov check FILE` should not pay for `propose-rule`): this module
loads only typer and the standard library, and a command line that names one command or
group imports that one module (`narrowed`); `--help` and anything unrecognised get the
whole app (`whole_app`), whose messages list every command. Each command imports the models
and analysis it needs when it runs (benchmarks/bench_startup.py measures it)."""

from __future__ import annotations

import importlib
import os
import sys
import typing
from types import ModuleType
from typing import Annotated, Any

import typer
import typer.core

from cakegov import __version__
from cakegov.check.exits import EXIT_INTERNAL, EXIT_USAGE
from cakegov.commands.shared import err, styled

# Every top-level command and group with the module under cakegov/commands/ that holds it,
# in the order `cakegov --help` lists them (typer lists commands, then groups).
COMMANDS: tuple[tuple[str, str], ...] = (
    ("check", "check"), ("lock", "rules"), ("version", "rules"), ("doctor", "propose"),
    ("docs", "rules"), ("run", "run"), ("lower", "lower"), ("compile", "lower"),
    ("propose-rule", "propose"), ("render-proposal", "propose"), ("simulate", "simulate"),
    ("rank", "cost"), ("server", "server"),
)
GROUPS: tuple[tuple[str, str], ...] = (
    ("rules", "rules"), ("audit", "audit"), ("corpus", "corpus"), ("costmodel", "cost"),
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"cakegov {__version__}")
        raise typer.Exit(0)


def _argument_type(self: typer.core.TyperArgument, ctx: object) -> str | None:
    """The type shown after an argument's name in help: a variadic argument shows its
    element type (`paths... <path>`), never typer's annotation (`PATH <list[Path]>`)."""
    desc = self.type_descriptor
    if desc.is_list and not desc.is_choice:
        (element,) = typing.get_args(desc.annotation)
        return f"<{self._bare_type(element).lower()}>"
    return self.display_type(ctx)


# typer 0.29 prints `<list[Path]>` for list arguments and offers no hook for it
typer.core.TyperArgument.display_type_rich = _argument_type  # type: ignore[method-assign]


def _root(
    version: Annotated[bool, typer.Option("--version", callback=_print_version,
                       is_eager=True, help="Print the engine version and exit (`cakegov "
                       "version` also prints the verifier digest).")] = False,
) -> None:
    """Governs a verifier for GPU kernel schedules: check schedules, manage the rulebook."""


def _module(name: str) -> ModuleType:
    return importlib.import_module(f"cakegov.commands.{name}")


def _build(names: frozenset[str] | None) -> typer.Typer:
    """The app holding the commands and groups in `names` (None: all of them)."""
    # rich_markup_mode=None: click's plain help (paragraphs rewrapped as sentences, no
    # `<bool>` after flags, no rich import for --help)
    app = typer.Typer(
        name="cakegov",
        help="Governs a verifier for GPU kernel schedules: check schedules, manage the "
             "rulebook.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
    )
    app.callback()(_root)
    for name, module in COMMANDS:
        if names is None or name in names:
            app.command(name)(_module(module).COMMANDS[name])
    for name, module in GROUPS:
        if names is None or name in names:
            app.add_typer(_module(module).GROUPS[name], name=name)
    return app


_whole: typer.Typer | None = None


def whole_app() -> typer.Typer:
    """The app with every command and group (built once)."""
    global _whole
    if _whole is None:
        _whole = _build(None)
    return _whole


def __getattr__(name: str) -> Any:  # `from cakegov.cli import app`: the whole app
    if name == "app":
        return whole_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def narrowed(argv: list[str]) -> typer.Typer:
    """The app with only the top-level command or group `argv` invokes, when it names
    one exactly: only that command's module is imported, and typer builds a click command
    for it alone (reading each signature and its annotations costs every start-up). Help,
    options and errors of the invoked command are the same; anything else (no command,
    an option first, a misspelt name) gets the whole app, whose messages list them all."""
    if not argv or argv[0].startswith("-"):
        return whole_app()
    known = {name for name, _ in COMMANDS + GROUPS}
    if argv[0] not in known:
        return whole_app()
    return _build(frozenset({argv[0]}))


def _check_and_remember(argv: list[str], key: str) -> None:
    """Run the check with both streams recorded, then store what it printed."""
    from cakegov.check.result_cache import Recorder, store

    out_rec, err_rec = Recorder(sys.stdout), Recorder(sys.stderr)
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out_rec, err_rec  # type: ignore[assignment]
    try:
        narrowed(argv)(prog_name="cakegov")
    except SystemExit as exc:
        sys.stdout, sys.stderr = saved
        store(key, out_rec.text(), err_rec.text(), exc.code)
        raise
    finally:
        sys.stdout, sys.stderr = saved


def run_argv(argv: list[str], cache_key: str | None = None) -> None:
    """Run one command line: internal errors exit 101, never with a bare traceback.
    `cache_key`: the result-cache key of a plain check that was not stored yet."""
    # pydantic looks up plugin entry points in every installed distribution when it
    # builds its first model (~10 ms of each start-up); cakegov uses none. The models are
    # built when a command imports them, after this line; an explicit setting wins.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    try:
        if cache_key is None:
            narrowed(argv)(prog_name="cakegov")
        else:
            _check_and_remember(argv, cache_key)
    except SystemExit:
        raise
    except KeyboardInterrupt:
        sys.exit(130)
    except OSError as exc:
        # the file system refused a path the command line named (a name too long, a
        # permission, a loop of links): the input's problem, said as such
        name = str(exc.filename) if exc.filename is not None else ""
        shown = name if len(name) <= 120 else f"{name[:60]}...{name[-40:]} ({len(name)} characters)"
        err.print(styled(f"error: {exc.strerror or exc}" + (f": {shown}" if shown else ""),
                         style="bold red"))
        sys.exit(EXIT_USAGE)
    except Exception as exc:  # last resort: the tool failed, not the input
        import traceback

        err.print(styled(f"internal error: {type(exc).__name__}: {exc}", style="bold magenta"))
        if os.environ.get("CAKEGOV_DEBUG"):
            traceback.print_exc()
        else:
            err.print("set CAKEGOV_DEBUG=1 for the traceback; please report this")
        sys.exit(EXIT_INTERNAL)
