"""Check, then lower: the front half of `cakegov lower`, `cakegov compile` and the GPU runner.

Only a schedule the checker finds `clean` is lowered (DESIGN.md: only `clean` reaches the
GPU). The kernel is lowered with the same effects and target limits the checker's
protocol analysis uses, plus the workload's outputs and size order (the kernel ABI)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cakegov.check.context import CheckContext
from cakegov.check.findings import FileResult
from cakegov.check.rulebook import Rulebook
from cakegov.check.runner import Checker
from cakegov.corpus.workloads import Workload
from cakegov.ir.nodes import Schedule
from cakegov.ir.parse import parse_bytes
from cakegov.lower.derive import lower
from cakegov.lower.kernel import LoweredKernel


@dataclass(frozen=True)
class Prepared:
    """A schedule file after checking: its verdict and, when clean, its lowered kernel."""

    result: FileResult
    schedule: Schedule | None = None
    kernel: LoweredKernel | None = None

    @property
    def clean(self) -> bool:
        return self.kernel is not None


def lower_checked(schedule: Schedule, rulebook: Rulebook, workload: Workload,
                  file: str = "<schedule>") -> LoweredKernel:
    """Lower a schedule (that the checker accepted) with its workload's ABI."""
    target = rulebook.targets.get(schedule.target)
    ctx = CheckContext(schedule, file, target, workload, rulebook.primitives)
    limits = {k: v.value for k, v in target.limits.items()} if target else {}
    return lower(schedule, ctx.effects, workload.tensors, limits,
                 outputs=workload.outputs, size_names=workload.sizes)


def prepare(path: Path, rulebook: Rulebook, workloads: dict[str, Workload], *,
            preview: bool = False) -> Prepared:
    """Check `path`; lower it when the verdict is clean."""
    checker = Checker(rulebook, workloads, preview=preview)
    result = checker.check_path(path)
    if result.verdict != "clean":
        return Prepared(result)
    schedule = parse_bytes(path.read_bytes(), checker.vocabulary)
    kernel = lower_checked(schedule, rulebook, workloads[schedule.workload], str(path))
    return Prepared(result, schedule, kernel)
