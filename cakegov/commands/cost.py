"""The `cakegov rank` command and the `cakegov costmodel` group. Each is a thin call into
cakegov/cost; bad input exits 2 with a located message."""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from cakegov.commands.shared import load_rulebook, project_root, resolve_workloads, usage_error

costmodel_app = typer.Typer(help="Cost-model parameters: calibrate, evaluate, synthesise.",
                            no_args_is_help=True)


class RankFormat(StrEnum):
    text = "text"
    json = "json"
    html = "html"


class EvalFormat(StrEnum):
    text = "text"
    json = "json"


RulesOpt = Annotated[Path | None, typer.Option("--rules",
                                               metavar="DIR", help="Rulebook directory.")]
WorkloadsOpt = Annotated[Path | None, typer.Option("--workloads",
                                                   metavar="DIR", help="Workload directory.")]
DeviceOpt = Annotated[str | None, typer.Option("--device",
                                               metavar="DEVICE", help="Device table of the "
                      "parameter file (default: its default_device).")]


def _setup(rules: Path | None, workloads: Path | None):
    from cakegov.corpus.workloads import WorkloadError, load_workloads

    book = load_rulebook(rules)
    try:
        wls = load_workloads(resolve_workloads(workloads))
    except WorkloadError as exc:
        raise usage_error(str(exc)) from None
    return book, wls


def _schedules(paths: list[Path]) -> list[Path]:
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise usage_error(f"no such file or directory: {', '.join(missing)}")
    files: list[Path] = []
    for p in paths:
        files += sorted(p.rglob("*.cake")) if p.is_dir() else [p]
    if not files:
        raise usage_error("no *.cake schedules found")
    return files


def _write(text: str, output: Path | None) -> None:
    if output is None:
        sys.stdout.write(text)
        return
    from cakegov.check.lock import atomic_write

    output.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(output, text)


def rank(
    paths: Annotated[list[Path], typer.Argument(help="Candidate schedule files or "
                                                "directories.")],
    shape: Annotated[str | None, typer.Option("--shape",
                                              metavar="M=..,N=..", help="Sizes to rank at, e.g. "
                     "M=4096,N=4096,K=4096 (default: the workload's largest check shape).")
                     ] = None,
    fmt: Annotated[RankFormat, typer.Option("--format", "-f")] = RankFormat.text,
    output: Annotated[Path | None, typer.Option("--output", "-o")] = None,
    device: DeviceOpt = None,
    rules: RulesOpt = None,
    workloads: WorkloadsOpt = None,
) -> None:
    """Rank candidate schedules by predicted time: bottleneck, fraction of the
    speed-of-light bound, what would help. Never rejects; exit 0, or 2 on bad input."""
    from cakegov.cost.estimate import load_candidate
    from cakegov.cost.rank import (
        RankError,
        parse_shape,
        render_html,
        render_json,
        render_text,
    )
    from cakegov.cost.rank import rank as do_rank

    try:
        sizes = parse_shape(shape)
    except RankError as exc:
        raise usage_error(str(exc)) from None
    book, wls = _setup(rules, workloads)
    cands = [load_candidate(p, str(p), book, wls) for p in _schedules(paths)]
    try:
        groups = do_rank(cands, sizes, book, device)
    except RankError as exc:
        raise usage_error(str(exc)) from None
    render = {RankFormat.json: render_json, RankFormat.html: render_html}.get(fmt, render_text)
    _write(render(groups), output)


def _observations(measurements: list[Path], rules: Path | None, workloads: Path | None):
    from cakegov.cost.calibrate import MeasurementError, read_observations

    book, wls = _setup(rules, workloads)
    files: list[Path] = []
    for m in measurements:
        if not m.exists():
            raise usage_error(f"no such file or directory: {m}")
        files += sorted(m.glob("*.jsonl")) if m.is_dir() else [m]
    root = project_root() or Path.cwd()
    try:
        obs, skipped = read_observations(files, root, book, wls)
    except MeasurementError as exc:
        raise usage_error(str(exc)) from None
    if not obs:
        raise usage_error("no usable measurement records in "
                          + ", ".join(str(f) for f in files))
    return book, obs, skipped


MeasOpt = Annotated[list[Path], typer.Option("--measurements", "-m",
                                             metavar="FILE", help="Measurement "
                    "record files (JSON lines) or directories of them.")]


