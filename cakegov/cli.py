"""The `cakegov` command line. Each command is a thin call into one module.

Start-up matters (`cakegov --help` should not cost what a corpus run costs): at import
this module loads only typer and the standard library; every command imports the models,
rich and the analysis it needs when it runs (benchmarks/bench_startup.py measures it)."""

from __future__ import annotations

import copy
import os
import sys
import typing
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
import typer.core

from cakegov import __version__
from cakegov.check.exits import EXIT_INCOMPLETE, EXIT_INTERNAL, EXIT_REJECTED, EXIT_USAGE
from cakegov.project import default_rules, default_workloads, project_root

if TYPE_CHECKING:  # annotations of helpers only; the commands import these lazily
    from rich.text import Text

    from cakegov.check.findings import FileResult
    from cakegov.check.rulebook import Rulebook
    from cakegov.check.runner import Checker
    from cakegov.govern.ledger import Ledger


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

# rich_markup_mode=None: click's plain help (paragraphs rewrapped as sentences, no
# `<bool>` after flags, no rich import for --help)
app = typer.Typer(
    name="cakegov",
    help="Governs a verifier for GPU kernel schedules: check schedules, manage the rulebook.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_print_version,
                       is_eager=True, help="Print the engine version and exit (`cakegov "
                       "version` also prints the verifier digest).")] = False,
) -> None:
    """Governs a verifier for GPU kernel schedules: check schedules, manage the rulebook."""


rules_app = typer.Typer(help="Inspect the rulebook's rules, or scaffold a new one.",
                        no_args_is_help=True, rich_markup_mode=None)
app.add_typer(rules_app, name="rules")
audit_app = typer.Typer(help="Inspect, verify, export and replay the audit ledger.",
                        no_args_is_help=True, rich_markup_mode=None)
app.add_typer(audit_app, name="audit")
corpus_app = typer.Typer(help="The labelled corpus.", no_args_is_help=True,
                         rich_markup_mode=None)
app.add_typer(corpus_app, name="corpus")


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


@app.command()
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
        _print_text(text)
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


def _print_text(text: str) -> None:
    styles = {"error[": "bold red", "warning[": "bold yellow", "help[": "bold cyan",
              "internal error[": "bold magenta", "clean:": "green", "incomplete:": "yellow"}
    if not sys.stdout.isatty():  # what rich would print without colour, without rich
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return
    for line in text.splitlines():
        style = next((s for prefix, s in styles.items() if line.startswith(prefix)), None)
        out.print(styled(line, style=style or ""))


@app.command()
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


@app.command()
def version(rules: RulesOpt = None) -> None:
    """Print the engine version and the verifier digest of the rulebook."""
    book = load_rulebook(rules)
    typer.echo(f"cakegov {__version__}")
    typer.echo(f"verifier {book.digest()}")
    typer.echo(f"rulebook {book.root} ({len(book.rules)} rules, {len(book.primitives)} "
               f"primitives, {len(book.targets)} targets)")


@app.command()
def doctor() -> None:
    """Probe the sandbox a proposal's plugin code runs in (a real bwrap run with the
    worker's namespace options, as the merge gate does before any proposed code runs) and
    say which containment `propose-rule` would use, with and without --require-sandbox.
    Exit 0 when bwrap works, 1 when it is refused (one line with the cause and the fix)."""
    import os

    from cakegov.govern import isolate

    probe = isolate.probe_sandbox()
    typer.echo(probe.line())
    forced = os.environ.get("CAKEGOV_CONTAINMENT", "").strip().lower()
    if probe.ok and forced != "fallback":
        typer.echo("proposals: contained by bwrap (with or without --require-sandbox)")
    else:
        why = "CAKEGOV_CONTAINMENT=fallback" if probe.ok else "no working bwrap"
        typer.echo(f"proposals: {why}: without --require-sandbox they run in the fallback "
                   f"({isolate.FALLBACK_CONTAINMENT}); with it (the merge gate) they are "
                   "refused")
    raise typer.Exit(0 if probe.ok else 1)


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


