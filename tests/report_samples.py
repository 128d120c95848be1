"""`ProposalResult`s built directly, for the report tests: a clean (eligible) proposal, a
blocked one shaped like the measured case of issue 11 (one changed rule out of 38; 3 valid
schedules newly rejected and 6 invalid ones fired on at unlabelled places, listed together
as "9 new false positives"; a lost catch, a new catch, a changed diagnostic), and an empty
one (no schedule flipped)."""

from __future__ import annotations

from cakegov.check.findings import Finding
from cakegov.govern.models import (
    Blocker,
    Confusion,
    CorpusSummary,
    Cost,
    Evidence,
    EvidenceItem,
    Flip,
    FlipItem,
    GpuInfo,
    Machine,
    MotivatingCheck,
    PluginChange,
    ProposalResult,
    ProposedFile,
    Provenance,
    RuleCost,
    RuleRow,
    RunInfo,
    SourceLinks,
    Timing,
    decision_line,
)
from cakegov.ir.nodes import Span

HEAD = "0123456789abcdef0123456789abcdef01234567"
RULE = ("R010", "smem-bank-conflict")


def finding(code: str, line: int, message: str, file: str) -> Finding:
    return Finding(code=code, rule=RULE[1] if code == RULE[0] else "other",
                   severity="blocking", authority="legality", message=message, file=file,
                   path="roles.loader.body[0]", span=Span(line=line, col=5, end_line=line,
                                                          end_col=12))


def _evidence(sim: str, side: str | None) -> Evidence:
    compiled = EvidenceItem(status="compiled" if side else "not compiled",
                            detail="32 registers, 0 spills" if side else "rejected by both")
    return Evidence(accepted_by=side, simulator=EvidenceItem(status=sim, detail="8 runs"),  # type: ignore[arg-type]
                    compile=compiled, gpu=EvidenceItem(status="not measured",
                                                       detail="--gpu off"))


def flip(file: str, kind: str, valid: bool, before: str, after: str, line: int = 12,
         sim: str = "runs correctly", message: str = "bank conflict on `a_smem`") -> Flip:
    code = RULE[0]
    new = [finding(code, line, message, file)] if kind != "lost_catch" else []
    removed = [finding(code, line, message, file)] if kind == "lost_catch" else []
    if kind == "changed_diagnostic":
        removed = [finding(code, line, "old words", file)]
    text = {"new_false_positive": f"{code} rejects this valid schedule at line {line}"
            if valid else f"{code} fires where no label expects it (labels: R001@3)",
            "new_catch": f"{code} now catches the labelled defect at line {line}",
            "lost_catch": f"{code} no longer catches the labelled defect at line {line}",
            "changed_diagnostic": f"{code} at line {line}: the diagnostic changed"}[kind]
    side = "base" if before == "clean" else "candidate" if after == "clean" else None
    return Flip(file=file, schedule=file.rsplit("/", 1)[-1].removesuffix(".cake"),
                valid=valid, labels="clean" if valid else f"{code}@{line}",
                verdict_before=before, verdict_after=after, kinds=[kind],  # type: ignore[list-item]
                items=[FlipItem(kind=kind, code=code, line=line, message=text)],  # type: ignore[arg-type]
                new_findings=new, removed_findings=removed, evidence=_evidence(sim, side))


def _rules(changed: bool) -> list[RuleRow]:
    rows = []
    for i in range(38):
        code = f"R{i:03d}"
        if code == RULE[0]:
            rows.append(RuleRow(code=code, name=RULE[1], change="changed" if changed
                                else "unchanged", version_before="0.1.0",
                                version_after="0.2.0" if changed else "0.1.0",
                                status_before="stable", status_after="stable",
                                before=Confusion(tp=2, fp=0, fn=1),
                                after=Confusion(tp=2, fp=9, fn=1) if changed
                                else Confusion(tp=2, fp=0, fn=1)))
        else:
            rows.append(RuleRow(code=code, name=f"rule-{i}", change="unchanged",
                                version_before="1.0.0", version_after="1.0.0",
                                status_before="stable", status_after="stable",
                                before=Confusion(tp=1), after=Confusion(tp=1)))
    order = {"changed": 0, "unchanged": 1}
    return sorted(rows, key=lambda r: (order[r.change], r.code))


