"""Measurement records in, parameters and metrics out: reading the GPU runner's records
(cakegov/gpu/records.py), evaluating predictions against them, fitting parameters by
robust regression on log time (Huber weights, iteratively reweighted, Levenberg-damped
Gauss-Newton with a finite-difference Jacobian; numpy only), and synthesising records from
the model itself (for tests and until real measurements exist)."""

from __future__ import annotations

import hashlib
import json
import math
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from cakegov.cost import metrics
from cakegov.cost.estimate import load_candidate, profile_of, shape_problem
from cakegov.cost.model import predict
from cakegov.cost.params import (
    EFFICIENCIES,
    FITTED,
    CostParamError,
    CostParams,
    Device,
    params_for,
)
from cakegov.cost.profile import CostError, Profile

HUBER_K = 1.345
RECORD_SCHEMA = 1


class MeasurementError(Exception):
    """A measurement record is unusable; the message names the file and line."""


@dataclass
class Observation:
    where: str
    schedule: str
    workload: str
    shape: dict[str, int]
    device: Device
    params: CostParams
    time_ns: float
    profile: Profile
    digest: str

    @property
    def group(self) -> str:
        shape = ",".join(f"{k}={v}" for k, v in sorted(self.shape.items()))
        return f"{self.workload} {shape} {self.device.key}"


def _need(cond: bool, where: str, msg: str) -> None:
    if not cond:
        raise MeasurementError(f"{where}: {msg}")


def read_observations(paths: list[Path], root: Path, book: Any, workloads: Any
                      ) -> tuple[list[Observation], list[str]]:
    """Every passing record of `paths` as an observation; failed runs are skipped (listed
    in the second value). A malformed record is an error naming its line."""
    obs: list[Observation] = []
    skipped: list[str] = []
    cands: dict[str, Any] = {}
    profiles: dict[tuple, Profile] = {}
    for path in paths:
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise MeasurementError(f"{path}: cannot read: {exc}") from None
        for n, line in enumerate(lines, 1):
            where = f"{path}:{n}"
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise MeasurementError(f"{where}: not JSON: {exc.msg}") from None
            _need(isinstance(rec, dict) and rec.get("schema") == RECORD_SCHEMA, where,
                  f"not a measurement record (schema {RECORD_SCHEMA})")
            if rec.get("passed") is not True:
                skipped.append(f"{where}: the run did not pass; not used")
                continue
            sched, shape, gpu = rec.get("schedule"), rec.get("shape"), rec.get("gpu")
            times = rec.get("times_ms")
            _need(isinstance(sched, dict) and isinstance(sched.get("file"), str), where,
                  "`schedule.file` is missing")
            _need(isinstance(shape, dict) and shape and all(
                isinstance(v, int) and not isinstance(v, bool) and v > 0
                for v in shape.values()), where, "`shape` must map sizes to positive integers")
            _need(isinstance(gpu, dict) and isinstance(gpu.get("name"), str), where,
                  "`gpu.name` is missing")
            med = times.get("median_ms") if isinstance(times, dict) else None
            _need(isinstance(med, (int, float)) and not isinstance(med, bool) and med > 0
                  and math.isfinite(med), where, "`times_ms.median_ms` must be a positive "
                  "number")
            file = sched["file"]
            if file not in cands:
                full = Path(file) if Path(file).is_absolute() else root / file
                _need(full.is_file(), where, f"schedule {file} does not exist")
                cands[file] = load_candidate(full, file, book, workloads)
            cand = cands[file]
            _need(cand.kernel is not None, where, f"schedule {file}: {cand.error}")
            sha = sched.get("sha256")
            _need(sha in (None, cand.kernel.schedule_sha256), where,
                  f"schedule {file} changed since it was measured (sha256 differs)")
            why = shape_problem(cand, shape)
            _need(not why, where, f"shape does not fit {file}: {why}")
            try:
                params = params_for(book, cand.kernel.target)
            except CostParamError as exc:
                raise MeasurementError(f"{where}: {exc}") from None
            dev = params.device_for_gpu(gpu["name"])
            _need(dev is not None, where, f"no device of {params.relpath} matches GPU "
                  f"{gpu['name']!r}")
            key = (file, tuple(sorted(shape.items())))
            if key not in profiles:
                try:
                    profiles[key] = profile_of(cand, dict(shape), book)
                except CostError as exc:
                    raise MeasurementError(f"{where}: {exc}") from None
            obs.append(Observation(where, file, cand.workload.name, dict(shape), dev, params,
                                   float(med) * 1e6, profiles[key],
                                   hashlib.sha256(line.strip().encode()).hexdigest()))
    return obs, skipped