@app.command()
def run(
    path: Annotated[Path, typer.Argument(help="Schedule file.")],
    shape: Annotated[list[str] | None, typer.Option("--shape", metavar="SHAPE", help="Run this "
                     "shape instead of the workload's check shapes, e.g. M=1000,N=520,K=320 "
                     "(repeatable).")] = None,
    repeat: Annotated[int, typer.Option("--repeat", help="Timed launches per shape "
                      "(at least 20; the median is reported).")] = 30,
    record: Annotated[bool, typer.Option("--record/--no-record", help="Append measurement "
                      "records to corpus/measurements/<workload>.jsonl.")] = True,
    measurements: Annotated[Path | None, typer.Option("--measurements", help="Directory "
                            "for measurement records (default: corpus/measurements).")] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Run seed, to replay a recorded "
                    "run (default: fresh from the OS).")] = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds a correctness launch "
                       "may take before it counts as hung.")] = 30.0,
    headline: Annotated[bool, typer.Option("--headline", help="Also run the workload's "
                        "headline shapes the schedule accepts (the others are listed).")
                        ] = False,
    rules: RulesOpt = None,
    workloads: WorkloadsOpt = None,
) -> None:
    """Run a clean schedule on the GPU: compare with the reference, time against the
    baseline, record. Exit 0 correct, 1 rejected or wrong, 2 usage, 3 no CUDA device."""
    from cakegov.gpu.data import DataError, parse_shape
    from cakegov.gpu.run import RunOptions, run_file

    book = load_rulebook(rules)
    wls = load_wls(workloads)
    if not path.is_file():
        raise usage_error(f"no such schedule file: {path}")
    try:  # names are checked against the schedule's workload once it is known
        shapes = [parse_shape(s) for s in shape or ()]
    except DataError as exc:
        raise usage_error(str(exc)) from None
    options = RunOptions(shapes=tuple(shapes), repeat=repeat, record=record,
                         measurements=measurements, seed=seed, timeout_s=timeout,
                         headline=headline)
    outcome = run_file(path, options, book, wls, root=project_root())
    stream = err if outcome.exit_code in (EXIT_USAGE, EXIT_INCOMPLETE) else out
    for line in outcome.lines:
        stream.print(line, markup=False)
    if outcome.hung:  # a kernel is still running: tearing down the context would block
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(outcome.exit_code)
    raise typer.Exit(outcome.exit_code)


class Emit(StrEnum):
    lowered = "lowered"
    cuda = "cuda"


class LowerFormat(StrEnum):
    text = "text"
    json = "json"


class Compiler(StrEnum):
    nvrtc = "nvrtc"
    nvcc = "nvcc"


def _lowered(path: Path, rules: Path | None, workloads: Path | None, preview: bool):
    """Check `path` and lower it; print the findings and exit 1 when it is not clean."""
    from cakegov.check.render_text import render_text
    from cakegov.lower.build import prepare
    from cakegov.lower.derive import LoweringError

    book = load_rulebook(rules)
    wls = load_wls(workloads)
    if not path.is_file():
        raise usage_error(f"no such schedule file: {path}")
    try:
        prepared = prepare(path, book, wls, preview=preview)
    except LoweringError as exc:
        err.print(styled(f"error: cannot lower {path}: {exc}", style="bold red"))
        raise typer.Exit(EXIT_REJECTED) from None
    if prepared.kernel is None:
        _print_text(render_text([prepared.result]))
        err.print(styled(f"error: {path} is {prepared.result.verdict}; only a clean schedule "
                       "is lowered", style="bold red"))
        raise typer.Exit(EXIT_USAGE if prepared.result.verdict == "error" else EXIT_REJECTED)
    return book, prepared


def _emit(book: Rulebook, prepared):
    from cakegov.lower.emit import EmitError, emit_cuda

    try:
        return emit_cuda(prepared.kernel, book.primitives, verifier_digest=book.digest())
    except EmitError as exc:
        err.print(styled(f"error: cannot emit CUDA for {prepared.result.file}: {exc}",
                       style="bold red"))
        raise typer.Exit(EXIT_REJECTED) from None


