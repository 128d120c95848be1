"""The `cakegov run` command: run a clean schedule on the GPU, compare, time, record."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from cakegov.check.exits import EXIT_INCOMPLETE, EXIT_USAGE
from cakegov.commands.shared import (
    RulesOpt,
    WorkloadsOpt,
    err,
    load_rulebook,
    load_wls,
    out,
    project_root,
    usage_error,
)


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


COMMANDS = {"run": run}
