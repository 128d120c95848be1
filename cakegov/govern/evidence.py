"""Dynamic evidence for flipped schedules: simulator, compile, GPU run.

Every schedule whose verdict or counted findings flipped is simulated (cakegov/sim: the
lowered kernel executed with the PTX barrier semantics and numpy numerics, under several
strategies, seeds and shapes), whatever either rulebook says of it: the simulator is the
oracle that grounds the labels. A schedule that one rulebook accepts is also lowered and
compiled with that rulebook, and run on a GPU when `--gpu` allows it and a device exists.
All of it happens in a contained worker (the candidate's primitives are plugin code), on
a blinded copy of the schedule. A component that does not exist is reported as "not
available" / "not measured", never pretended. Simulator and compile results are cached
(both are functions of their inputs); GPU runs never are.

The simulator's outcome is read against the flip (`simulator_item`):
- a new catch the simulator reproduces is *confirmed*; one it runs correctly under every
  strategy is *unconfirmed*;
- a newly rejected valid schedule that simulates correctly is *confirmed legal*;
- a defect the simulator reproduces in a schedule labelled valid says the label looks
  wrong; so does a newly rejected invalid schedule that simulates correctly (a blocker,
  cakegov/govern/verdict.py)."""

from __future__ import annotations

import tempfile
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cakegov.check.findings import FileResult
from cakegov.corpus.labels import blind
from cakegov.govern.cache import ResultCache
from cakegov.govern.isolate import Job, run_job
from cakegov.govern.models import Evidence, EvidenceItem, FlipItem, GpuInfo

EVIDENCE_LIMIT_S = 180.0
GPU_EVIDENCE_LIMIT_S = 600.0
# what the simulator says of a schedule (cakegov/sim/state.py)
SIM_CORRECT, SIM_DEFECT = "correct", "defect"
# the statuses a flip's simulator evidence can have, read against the flip
CONFIRMED, UNCONFIRMED, CONFIRMED_LEGAL = "confirmed", "unconfirmed", "confirmed legal"
DEFECT_REPRODUCED, RUNS_CORRECTLY = "defect reproduced", "runs correctly"


def simulator_item(sim: dict[str, Any] | None, items: list[FlipItem], valid: bool
                   ) -> EvidenceItem:
    """The simulator's outcome on one flipped schedule, in the terms of its flip."""
    if sim is None:
        return EvidenceItem(status="not simulated",
                            detail="only a changed diagnostic: nothing to ground")
    status, detail = str(sim.get("status", "error")), str(sim.get("detail", ""))[:2000]
    kinds = {i.kind for i in items}
    if status == SIM_DEFECT:
        if "new_catch" in kinds:
            return EvidenceItem(status=CONFIRMED, detail=detail)
        if valid:
            return EvidenceItem(status=DEFECT_REPRODUCED, detail="the simulator reproduces "
                                f"a defect in this schedule labelled valid, so the label "
                                f"looks wrong: {detail}")
        return EvidenceItem(status=DEFECT_REPRODUCED, detail=detail)
    if status == SIM_CORRECT:
        if "new_catch" in kinds:
            return EvidenceItem(status=UNCONFIRMED, detail=f"the simulator runs it "
                                f"correctly under every strategy: {detail}")
        if valid and "new_false_positive" in kinds:
            return EvidenceItem(status=CONFIRMED_LEGAL, detail=detail)
        return EvidenceItem(status=RUNS_CORRECTLY, detail=detail)
    return EvidenceItem(status=status, detail=detail)


def accepting(before: FileResult, after: FileResult) -> str | None:
    if before.verdict == "clean":
        return "base"
    if after.verdict == "clean":
        return "candidate"
    return None


def evidence_of(rel: str, before: FileResult, after: FileResult,
                gathered: dict[str, dict[str, Any]], items: list[FlipItem],
                valid: bool = False) -> Evidence:
    side = accepting(before, after)
    got = gathered.get(rel)
    targeted = any(i.kind != "changed_diagnostic" for i in items)
    if got is None and targeted:
        missing = EvidenceItem(status="error", detail="the evidence worker gave no answer")
        return Evidence(accepted_by=side, simulator=missing, compile=missing,  # type: ignore[arg-type]
                        gpu=missing)
    simulator = simulator_item(got.get("simulator") if got else None, items, valid)
    if side is None:
        none = EvidenceItem(status="not compiled", detail="rejected by both rulebooks: "
                            "only a clean schedule is lowered")
        return Evidence(simulator=simulator, compile=none,
                        gpu=EvidenceItem(status="not measured", detail="not compiled"))
    if got is None or "compile" not in got:
        missing = EvidenceItem(status="not compiled", detail="only a changed diagnostic")
        return Evidence(accepted_by=side, simulator=simulator, compile=missing,  # type: ignore[arg-type]
                        gpu=EvidenceItem(status="not measured", detail="not compiled"))
    return Evidence(accepted_by=side, simulator=simulator,  # type: ignore[arg-type]
                    compile=EvidenceItem(**got["compile"]), gpu=EvidenceItem(**got["gpu"]))