@app.command("lower")
def lower_cmd(
    path: Annotated[Path, typer.Argument(help="Schedule file.")],
    emit: Annotated[Emit, typer.Option("--emit", help="`lowered`: the LoweredKernel; "
                    "`cuda`: the CUDA C++ translation unit.")] = Emit.lowered,
    fmt: Annotated[LowerFormat, typer.Option("--format", "-f", help="For --emit lowered: "
                   "text or the model as JSON.")] = LowerFormat.text,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write to this file "
                      "instead of standard output.")] = None,
    preview: Annotated[bool, typer.Option("--preview", help="Also run preview rules.")]
    = False,
    rules: RulesOpt = None,
    workloads: WorkloadsOpt = None,
) -> None:
    """Check a schedule, then print its lowered form or its CUDA C++. Exit 0 printed, 1 not
    clean (the findings are printed) or not lowerable, 2 usage or input error."""
    from cakegov.check.lock import atomic_write
    from cakegov.lower.text import lowered_text

    book, prepared = _lowered(path, rules, workloads, preview)
    if emit is Emit.cuda:
        text = _emit(book, prepared).source
    elif fmt is LowerFormat.json:
        text = prepared.kernel.model_dump_json(indent=2) + "\n"
    else:
        text = lowered_text(prepared.kernel)
    if output is not None:
        atomic_write(output, text)
    else:
        sys.stdout.write(text)


@app.command("compile")
def compile_cmd(
    path: Annotated[Path, typer.Argument(help="Schedule file.")],
    compiler: Annotated[Compiler, typer.Option("--compiler", help="NVRTC (the default; no "
                        "CUDA toolkit needed) or nvcc.")] = Compiler.nvrtc,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the cubin "
                      "here.")] = None,
    fmt: Annotated[LowerFormat, typer.Option("--format", "-f", help="Output format.")]
    = LowerFormat.text,
    preview: Annotated[bool, typer.Option("--preview", help="Also run preview rules.")]
    = False,
    rules: RulesOpt = None,
    workloads: WorkloadsOpt = None,
) -> None:
    """Check, lower, emit and compile a schedule for its target; report ptxas findings
    (C001-C005). Exit 0 compiled, 1 not clean or a blocking compile finding, 2 usage,
    3 the compiler is not available."""
    import json

    from cakegov.check.findings import FileResult
    from cakegov.check.render_text import render_text
    from cakegov.gpu.compile import CompilerUnavailable, compile_cuda
    from cakegov.gpu.diagnose import compile_findings

    book, prepared = _lowered(path, rules, workloads, preview)
    emitted = _emit(book, prepared)
    kernel = prepared.kernel
    try:
        result = compile_cuda(emitted.source, kernel.target, compiler.value,
                              name=f"{kernel.name}.cu")
    except CompilerUnavailable as exc:
        err.print(styled(f"error: {exc}", style="bold red"))
        raise typer.Exit(EXIT_INCOMPLETE) from None
    findings = compile_findings(result, emitted, str(path), prepared.schedule)
    if output is not None and result.cubin is not None:
        output.write_bytes(result.cubin)
    st = result.parsed.stats
    blocking = any(f.severity == "blocking" for f in findings)
    if fmt is LowerFormat.json:
        report = {
            "file": str(path), "schedule": kernel.name, "sha256": kernel.schedule_sha256,
            "verifier_digest": book.digest(), "compiler": result.version, "arch": result.arch,
            "options": list(result.options), "ok": result.ok,
            "cubin": str(output) if output is not None and result.ok else None,
            "cubin_bytes": len(result.cubin) if result.cubin else 0,
            "stats": {"registers": st.registers, "launch_registers": kernel.launch_regs,
                      "spill_stores": st.spill_stores, "spill_loads": st.spill_loads,
                      "stack_frame": st.stack_frame, "barriers": st.barriers},
            "findings": [f.model_dump(mode="json") for f in findings],
        }
        sys.stdout.write(json.dumps(report, indent=2, sort_keys=True) + "\n")
    else:
        if findings:
            res = FileResult(file=str(path), schedule=kernel.name,
                             sha256=kernel.schedule_sha256, verdict="rejected" if blocking
                             else "clean", findings=tuple(findings))
            _print_text(render_text([res], show_clean=False))
        if result.ok:
            where = f" -> {output}" if output is not None else ""
            out.print(f"compiled {kernel.name} for {result.arch} with {result.version}: "
                      f"{st.registers} registers/thread at entry (launch allows "
                      f"{kernel.launch_regs}), spills {st.spill_stores} B stored / "
                      f"{st.spill_loads} B loaded, {st.barriers} barrier(s), cubin "
                      f"{len(result.cubin or b'')} B{where}")
        else:
            err.print(styled(f"error: {result.compiler} failed to compile {kernel.name}",
                           style="bold red"))
    if blocking or not result.ok:
        raise typer.Exit(EXIT_REJECTED)