def result(kind: str, links: bool = False) -> ProposalResult:
    """`kind`: "eligible", "blocked" or "empty"."""
    if kind == "blocked":
        flips = [flip(f"corpus/valid/gemm/valid_{i}.cake", "new_false_positive", True,
                      "clean", "rejected", sim="confirmed legal") for i in range(3)]
        flips += [flip(f"corpus/invalid/gemm/other_{i}.cake", "new_false_positive", False,
                       "rejected", "rejected") for i in range(6)]
        flips += [flip("corpus/invalid/gemm/lost.cake", "lost_catch", False, "rejected",
                       "clean"),
                  flip("corpus/invalid/gemm/caught.cake", "new_catch", False, "clean",
                       "rejected", sim="confirmed"),
                  flip("corpus/invalid/gemm/reworded.cake", "changed_diagnostic", False,
                       "rejected", "rejected", sim="not simulated")]
        blockers = [
            Blocker(kind="new-false-positive", rule=RULE[0],
                    files=[f.file for f in flips[:9]],
                    message=f"{RULE[0]} {RULE[1]} newly fires where no label expects it on 9 "
                    "schedule(s), 3 of them valid: valid, newly rejected (3): "
                    + ", ".join(f.file for f in flips[:3]) + "; invalid, at an unlabelled "
                    "place (6): " + ", ".join(f.file for f in flips[3:9])),
            Blocker(kind="lost-catch", rule=RULE[0], files=["corpus/invalid/gemm/lost.cake"],
                    message=f"{RULE[0]} {RULE[1]} no longer catches 1 labelled defect(s): "
                    "corpus/invalid/gemm/lost.cake")]
        verdict, code = "blocked", 1
    elif kind == "eligible":
        flips = [flip("corpus/invalid/gemm/caught.cake", "new_catch", False, "clean",
                      "rejected", sim="confirmed")]
        blockers, verdict, code = [], "eligible", 0
    else:
        flips, blockers, verdict, code = [], [], "eligible", 0
    changed = kind != "empty"
    p = Provenance(
        base_ref="origin/main", base_how="merge base", base_commit="f" * 40, head_commit=HEAD,
        working_tree_dirty=False, engine_version="0.1.0", engine_digest="e" * 64,
        verifier_before="b" * 64, verifier_after="a" * 64, corpus_digest="c" * 64,
        machine=Machine(system="Linux", machine="x86_64", python="3.11", cpus=2,
                        cpu_model="test cpu", hostname="host"),
        gpu=GpuInfo(mode="off", present=False, detail="not probed (--gpu off)"),
        links=SourceLinks(server_url="https://github.com", repository="cake/gov", sha=HEAD)
        if links else None)
    summary = decision_line(verdict, flips, len(blockers))
    return ProposalResult(
        verdict=verdict, exit_code=code, summary=summary, mode="files",  # type: ignore[arg-type]
        options={"time_limit_s": 10.0, "memory_limit_mb": 4096, "containment": "test"},
        proposed=[ProposedFile(source="smem-bank-conflict.py",
                               placed_at="rules/checks/smem-bank-conflict.py", kind="check",
                               sha256="d" * 64)] if changed else [],
        plugin_changes=[PluginChange(relpath="checks/smem-bank-conflict.py", kind="check",
                                     change="changed", version_before="0.1.0",
                                     version_after="0.2.0", sha256_before="1" * 64,
                                     sha256_after="2" * 64)] if changed else [],
        contract_changes=[],
        corpus=CorpusSummary(dirs=["corpus"], valid=40, invalid=53),
        rules=_rules(changed), flips=flips, failures=[],
        motivating=[MotivatingCheck(rule=RULE[0], file="corpus/invalid/gemm/caught.cake",
                                    status="caught")] if changed else [],
        blockers=blockers, notes=["a note"],
        provenance=p,
        timing=Timing(cost=Cost(schedules=93, median_before_ms=1.0, median_after_ms=1.1,
                                p95_before_ms=2.0, p95_after_ms=2.1, ratio=1.1, judged=True,
                                rules=[RuleCost(code=RULE[0], total_ms=9.3, median_ms=0.1)]
                                if changed else []),
                      run=RunInfo(run_id="r" * 32, started_at="2025-01-01T00:00:00Z",
                                  finished_at="2025-01-01T00:00:05Z", wall_s=5.0, jobs=2,
                                  cache_hits=0, cache_misses=93, workers=2)))
