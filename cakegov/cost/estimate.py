"""Estimating schedule files: lower without checking, profile at a shape, price with a
target's parameters, and say it as `report`/`hint` findings of authority `estimate`
(which never change a verdict)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cakegov.check.findings import Finding
from cakegov.cost.model import Estimate, predict, suggestions
from cakegov.cost.params import CostParams, Device
from cakegov.cost.profile import CostError, Profile, profile
from cakegov.ir.nodes import Span

RULE = "cost-model"


@dataclass
class Candidate:
    """One schedule file, lowered (or why not)."""

    file: str
    kernel: Any = None
    workload: Any = None
    schedule: Any = None
    error: str = ""
    divisible: dict[str, int] = field(default_factory=dict)


def load_candidate(path: Path, display: str, book: Any, workloads: Any) -> Candidate:
    from cakegov.sim.evidence import lower_any

    try:
        source = path.read_bytes()
    except OSError as exc:
        return Candidate(display, error=f"cannot read: {exc.strerror}")
    kernel, workload, schedule, why = lower_any(source, display, book, workloads)
    if kernel is None:
        return Candidate(display, workload=workload, schedule=schedule, error=why)
    return Candidate(display, kernel, workload, schedule, divisible=dict(kernel.divisible))


def shape_problem(c: Candidate, shape: dict[str, int]) -> str:
    """Why `c` cannot run at `shape` (empty when it can)."""
    fixed = c.kernel.sizes
    for name, value in fixed.items():
        if name in shape and shape[name] != value:
            return f"the schedule fixes {name}={value}"
    for name, d in c.divisible.items():
        if name in shape and shape[name] % d:
            return f"the schedule needs {name} divisible by {d}"
    missing = [s for s in c.workload.sizes if s not in shape and s not in fixed]
    if missing:
        return f"no value for size(s) {', '.join(missing)}"
    return ""


def profile_of(c: Candidate, shape: dict[str, int], book: Any) -> Profile:
    target = book.targets.get(c.kernel.target)
    limits = {k: v.value for k, v in target.limits.items()} if target else {}
    return profile(c.kernel, shape, c.workload.tensors, limits, c.file)


@dataclass
class Priced:
    profile: Profile
    estimate: Estimate
    helps: list[dict]


def price(prof: Profile, params: CostParams, device: Device) -> Priced:
    est = predict(prof, params, device)
    return Priced(prof, est, suggestions(prof, params, device, est))


def us(ns: float) -> str:
    return f"{ns / 1e3:.3g} µs" if ns < 1e6 else f"{ns / 1e6:.3g} ms"


def findings(p: Priced, params: CostParams, device: Device) -> list[Finding]:
    """The estimate as findings: one `report` (time, bottleneck), one `hint` per help."""
    e, b = p.estimate, p.estimate.bottleneck
    line = b.get("line") or 0
    span = Span(line=line, col=1, end_line=line, end_col=1) if line else None
    status = params.calibration
    shape = ", ".join(f"{k}={v}" for k, v in p.profile.shape.items())
    out = [Finding(
        code="CM001", rule=RULE, severity="report", authority="estimate",
        message=f"predicted {us(e.time_ns)} at {shape} on {device.name} "
                f"({e.fraction_of_sol:.0%} of the speed-of-light bound); bound by "
                f"{b['resource']}" + (f" in role {b['role']}, {b['stage']}" if b.get("role")
                                       else "") + f" [{status}]",
        file=p.profile.file, path=b.get("path") or "schedule", span=span,
        role=b.get("role"), resource=b["resource"],
        condition="estimate; never changes a verdict",
        # a finding's `stage` is a pipeline stage index; the model's stage is a segment
        evidence={"time_ns": round(e.time_ns, 1), "sol_ns": round(e.sol_ns, 1),
                  "occupancy": e.occupancy, "waves": e.waves, "segment": b.get("stage")})]
    for h in p.helps[:3]:
        out.append(Finding(
            code="CM002", rule=RULE, severity="hint", authority="estimate",
            message=f"{h['what']}: predicted {us(h['time_ns'])} instead of {us(e.time_ns)}",
            file=p.profile.file, path=b.get("path") or "schedule", span=span,
            role=b.get("role"), resource=b["resource"],
            condition="estimate; never changes a verdict",
            evidence={"kind": h["kind"], "time_ns": round(h["time_ns"], 1),
                      "segment": b.get("stage")}))
    return out


__all__ = ["Candidate", "CostError", "Priced", "findings", "load_candidate", "price",
           "profile_of", "shape_problem", "us"]
