"""The merge gate's commands: `propose-rule` (judge a rulebook change over the corpus),
`render-proposal` (render an untrusted result with trusted templates) and `doctor` (probe
the sandbox proposed code runs in)."""

from __future__ import annotations

import os
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from cakegov.commands.shared import LedgerOpt, QuietOpt, err, out, project_root, usage_error


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



class GpuMode(StrEnum):
    auto = "auto"
    off = "off"
    require = "require"


RENDER_INPUT_CAP = 64 * 1024 * 1024


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


COMMANDS = {"doctor": doctor, "propose-rule": propose_rule, "render-proposal": render_proposal}