class GpuMode(StrEnum):
    auto = "auto"
    off = "off"
    require = "require"


RENDER_INPUT_CAP = 64 * 1024 * 1024


@app.command("propose-rule")
def propose_rule(
    paths: Annotated[list[Path] | None, typer.Argument(help="Proposed plugin files (checks, "
                     "primitives, targets, cost parameters); none: the working tree's "
                     "rules/.")] = None,
    base: Annotated[str | None, typer.Option("--base", metavar="REF", help="Git ref of the "
                    "base rulebook (default: HEAD, or the merge base with the default "
                    "branch).")] = None,
    corpus: Annotated[list[Path] | None, typer.Option("--corpus", metavar="DIR",
                      help="Corpus directory (repeatable; default: corpus/).")] = None,
    gpu: Annotated[GpuMode, typer.Option("--gpu", help="GPU evidence: auto (when a device "
                   "exists), off, require (exit 3 without one).")] = GpuMode.auto,
    report_dir: Annotated[Path | None, typer.Option("--report-dir", help="Where the reports "
                          "go (default: reports/ of the project).")] = None,
    fmt: Annotated[str, typer.Option("--format", metavar="FORMATS",
                                     help="Comma-separated: md,html,json,sarif.")]
    = "md,html,json,sarif",
    jobs: Annotated[int | None, typer.Option("--jobs", "-j", min=1, help="Worker processes "
                    "(default: the CPU count, at most 8).")] = None,
    shard: Annotated[str | None, typer.Option("--shard", metavar="I/N", help="Judge only "
                     "shard I of N of "
                     "the corpus, e.g. 2/4.")] = None,
    record: Annotated[bool, typer.Option("--record/--no-record", help="Append the result to "
                      "the audit ledger.")] = True,
    ledger: LedgerOpt = None,
    time_limit: Annotated[float, typer.Option("--time-limit", min=0.1, help="Seconds per rule "
                          "per schedule before the rule counts as hung.")] = 10.0,
    memory_limit: Annotated[int, typer.Option("--memory-limit", min=0, help="Address-space "
                            "limit of a rulebook worker, MiB (0: none).")] = 4096,
    cache: Annotated[bool, typer.Option("--cache/--no-cache", help="Reuse results from "
                     ".cakegov/cache/.")] = True,
    require_sandbox: Annotated[bool, typer.Option("--require-sandbox", help="Refuse to run "
                               "rule plugins unless the bwrap sandbox works.")] = False,
    accept_contract: Annotated[str | None, typer.Option("--accept-contract",
                               metavar="DIGEST", help="The "
                               "contract digest (sha256, or its first 32 or more hex digits) of "
                               "a reviewed change to the corpus, workloads or engine, as the "
                               "report prints it; any other "
                               "contract change still blocks.")] = None,
    quiet: QuietOpt = False,
) -> None:
    """Judge a rulebook change over the corpus and write the merge report. Exit 0 eligible
    for merge, 1 blocked, 2 usage or input error, 3 required evidence unavailable."""
    from cakegov.govern.changes import ProposalInputError
    from cakegov.govern.models import ProposalOptions, parse_shard
    from cakegov.govern.proposal import execute
    from cakegov.govern.report import FORMATS

    root = project_root()
    if root is None:
        raise usage_error("not inside a cakegov project (no rules/checks and corpus/)")
    formats = [f.strip() for f in fmt.split(",") if f.strip()]
    if not formats or any(f not in FORMATS for f in formats):
        raise usage_error(f"--format takes a comma-separated subset of {', '.join(FORMATS)}")
    try:
        options = ProposalOptions(
            root=root, paths=list(paths or []), base=base, corpus=list(corpus or []),
            gpu=gpu.value, jobs=jobs or min(os.cpu_count() or 1, 8),
            shard=parse_shard(shard), time_limit_s=time_limit, memory_limit_mb=memory_limit,
            cache=cache, require_sandbox=require_sandbox, accept_contract=accept_contract)
    except ProposalInputError as exc:
        raise usage_error(str(exc)) from None
    from cakegov.progress import Bar

    with Bar(quiet=quiet) as bar:
        outcome = execute(options, report_dir or root / "reports", formats, ledger, record,
                          bar)
    for line in outcome.lines:
        (err if line.startswith(("error:", "warning:")) else out).print(line, markup=False)
    raise typer.Exit(outcome.exit_code)


