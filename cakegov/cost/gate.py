"""The merge gate's judgement of a cost-parameter change, engine code over data.

A parameter file holds no code: the proposed file is read with `tomllib` and validated
(cakegov/cost/params.py); kernels are lowered with the *base* rulebook's plugins. Lowering
imports the workload files of the checkout, so `propose-rule` runs this in a contained
worker (cakegov/govern/verdict.py::judge_costmodel, worker mode `cost`).
With measurement records (corpus/measurements/*.jsonl), the ranking
metrics before and after are compared and a change that worsens one beyond TOLERANCE
blocks. Always: no prediction on the valid corpus may be faster than its speed-of-light
bound. A cost change never changes a schedule's verdict."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cakegov.cost.params import CostParamError, CostParams, parse_params

TOLERANCE = 0.02  # absolute drop allowed in Spearman, pairwise accuracy, top-1 regret
JUDGED = ("spearman", "pairwise", "top1_regret")


@dataclass
class CostJudgement:
    blockers: list[tuple[str, list[str], str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)


def _read(path: Path, rel: str) -> CostParams:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise CostParamError(f"rules/{rel}", f"cannot read: {exc}") from None
    return parse_params(data, f"rules/{rel}", Path(rel).stem)


def judge(base_rules: Path, cand_rules: Path, changed: list[str], valid: list[Path],
          workloads_dir: Path, measurements: Path, root: Path) -> CostJudgement:
    """Judge the changed `costmodel/*.toml` files (relpaths inside the rulebook)."""
    out = CostJudgement()
    cand: dict[str, CostParams] = {}
    for rel in changed:
        if not (cand_rules / rel).is_file():
            out.notes.append(f"cost model: rules/{rel} removed; its target has no estimates")
            continue
        try:
            p = _read(cand_rules / rel, rel)
        except CostParamError as exc:
            out.blockers.append(("cost-parameters-invalid", [f"rules/{rel}"], str(exc)))
            continue
        cand[p.target] = p
    if not cand:
        return out
    from cakegov.check.rulebook import PluginError, Rulebook
    from cakegov.corpus.workloads import WorkloadError, load_workloads
    from cakegov.cost.calibrate import MeasurementError, evaluate, read_observations
    from cakegov.cost.estimate import load_candidate, profile_of, shape_problem
    from cakegov.cost.model import predict
    from cakegov.cost.profile import CostError

    try:
        book = Rulebook.load(base_rules)
        wls = load_workloads(workloads_dir)
    except (PluginError, WorkloadError) as exc:
        out.notes.append(f"cost model: not judged, the base rulebook does not load: {exc}")
        return out
    below, priced = [], 0
    for path in valid:
        rel = _rel(path, root)
        c = load_candidate(path, rel, book, wls)
        if c.kernel is None or c.kernel.target not in cand:
            continue
        p = cand[c.kernel.target]
        for s in c.workload.shapes:
            shape = {**dict(s), **{k: -(-s[k] // d) * d for k, d in c.divisible.items()
                                   if k in s}}
            if shape_problem(c, shape):
                continue
            try:
                est = predict(profile_of(c, shape, book), p, p.device())
            except (CostError, CostParamError):
                continue
            priced += 1
            if est.time_ns < est.sol_ns:
                below.append(f"{rel} at {shape}")
    if below:
        out.blockers.append(("cost-below-speed-of-light", sorted({b.split(' at ')[0]
                                                                   for b in below}),
                             f"the proposed parameters predict {len(below)} launch(es) faster "
                             f"than their speed-of-light bound: {', '.join(below[:5])}"))
    files = sorted(measurements.glob("*.jsonl")) if measurements.is_dir() else []
    obs = []
    if files:
        try:
            obs, _ = read_observations(files, root, book, wls)
        except MeasurementError as exc:
            out.notes.append(f"cost model: measurement records unusable ({exc}); judged only "
                             "the speed-of-light bound")
    obs = [o for o in obs if o.params.target in cand]
    if not obs:
        out.notes.append(f"cost model: no measurement records for "
                         f"{', '.join(sorted(cand))}; judged only that the {priced} "
                         "prediction(s) over the valid corpus stay at or above the "
                         "speed-of-light bound (uncalibrated: datasheet priors)")
        return out
    before = evaluate(obs)["summary"]
    after = evaluate(obs, cand)["summary"]
    out.metrics = {"before": before, "after": after, "tolerance": TOLERANCE}
    table = ", ".join(f"{k} {_f(before.get(k))} -> {_f(after.get(k))}"
                      for k in (*JUDGED, "kendall", "top1_recall", "mape"))
    out.notes.append(f"cost model on {len(obs)} measurement record(s): {table}")
    worse = [k for k in JUDGED if before.get(k) is not None and after.get(k) is not None
             and after[k] < before[k] - TOLERANCE]
    if worse:
        out.blockers.append(("cost-ranking-worse", [f"rules/costmodel/{t}.toml" for t in
                                                    sorted(cand)],
                             "the proposed parameters rank the measured schedules worse: "
                             + ", ".join(f"{k} {_f(before[k])} -> {_f(after[k])}"
                                         for k in worse)
                             + f" (tolerance {TOLERANCE})"))
    return out


def _f(v: Any) -> str:
    return "–" if v is None else f"{v:.3f}"


def _rel(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)