@dataclass(frozen=True)
class Target:
    """A flipped schedule to gather evidence for: the rulebook that simulates it (the one
    that accepts it, else the base's), and whether that rulebook accepts it (then it is
    also compiled)."""

    rel: str
    path: Path
    side: str
    rules: Path
    cache_key: str
    compile: bool = True


def gather(targets: list[Target], workloads: Path, root: Path, gpu: GpuInfo, jobs: int,
           cache: ResultCache, require_sandbox: bool = False) -> dict[str, dict[str, Any]]:
    """Simulate every target, and compile (and, when allowed and possible, run) each one
    its rulebook accepts. Simulator and compile results are cached; GPU runs never are."""
    run_gpu = gpu.present and gpu.mode != "off"
    why = gpu.detail if not gpu.present else ""
    todo: dict[tuple[str, Path], list[Target]] = defaultdict(list)
    out: dict[str, dict[str, Any]] = {}
    keys = {t.rel: t.cache_key for t in targets}
    for target in targets:
        hit = None if (run_gpu and target.compile) else cache.get(target.cache_key)
        if hit is not None and "simulator" in hit:
            out[target.rel] = {"simulator": hit["simulator"]}
            if target.compile:
                out[target.rel] |= {"compile": hit["compile"],
                                    "gpu": {"status": "not measured", "detail": why}}
        else:
            todo[(target.side, target.rules)].append(target)
    if not todo:
        return out
    with tempfile.TemporaryDirectory(prefix="cakegov-evidence-") as tmp:
        work, aliases = [], {}
        for (side, rules), group in sorted(todo.items()):
            files = []
            for t in group:  # plugin code sees a blinded copy under a neutral name
                alias = f"case-{len(aliases) + 1:05d}.cake"
                path = Path(tmp) / alias
                data = t.path.read_bytes()
                try:
                    path.write_text(blind(data.decode("utf-8")), encoding="utf-8")
                except UnicodeDecodeError:
                    path.write_bytes(data)
                aliases[alias] = t
                files.append((alias, str(path)))
            work.append(Job(side=side, mode="evidence", rules=rules, workloads=workloads,
                            root=root, files=files,
                            gpu={"run": run_gpu, "why": why,
                                 "compile": [a for a, _ in files if aliases[a].compile]},
                            step_limit_s=GPU_EVIDENCE_LIMIT_S if run_gpu
                            else EVIDENCE_LIMIT_S, require_sandbox=require_sandbox))
        with ThreadPoolExecutor(max_workers=max(1, min(jobs, len(work)))) as pool:
            results = list(pool.map(run_job, work))
    for job, res in zip(work, results, strict=True):
        for alias, _ in job.files:
            target = aliases[alias]
            event = res.results.get(alias)
            if event is None:
                why_not = res.load_error or next(
                    (f["message"] for f in res.failures if f.get("file") == alias),
                    "no answer")
                item = {"status": "error", "detail": why_not}
                out[target.rel] = {"simulator": item, "compile": item, "gpu": item}
                continue
            got = {"simulator": _item(event.get("simulator"))}
            if target.compile:
                got |= {"compile": _item(event.get("compile")), "gpu": _item(event.get("gpu"))}
            out[target.rel] = got
            compiled = not target.compile or got["compile"]["status"] in (
                "compiled", "compile error", "not compiled")
            if compiled and got["simulator"]["status"] != "error":
                cache.put(keys[target.rel], {k: v for k, v in got.items() if k != "gpu"})
    return out


def _item(raw: Any) -> dict[str, str]:
    """A worker's evidence item, as data: a status and a detail, both bounded strings."""
    if not isinstance(raw, dict):
        return {"status": "error", "detail": "the evidence worker sent no such item"}
    return {"status": str(raw.get("status", "error"))[:40],
            "detail": str(raw.get("detail", ""))[:2000]}