@app.command("render-proposal")
def render_proposal(
    source: Annotated[Path, typer.Argument(help="A proposal.json written by propose-rule "
                      "(for example in an artifact another job produced).")],
    report_dir: Annotated[Path, typer.Option("--report-dir", help="Where the rendered "
                          "reports go.")] = Path("rendered"),
    fmt: Annotated[str, typer.Option("--format", metavar="FORMATS",
                                     help="Comma-separated: md,html,sarif.")]
    = "md,sarif",
) -> None:
    """Validate a proposal result against this engine's schema and render it with this
    engine's templates: how a trusted job turns an untrusted artifact into the comment and
    the SARIF it posts, never using Markdown or SARIF the pull request produced."""
    import json

    from pydantic import ValidationError

    from cakegov.govern.models import ProposalResult
    from cakegov.govern.report import write_reports

    formats = [f.strip() for f in fmt.split(",") if f.strip()]
    if not formats or any(f not in ("md", "html", "sarif") for f in formats):
        raise usage_error("--format takes a comma-separated subset of md, html, sarif")
    from cakegov.check.runner import NotRegular, read_regular
    from cakegov.govern.models import consistency_problem

    try:
        raw = read_regular(source, RENDER_INPUT_CAP + 1)  # never a FIFO or a device
        if len(raw) > RENDER_INPUT_CAP:
            raise usage_error(f"{source}: over {RENDER_INPUT_CAP} bytes; not a proposal "
                              "result")
        data = json.loads(raw.decode("utf-8"))
        result = ProposalResult.model_validate(data)
    except NotRegular:
        raise usage_error(f"{source}: not a regular file") from None
    except RecursionError:
        raise usage_error(f"{source}: not a valid proposal result: nested too deeply"
                          ) from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        detail = exc.errors()[0] if isinstance(exc, ValidationError) else exc
        raise usage_error(f"{source}: not a valid proposal result: {detail}") from None
    problem = consistency_problem(result)
    if problem is not None:
        raise usage_error(f"{source}: not a valid proposal result: {problem}")
    for path in write_reports(result, report_dir, formats):
        out.print(f"wrote {path}", markup=False)


class SimFormat(StrEnum):
    text = "text"
    json = "json"


