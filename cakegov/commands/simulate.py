"""The `cakegov simulate` command: run a schedule on the CPU simulator."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from cakegov.check.exits import EXIT_INCOMPLETE, EXIT_REJECTED
from cakegov.commands.shared import (
    RulesOpt,
    WorkloadsOpt,
    load_rulebook,
    load_wls,
    out,
    usage_error,
)


class SimFormat(StrEnum):
    text = "text"
    json = "json"


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


COMMANDS = {"simulate": simulate}