@costmodel_app.command("eval")
def eval_(
    measurements: MeasOpt,
    fmt: Annotated[EvalFormat, typer.Option("--format", "-f")] = EvalFormat.text,
    params_file: Annotated[Path | None, typer.Option("--params", help="Evaluate this "
                           "parameter file instead of the rulebook's.")] = None,
    rules: RulesOpt = None,
    workloads: WorkloadsOpt = None,
) -> None:
    """Ranking metrics of the predictions against measurement records; flags anything
    faster than the speed-of-light bound (exit 1 when flagged)."""
    from cakegov.cost.calibrate import evaluate
    from cakegov.cost.params import CostParamError, load_params

    _book, obs, skipped = _observations(measurements, rules, workloads)
    override = None
    if params_file is not None:
        try:
            p = load_params(params_file)
        except CostParamError as exc:
            raise usage_error(str(exc)) from None
        override = {p.target: p}
    result = evaluate(obs, override)
    result["skipped"] = skipped
    cal = sorted({(override or {}).get(o.params.target, o.params).calibration for o in obs})
    result["calibration"] = cal
    if fmt is EvalFormat.json:
        sys.stdout.write(json.dumps(result, indent=2, sort_keys=True) + "\n")
    else:
        s = result["summary"]

        def f(key: str, pct: bool = False) -> str:
            v = s.get(key)
            return "–" if v is None else (f"{v:.1%}" if pct else f"{v:.3f}")

        lines = [f"{int(s['records'])} record(s) in {int(s['groups'])} ranked group(s); "
                 f"parameters: {', '.join(cal)}",
                 f"  Spearman rho      {f('spearman')}", f"  Kendall tau-b     {f('kendall')}",
                 f"  pairwise accuracy {f('pairwise', True)}",
                 f"  top-1 recall      {f('top1_recall', True)}",
                 f"  top-5 recall      {f('top5_recall', True)}",
                 f"  top-1 regret      {f('top1_regret')} (best measured / measured of the "
                 "predicted best; 1 = none)",
                 f"  top-5 regret      {f('top5_regret')}",
                 f"  median abs % err  {f('mape', True)}"]
        lines += [f"  FLAG {x}" for x in result["speed_of_light_flags"]]
        lines += [f"  skipped {x}" for x in skipped]
        sys.stdout.write("\n".join(lines) + "\n")
    raise typer.Exit(1 if result["speed_of_light_flags"] else 0)


@costmodel_app.command()
def calibrate(
    measurements: MeasOpt,
    target: Annotated[str, typer.Option("--target",
                                        metavar="TARGET", help="Target whose parameters to "
                      "fit.")] = "sm_90a",
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Where to write the "
                      "new parameter-file version (default: reports/costmodel/TARGET.toml; "
                      "propose it with `cakegov propose-rule`).")] = None,
    rules: RulesOpt = None,
    workloads: WorkloadsOpt = None,
) -> None:
    """Fit the target's parameters to measurement records (robust regression on log
    time) and write a new parameter-file version with the fit statistics."""
    from cakegov.cost.calibrate import MeasurementError, calibrated_params, fit
    from cakegov.cost.params import CostParamError, dump_params, params_for

    book, obs, _skipped = _observations(measurements, rules, workloads)
    try:
        params = params_for(book, target)
        result = fit(obs, params)
    except (CostParamError, MeasurementError) as exc:
        raise usage_error(str(exc)) from None
    new = calibrated_params(result, obs)
    out = output or Path("reports") / "costmodel" / f"{target}.toml"
    _write(dump_params(new, header=f"Cost-model parameters for {target}, calibrated by "
                       "`cakegov costmodel calibrate`.\nPropose with `cakegov propose-rule` "
                       "to replace rules/costmodel/ (the gate compares ranking metrics)."),
           out)
    for k in sorted(result.identified):
        if result.identified[k]:
            sys.stderr.write(f"{k}: {params[k]:.4g} -> {result.values[k]:.4g} "
                             f"(± {result.stderr[k]:.2g} in log)\n")
        else:
            sys.stderr.write(f"{k}: not identified by these records; prior kept\n")
    sys.stderr.write(f"rms log error {result.rms_before:.3f} -> {result.rms_after:.3f} over "
                     f"{result.n} record(s); wrote {out} (version {new.version})\n")


@costmodel_app.command()
def synthesize(
    paths: Annotated[list[Path], typer.Argument(help="Schedule files or directories.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Record file to write.")],
    truth: Annotated[str, typer.Option("--truth",
                                       metavar="NAME=VALUE,..",
                                       help="Parameter values that replace the priors, "
                                       "e.g. hbm_efficiency=0.7,gmem_latency_ns=800.")] = "",
    noise: Annotated[float, typer.Option("--noise", help="Log-normal sigma.")] = 0.05,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    device: DeviceOpt = None,
    rules: RulesOpt = None,
    workloads: WorkloadsOpt = None,
) -> None:
    """Write synthetic measurement records the model generates at every check shape
    (marked `synthetic`; for testing calibration until GPU records exist)."""
    from cakegov.cost.calibrate import synthesize as synth
    from cakegov.cost.estimate import load_candidate, shape_problem
    from cakegov.cost.params import PARAM_KEYS, CostParamError
    from cakegov.cost.profile import CostError

    values: dict[str, float] = {}
    for item in filter(None, truth.split(",")):
        k, _, v = item.partition("=")
        if k.strip() not in PARAM_KEYS:
            raise usage_error(f"--truth: unknown parameter {k.strip()!r}")
        try:
            values[k.strip()] = float(v)
        except ValueError:
            raise usage_error(f"--truth: `{item}` is not NAME=NUMBER") from None
    book, wls = _setup(rules, workloads)
    items = []
    for p in _schedules(paths):
        c = load_candidate(p, str(p), book, wls)
        if c.kernel is None:
            continue
        for s in c.workload.shapes:
            s = {**dict(s), **{k: -(-s[k] // d) * d for k, d in c.divisible.items() if k in s}}
            if not shape_problem(c, s):
                items.append((c, s))
    try:
        recs = synth(items, book, values, device, noise, seed)
    except (CostParamError, CostError) as exc:
        raise usage_error(str(exc)) from None
    _write("".join(json.dumps(r, sort_keys=True, separators=(",", ":")) + "\n" for r in recs),
           output)
    sys.stderr.write(f"wrote {len(recs)} synthetic record(s) to {output}\n")


COMMANDS = {"rank": rank}
GROUPS = {"costmodel": costmodel_app}