@app.command()
def simulate(
    path: Annotated[Path, typer.Argument(help="Schedule file.")],
    shape: Annotated[list[str] | None, typer.Option("--shape", metavar="SHAPE", help="Simulate "
                     "this shape instead of the planned ones, e.g. M=1000,N=520,K=320 "
                     "(repeatable).")] = None,
    seeds: Annotated[int, typer.Option("--seeds", help="Seeds per shape (inputs and "
                     "scheduling tie-breaks).", min=1, max=64)] = 3,
    strategy: Annotated[str | None, typer.Option("--strategy", metavar="NAME", help="Use "
                        "this scheduling "
                        "strategy for every run (default: rotate through all).")] = None,
    cta: Annotated[list[str] | None, typer.Option("--cta", metavar="X,Y", help="Simulate only "
                   "this CTA, e.g. 3,1 (repeatable; default: all CTAs of small grids, else a "
                   "sample).")] = None,
    fmt: Annotated[SimFormat, typer.Option("--format", "-f", help="Output format.")] =
    SimFormat.text,
    max_events: Annotated[int, typer.Option("--max-events", help="Event bound per run.",
                          min=1)] = 200_000,
    rules: RulesOpt = None,
    workloads: WorkloadsOpt = None,
) -> None:
    """Simulate a schedule on the CPU (any verdict: the simulator grounds the labels).
    Exit 0 every run correct, 1 a defect reproduced, 2 bad input, 3 not simulated or
    incomplete."""
    import json

    from cakegov.gpu.data import DataError, parse_shape, select_shapes
    from cakegov.sim.evidence import lower_any, simulate_plan
    from cakegov.sim.run import grid_dims, parse_cta
    from cakegov.sim.scheduler import STRATEGIES
    from cakegov.sim.state import CORRECT, DEFECT, NotSimulated

    book = load_rulebook(rules)
    wls = load_wls(workloads)
    if not path.is_file():
        raise usage_error(f"no such schedule file: {path}")
    if strategy is not None and strategy not in STRATEGIES:
        raise usage_error(f"--strategy {strategy!r}: known strategies are "
                          f"{', '.join(STRATEGIES)}")
    try:
        ctas = [parse_cta(c) for c in cta or ()]
        requested = [parse_shape(s) for s in shape or ()]
    except (ValueError, DataError) as exc:
        raise usage_error(str(exc)) from None
    source = path.read_bytes()
    shapes = None
    kernel, workload, schedule, _why = lower_any(source, str(path), book, wls)
    if requested and workload is not None and schedule is not None:
        try:
            shapes = select_shapes(workload, schedule.sizes, schedule.divisible, requested)
        except DataError as exc:
            raise usage_error(f"--shape: {exc}") from None
    if ctas and kernel is not None:
        for sizes in shapes or []:
            try:
                dims = grid_dims(kernel, sizes)
            except NotSimulated:
                continue
            bad = [c for c in ctas if any(x >= d for x, d in zip(c, dims, strict=True))]
            if bad:
                raise usage_error(f"--cta {bad[0]} is outside the grid {dims} of shape "
                                  + ",".join(f"{k}={v}" for k, v in sizes.items()))
    result = simulate_plan(source, str(path), book, wls, seeds=seeds, max_events=max_events,
                           shapes=shapes, strategy=strategy, ctas=ctas or None)
    if fmt is SimFormat.json:
        sys.stdout.write(json.dumps(result, indent=2, sort_keys=True) + "\n")
    else:
        out.print(f"{path}: {result['status']}: {result['detail']}", markup=False)
        for run in result["strategies"]:
            out.print(f"  {run['strategy']:<16} seed {run['seed']}  {run['shape']:<22} "
                      f"{run['outcome']:<13} {run['detail'][:100]}", markup=False)
        if result["witness"]:
            out.print("  witness:", markup=False)
            for step in result["witness"][-15:]:
                out.print(f"    line {step['line']:>3}: {step['text']}", markup=False)
    status = result["status"]
    raise typer.Exit(0 if status == CORRECT else EXIT_REJECTED if status == DEFECT
                     else EXIT_INCOMPLETE)


class CrossFormat(StrEnum):
    text = "text"
    json = "json"
    markdown = "markdown"


@corpus_app.command("crosscheck")
def corpus_crosscheck(
    dirs: Annotated[list[Path] | None, typer.Argument(help="Corpus directories or files "
                    "(default: corpus/valid and corpus/invalid).")] = None,
    fmt: Annotated[CrossFormat, typer.Option("--format", "-f", help="Output format.")] =
    CrossFormat.text,
    seeds: Annotated[int, typer.Option("--seeds", help="Seeds per shape.", min=1,
                     max=64)] = 3,
    quiet: QuietOpt = False,
    rules: RulesOpt = None,
    workloads: WorkloadsOpt = None,
) -> None:
    """Run the checker and the CPU simulator on every corpus schedule and compare the
    verdict with the dynamic outcome. Exit 0 no disagreement, 1 a disagreement, 2 usage."""
    from cakegov.sim.crosscheck import (
        crosscheck,
        render_json,
        render_markdown,
        render_text,
        summary,
    )

    book = load_rulebook(rules)
    wls = load_wls(workloads)
    root = project_root()
    if not dirs:
        if root is None:
            raise usage_error("no corpus found: pass the directories")
        dirs = [root / "corpus" / "valid", root / "corpus" / "invalid"]
    missing = [str(d) for d in dirs if not d.exists()]
    if missing:
        raise usage_error(f"no such file or directory: {', '.join(missing)}")
    from cakegov.check.runner import expand_paths
    from cakegov.progress import progress

    files = expand_paths(dirs)
    with progress("crosschecking", len(files), quiet=quiet) as advance:
        rows = crosscheck(files, book, wls, seeds=seeds, root=root, advance=advance)
    if not rows:
        raise usage_error("no *.cake schedules found")
    render = {CrossFormat.json: render_json, CrossFormat.markdown: render_markdown,
              CrossFormat.text: render_text}[fmt]
    sys.stdout.write(render(rows))
    raise typer.Exit(1 if summary(rows)["disagreements"] else 0)