def _predict_all(obs: list[Observation], override: CostParams | None = None) -> np.ndarray:
    out = []
    for o in obs:
        p = override if override is not None and override.target == o.params.target \
            else o.params
        out.append(predict(o.profile, p, o.device).time_ns)
    return np.asarray(out)


def evaluate(obs: list[Observation], params: dict[str, CostParams] | None = None
             ) -> dict[str, Any]:
    """Ranking metrics of the predictions, and every prediction or measurement faster
    than its speed-of-light bound."""
    groups: dict[str, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    flags: list[str] = []
    for o in obs:
        p = (params or {}).get(o.params.target, o.params)
        est = predict(o.profile, p, o.device)
        groups[o.group][0].append(est.time_ns)
        groups[o.group][1].append(o.time_ns)
        if est.time_ns < est.sol_ns:
            flags.append(f"{o.where}: prediction {est.time_ns:.0f} ns is faster than the "
                         f"speed-of-light bound {est.sol_ns:.0f} ns (a model bug)")
        if o.time_ns < est.sol_ns:
            flags.append(f"{o.where}: measured {o.time_ns:.0f} ns is faster than the "
                         f"speed-of-light bound {est.sol_ns:.0f} ns (check the record or the "
                         "device figures)")
    result = metrics.evaluate(dict(groups))
    result["speed_of_light_flags"] = flags
    return result


def _huber(r: np.ndarray, s: float) -> float:
    a = np.abs(r) / s
    return float(np.where(a <= HUBER_K, 0.5 * a * a, HUBER_K * a - 0.5 * HUBER_K ** 2).sum())


def _scale(r: np.ndarray) -> float:
    return max(1.4826 * float(np.median(np.abs(r - np.median(r)))), 1e-3)


@dataclass
class Fit:
    params: CostParams
    values: dict[str, float]
    identified: dict[str, bool]
    stderr: dict[str, float]
    iterations: int
    converged: bool
    rms_before: float
    rms_after: float
    n: int


def fit(obs: list[Observation], params: CostParams, keys: tuple[str, ...] = FITTED,
        max_iter: int = 60) -> Fit:
    """Fit `keys` of `params` to the observations of its target (robust, in log space)."""
    mine = [o for o in obs if o.params.target == params.target]
    if len(mine) < 2:
        raise MeasurementError(f"{params.target}: {len(mine)} usable record(s); calibration "
                               "needs at least 2")
    y = np.log([o.time_ns for o in mine])
    theta = np.log([params[k] for k in keys])
    lo = np.array([math.log(0.01) if k in EFFICIENCIES else math.log(1e-3) for k in keys])
    hi = np.array([0.0 if k in EFFICIENCIES else math.log(1e9) for k in keys])

    def model(th: np.ndarray) -> np.ndarray:
        p = params.with_params(dict(zip(keys, np.exp(th), strict=True)), "fit", "")
        return np.log(_predict_all(mine, p))

    r = y - model(theta)
    rms_before = float(np.sqrt(np.mean(r * r)))
    lam, converged, it = 1e-2, False, 0
    jac = np.zeros((len(mine), len(keys)))
    w = np.ones(len(mine))
    for it in range(1, max_iter + 1):  # noqa: B007
        s = _scale(r)
        a = np.abs(r) / s
        w = np.where(a <= HUBER_K, 1.0, HUBER_K / np.maximum(a, 1e-12))
        base = y - r
        for j in range(len(keys)):
            step = 1e-4
            th = theta.copy()
            th[j] = th[j] - step if th[j] + step > hi[j] else th[j] + step
            jac[:, j] = (model(th) - base) / (th[j] - theta[j])
        jtw = jac.T * w
        g = jtw @ r
        h = jtw @ jac
        loss = _huber(r, s)
        improved = False
        for _ in range(8):
            delta = np.linalg.solve(h + lam * np.diag(np.diag(h) + 1e-9), g)
            cand = np.clip(theta + delta, lo, hi)
            rc = y - model(cand)
            if _huber(rc, s) < loss:
                theta, r, lam, improved = cand, rc, max(lam / 3, 1e-6), True
                break
            lam *= 10
        if not improved or float(np.max(np.abs(delta))) < 1e-7:
            converged = True
            break
    col = np.sqrt((jac * jac).sum(axis=0))
    identified = {k: bool(col[j] > 1e-3 * math.sqrt(len(mine))) for j, k in enumerate(keys)}
    s = _scale(r)
    try:
        cov = np.linalg.pinv((jac.T * w) @ jac) * s * s
        stderr = {k: float(math.sqrt(max(cov[j, j], 0.0))) for j, k in enumerate(keys)}
    except np.linalg.LinAlgError:
        stderr = {k: float("nan") for k in keys}
    values = {k: float(math.exp(theta[j])) for j, k in enumerate(keys) if identified[k]}
    return Fit(params, values, identified, stderr, it, converged, rms_before,
               float(np.sqrt(np.mean(r * r))), len(mine))


def calibrated_params(f: Fit, obs: list[Observation], date: str | None = None) -> CostParams:
    """A new version of the parameter file: fitted values with the fit as their source,
    the fit statistics and the records' digests in [fit]."""
    date = date or datetime.now(UTC).date().isoformat()
    digests = sorted({o.digest for o in obs if o.params.target == f.params.target})
    combined = hashlib.sha256("\n".join(digests).encode()).hexdigest()
    major, minor, _patch = (int(x) for x in f.params.version.split("."))
    src = (f"fit: Huber IRLS on log time over {f.n} measurement record(s), records digest "
           f"{combined[:16]}")
    p = f.params.with_params(f.values, src, date)
    fit_table = {"method": "Huber IRLS (k=1.345) on log time, Levenberg-damped Gauss-Newton",
                 "records": f.n, "records_sha256": digests, "records_digest": combined,
                 "iterations": f.iterations, "converged": f.converged,
                 "rms_log_error_before": round(f.rms_before, 6),
                 "rms_log_error_after": round(f.rms_after, 6),
                 "fitted": sorted(f.values),
                 "not_identified": sorted(k for k, ok in f.identified.items() if not ok),
                 "date": date}
    return CostParams(p.target, f"{major}.{minor + 1}.0",
                      f"calibrated: {f.n} measurement record(s), {date}", p.default_device,
                      p.devices, p.params, p.units, fit_table, p.relpath)


def synthesize(items: list[tuple[Any, dict[str, int]]], book: Any, truth: dict[str, float],
               device: str | None, noise: float, seed: int) -> list[dict[str, Any]]:
    """Measurement records the model itself generates with parameters `truth` (replacing
    the priors) and log-normal noise: synthetic, and marked so."""
    rng = np.random.default_rng(seed)
    out = []
    for cand, shape in items:
        params = params_for(book, cand.kernel.target)
        p = params.with_params(truth, "synthetic truth", "")
        dev = p.device(device)
        t = predict(profile_of(cand, shape, book), p, dev).time_ns
        t *= math.exp(rng.normal(0.0, noise)) if noise > 0 else 1.0
        out.append({"schema": RECORD_SCHEMA, "synthetic": True, "passed": True,
                    "schedule": {"file": cand.file, "sha256": cand.kernel.schedule_sha256,
                                 "target": cand.kernel.target},
                    "workload": cand.workload.name, "shape": dict(shape),
                    "gpu": {"name": dev.name},
                    "times_ms": {"median_ms": t / 1e6, "n": 1}})
    return out
