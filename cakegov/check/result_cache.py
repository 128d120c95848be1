"""`cakegov check` results remembered on disk, so that an unchanged check costs a few file
reads instead of a start-up.

A one-file check spends most of its time importing: numpy for the protocol analysis,
pydantic for the IR, typer's option coercion (benchmarks/bench_startup.py measures each).
An agent or a CI job that checks the same schedules again with the same verifier gets the
same bytes back, so the output of the plain form of the command is stored under a key
made of everything that determines it:

- the command: its formats and flags, the paths as given and the working directory;
- every input's content: each schedule file (directories expanded as the command expands
  them), every file of the rulebook directory (the lock included) and of the workload
  directory, the engine's own source (`engine_digest`), the interpreter and the names of
  the installed distributions (their versions);
- the environment that reaches the output: every `CAKEGOV_*` variable and the terminal
  variables.

Only the plain form is stored: `check PATH... [-f FORMAT] [--preview] [-q]`, with both
standard output and standard error piped (a terminal gets colours and progress bars).
Anything else (`-o`, `--record`, `--fix`, `--select`, `--target`, `-`, `--rules`,
`--no-cache`) runs as usual and stores nothing; so does `CAKEGOV_NO_CACHE=1`. Entries live
outside the checkout, under `$CAKEGOV_CACHE_DIR/check`, `$XDG_CACHE_HOME/cakegov/check` or
`~/.cache/cakegov/check`: files a pull request brings into a checkout never answer for a
check. The merge gate (`propose-rule`) has its own cache and never reads this one.

Standard library only: the lookup runs before typer, pydantic or numpy is imported."""

from __future__ import annotations

import io
import os
import sys
import sysconfig
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TextIO

from cakegov.govern.cache import ResultCache, digest_json, engine_digest, sha256_bytes, tree_digest
from cakegov.project import default_rules, default_workloads

CHECK_CACHE_FORMAT = 1
FORMATS = ("text", "json", "sarif")
SCHEDULE_SUFFIX = ".cake"
MAX_STORED_CHARS = 8 << 20  # a larger report is produced again rather than stored
# Exit codes whose output is a function of the inputs (clean, rejected, usage or input
# error, incomplete); an internal error or an interrupt is never stored.
STORED_EXITS = (0, 1, 2, 3)
TERMINAL_VARS = ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR", "TERM")


@dataclass(frozen=True)
class PlainCheck:
    """`cakegov check PATH... [-f FORMAT] [--preview] [-q]` as given."""

    paths: tuple[str, ...]
    fmt: str = "text"
    preview: bool = False
    quiet: bool = False


def plain_check(argv: list[str]) -> PlainCheck | None:
    """The plain form of `argv`, or None for any other command line (which typer parses)."""
    if not argv or argv[0] != "check":
        return None
    paths: list[str] = []
    fmt, preview, quiet = "text", False, False
    tokens = iter(argv[1:])
    for token in tokens:
        if token in ("-f", "--format"):
            fmt = next(tokens, "")
            if fmt not in FORMATS:
                return None
        elif token.startswith("--format="):
            fmt = token.removeprefix("--format=")
            if fmt not in FORMATS:
                return None
        elif token == "--preview":
            preview = True
        elif token in ("-q", "--quiet"):
            quiet = True
        elif token.startswith("-") or not token:
            return None  # `-` (standard input) and every other option
        else:
            paths.append(token)
    return PlainCheck(tuple(paths), fmt, preview, quiet) if paths else None


def cache_dir(env: dict[str, str] | os._Environ[str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get("CAKEGOV_CACHE_DIR"):
        return Path(env["CAKEGOV_CACHE_DIR"]) / "check"
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "cakegov" / "check"


def _schedules(paths: tuple[str, ...]) -> list[Path] | None:
    """The files the command will check, as `cakegov.check.runner.expand_paths` finds
    them, or None when a path is missing (the command reports that itself)."""
    out: list[Path] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            out.extend(sorted(p for p in path.rglob(f"*{SCHEDULE_SUFFIX}") if p.is_file()))
        elif path.is_file():
            out.append(path)
        else:
            return None
    return out


def _distributions() -> str:
    """The installed distributions' names and versions, from the dist-info directories."""
    names: list[str] = []
    for key in ("purelib", "platlib"):
        site = Path(sysconfig.get_paths()[key])
        try:
            names.extend(p.name for p in site.iterdir() if p.name.endswith(".dist-info"))
        except OSError:
            continue
    return digest_json(sorted(set(names)))


def check_key(plain: PlainCheck) -> str | None:
    """The key of this invocation's output, or None when it must not be cached."""
    env = os.environ
    if env.get("CAKEGOV_NO_CACHE") or sys.stdout.isatty() or sys.stderr.isatty():
        return None
    rules, workloads = default_rules(), default_workloads()
    files = _schedules(plain.paths)
    if rules is None or workloads is None or not rules.is_dir() or files is None:
        return None
    try:
        inputs = [(str(f), sha256_bytes(f.read_bytes())) for f in files]
        return digest_json({
            "format": CHECK_CACHE_FORMAT,
            "command": asdict(plain),
            "cwd": os.getcwd(),
            "env": sorted((k, v) for k, v in env.items()
                          if k.startswith("CAKEGOV_") or k in TERMINAL_VARS),
            "python": [sys.version, sys.prefix, _distributions()],
            "engine": engine_digest(),
            "rules": [str(rules.resolve()), tree_digest(rules, ("*",))],
            "workloads": [str(workloads.resolve()), tree_digest(workloads, ("*",))],
            "schedules": inputs,
        })
    except OSError:
        return None


def lookup(key: str) -> tuple[str, str, int] | None:
    """(standard output, standard error, exit status) stored under `key`, or None."""
    value = ResultCache(cache_dir()).get(key)
    if not isinstance(value, dict):
        return None
    out, err, code = value.get("stdout"), value.get("stderr"), value.get("exit")
    if not (isinstance(out, str) and isinstance(err, str) and code in STORED_EXITS):
        return None
    return out, err, code


def store(key: str, out: str, err: str, code: Any) -> None:
    """Remember one run's output; a failed write costs speed, never a result."""
    if code not in STORED_EXITS or len(out) + len(err) > MAX_STORED_CHARS:
        return
    ResultCache(cache_dir()).put(key, {"stdout": out, "stderr": err, "exit": code})


def serve(argv: list[str]) -> str | None:
    """For a plain check: write its stored output and exit with its status, or return the
    key to store it under. None for every other command line. A cache that cannot be
    read is a miss: it costs speed, never a result."""
    try:
        plain = plain_check(argv)
        key = None if plain is None else check_key(plain)
        hit = None if key is None else lookup(key)
    except (OSError, ValueError):
        return None
    if hit is not None:
        out, err, code = hit
        sys.stdout.write(out)
        sys.stdout.flush()
        sys.stderr.write(err)
        sys.exit(code)
    return key


class Recorder(io.TextIOBase):
    """A text stream that passes everything to `stream` and keeps a copy."""

    def __init__(self, stream: TextIO):
        self.stream = stream
        self.parts: list[str] = []

    def write(self, text: str) -> int:
        self.parts.append(text)
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self.stream.encoding

    def text(self) -> str:
        return "".join(self.parts)