@corpus_app.command("manifest")
def corpus_manifest(
    check: Annotated[bool, typer.Option("--check", help="Verify instead of writing: exit 1 "
                     "when corpus/MANIFEST.json does not describe the files.")] = False,
) -> None:
    """Write corpus/MANIFEST.json (every case's sha256 and labels, every workload's
    sha256), or verify it with --check."""
    from cakegov.check.lock import atomic_write
    from cakegov.corpus import manifest

    root = project_root()
    if root is None:
        raise usage_error("not inside a cakegov project (no rules/checks and corpus/)")
    corpus = root / "corpus"
    if check:
        found = manifest.problems(corpus)
        if found:
            for line in found:
                err.print(line, markup=False)
            raise typer.Exit(EXIT_REJECTED)
        data = manifest.build(corpus)
        out.print(f"manifest ok: {len(data['cases'])} cases, {len(data['workloads'])} "
                  "workload files", markup=False)
        return
    data = manifest.build(corpus)
    atomic_write(corpus / manifest.MANIFEST_NAME, manifest.render(data))
    out.print(f"wrote {corpus / manifest.MANIFEST_NAME}: {len(data['cases'])} cases",
              markup=False)


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


def _open_ledger(path: Path | None, create: bool = False) -> Ledger:
    from cakegov.govern.ledger import Ledger, LedgerError

    try:
        return Ledger.open(path, create=create)
    except LedgerError as exc:
        raise usage_error(str(exc)) from None


def _record_checks(results: list[FileResult], checker: Checker, ledger_path: Path | None,
                   sources: dict[str, bytes] | None = None) -> None:
    """`check --record`: one ledger record per file; the summary goes to standard error."""
    from cakegov.govern.audit import record_checks
    from cakegov.govern.ledger import LedgerError

    with _open_ledger(ledger_path, create=True) as ledger:
        try:
            records = record_checks(ledger, results, checker, sources)
        except LedgerError as exc:
            raise usage_error(str(exc)) from None
    err.print(f"recorded {len(records)} check record(s) in {ledger.path} "
              f"(#{records[0].id}-#{records[-1].id})", markup=False)


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

    with _open_ledger(ledger) as book:
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

    with _open_ledger(ledger) as book:
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

    with _open_ledger(ledger) as book:
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
    with _open_ledger(ledger) as book:
        try:
            with rulebook_at(ref, resolve_rules(rules)) as at:
                result = replay(book, load_rulebook(at.root), wls, ref=ref, commit=at.commit)
        except ReplayError as exc:
            raise usage_error(str(exc)) from None
    if fmt is ReplayFormat.json:
        sys.stdout.write(json.dumps(result.as_dict(), indent=2, sort_keys=True) + "\n")
    else:
        sys.stdout.write(render_replay(result, show_all=show_all))


def _command_name(info: Any) -> str:
    return info.name or typer.main.get_command_name(info.callback.__name__)


def narrowed(argv: list[str]) -> typer.Typer:
    """The app with only the top-level command or group `argv` invokes, when it names
    one exactly: typer builds a click command for every function it holds (reading each
    signature and its annotations), which a one-file `check` should not pay for. Help,
    options and errors of the invoked command are the same; anything else (no command,
    an option first, a misspelt name) gets the whole app, whose messages list them all."""
    if not argv or argv[0].startswith("-"):
        return app
    commands = [c for c in app.registered_commands if _command_name(c) == argv[0]]
    groups = [g for g in app.registered_groups if g.name == argv[0]]
    if len(commands) + len(groups) != 1:
        return app
    narrow = copy.copy(app)
    narrow.registered_commands = commands
    narrow.registered_groups = groups
    return narrow


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


def main() -> None:
    """The command line of this process (`cakegov.launch.main` is the console entry
    point: it answers a remembered check before this module is imported)."""
    from cakegov.check.result_cache import serve

    argv = sys.argv[1:]
    run_argv(argv, serve(argv))


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


# ---- cost model (cakegov/cost/commands.py) -------------------------------------------
from cakegov.cost.commands import costmodel_app, rank  # noqa: E402

app.command("rank")(rank)
app.add_typer(costmodel_app, name="costmodel")

# ---- corpus quality (cakegov/corpus/commands.py) --------------------------------------
from cakegov.corpus.commands import corpus_accept, corpus_mutate, corpus_run  # noqa: E402

corpus_app.command("mutate")(corpus_mutate)
corpus_app.command("run")(corpus_run)
corpus_app.command("accept")(corpus_accept)
