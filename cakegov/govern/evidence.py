"""Dynamic evidence for flipped schedules: simulator, compile, GPU run.

Each flipped schedule is lowered and compiled with the rulebook that accepts it (only a
clean schedule is lowered), in a worker process: the candidate's primitives are plugin
code too. A GPU run happens only when `--gpu` allows it and a device exists; a component
that does not exist is reported as "not available" / "not measured", never pretended.
Compile results are cached; GPU runs never are."""

from __future__ import annotations

import importlib.util
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cakegov.check.findings import FileResult
from cakegov.govern.cache import ResultCache
from cakegov.govern.isolate import Job, run_job
from cakegov.govern.models import Evidence, EvidenceItem, GpuInfo

EVIDENCE_LIMIT_S = 180.0
GPU_EVIDENCE_LIMIT_S = 600.0


def _simulator() -> EvidenceItem:
    if importlib.util.find_spec("cakegov.sim") is None:
        return EvidenceItem(status="not available",
                            detail="no CPU simulator exists in this engine yet (cakegov/sim)")
    return EvidenceItem(status="not available",
                        detail="cakegov.sim exists but propose-rule does not drive it yet")


def accepting(before: FileResult, after: FileResult) -> str | None:
    if before.verdict == "clean":
        return "base"
    if after.verdict == "clean":
        return "candidate"
    return None


def evidence_of(rel: str, before: FileResult, after: FileResult,
                 gathered: dict[str, dict[str, Any]]) -> Evidence:
    side = accepting(before, after)
    got = gathered.get(rel)
    if side is None:
        none = EvidenceItem(status="not compiled", detail="rejected by both rulebooks: "
                            "only a clean schedule is lowered")
        return Evidence(simulator=_simulator(), compile=none,
                        gpu=EvidenceItem(status="not measured", detail="not compiled"))
    if got is None:
        missing = EvidenceItem(status="error", detail="the evidence worker gave no answer")
        return Evidence(accepted_by=side, simulator=_simulator(), compile=missing, gpu=missing)
    return Evidence(accepted_by=side, simulator=_simulator(),  # type: ignore[arg-type]
                    compile=EvidenceItem(**got["compile"]), gpu=EvidenceItem(**got["gpu"]))


@dataclass(frozen=True)
class Target:
    """A flipped schedule to gather evidence for, with the rulebook that accepts it."""

    rel: str
    path: Path
    side: str
    rules: Path
    cache_key: str


def gather(targets: list[Target], workloads: Path, root: Path, gpu: GpuInfo, jobs: int,
           cache: ResultCache, require_sandbox: bool = False) -> dict[str, dict[str, Any]]:
    """Compile (and, when allowed and possible, run) each target with the rulebook that
    accepts it. Compile results are cached; GPU runs never are."""
    run_gpu = gpu.present and gpu.mode != "off"
    why = gpu.detail if not gpu.present else ""
    todo: dict[tuple[str, Path], list[Target]] = defaultdict(list)
    out: dict[str, dict[str, Any]] = {}
    keys = {t.rel: t.cache_key for t in targets}
    for target in targets:
        hit = None if run_gpu else cache.get(target.cache_key)
        if hit is not None:
            out[target.rel] = {"compile": hit["compile"],
                               "gpu": {"status": "not measured", "detail": why}}
        else:
            todo[(target.side, target.rules)].append(target)
    work = [Job(side=side, mode="evidence", rules=rules, workloads=workloads, root=root,
                files=[(t.rel, str(t.path)) for t in group], gpu={"run": run_gpu, "why": why},
                step_limit_s=GPU_EVIDENCE_LIMIT_S if run_gpu else EVIDENCE_LIMIT_S,
                require_sandbox=require_sandbox)
            for (side, rules), group in sorted(todo.items())]
    if not work:
        return out
    with ThreadPoolExecutor(max_workers=max(1, min(jobs, len(work)))) as pool:
        results = list(pool.map(run_job, work))
    for job, res in zip(work, results, strict=True):
        for rel, _ in job.files:
            event = res.results.get(rel)
            if event is None:
                why_not = res.load_error or next(
                    (f["message"] for f in res.failures if f.get("file") == rel), "no answer")
                item = {"status": "error", "detail": why_not}
                out[rel] = {"compile": item, "gpu": item}
                continue
            out[rel] = {"compile": event["compile"], "gpu": event["gpu"]}
            if event["compile"]["status"] in ("compiled", "compile error", "not compiled"):
                cache.put(keys[rel], {"compile": event["compile"]})
    return out
