"""Judgement: both rulebooks over the corpus, and the flips between them.

Counted findings are those `tests/test_corpus.py` counts: blocking or coverage findings,
as (code, line). Per schedule, with E its labelled (code, line) pairs, B the counted
findings before and A after:
- new catch: a labelled pair in A, not in B;
- lost catch: a labelled pair in B, not in A; or an invalid schedule no longer rejected
  (blocks);
- new false positive: a pair in A, not in B, on a valid schedule or at a place no label
  names (blocks: merged, the corpus test would fail);
- removed false positive: an unlabelled pair in B, not in A;
- changed diagnostic: any other difference in the findings (message, hint, evidence,
  non-blocking findings).
Per-rule confusion counts use the same pairs: TP labelled and found, FP found on a valid
schedule or unlabelled, FN labelled and not found."""

from __future__ import annotations

import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cakegov.check.findings import FileResult, Finding
from cakegov.corpus.labels import blind
from cakegov.govern import changes, evidence
from cakegov.govern.cache import (
    ResultCache,
    default_dir,
    digest_json,
    engine_digest,
    sha256_bytes,
    tree_digest,
)
from cakegov.govern.inputs import Case, Setup
from cakegov.govern.isolate import Job, JobOutput, run_job
from cakegov.govern.models import Flip, FlipItem, GpuInfo, ProposalOptions, RuleFailure
from cakegov.govern.variants import variants

SIDES = ("base", "candidate")


@dataclass
class CaseRun:
    """One side's outcome on one schedule; `result` is None when it could not be judged."""

    result: FileResult | None
    seconds: float | None = None
    rule_seconds: dict[str, float] = field(default_factory=dict)
    failures: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    run_id: str = ""


@dataclass
class Verdicts:
    """What running the rulebooks produced."""

    info: dict[str, dict[str, Any] | None]
    runs: dict[str, dict[str, CaseRun]]
    candidate_error: str | None
    failures: list[RuleFailure]
    quarantined: dict[str, list[str]]
    evidence: dict[str, dict[str, Any]]
    cache: ResultCache
    workers: int
    cached_runs: set[str]
    containment: str | None = None  # what kept the plugins in (isolate.JobOutput)
    # new-catch case -> {"codes", "fired", "total"}: how many renamed variants it still fires on
    generalisation: dict[str, dict[str, Any]] = field(default_factory=dict)


# ---- running -------------------------------------------------------------------------

def _keys(setup: Setup, side: str, case: Case, workloads: str) -> str:
    return digest_json({"v": 1, "engine": engine_digest(), "plugins": setup.hashes[side],
                        "workloads": workloads, "file": case.rel, "sha256": case.sha256})


def _info_key(setup: Setup, side: str) -> str:
    return digest_json({"info": 1, "engine": engine_digest(), "plugins": setup.hashes[side]})


def _run(event: dict[str, Any], declared: dict[str, str] | None = None) -> CaseRun:
    """A worker's result, validated: schema (pydantic), and, with `declared` (the CODE ->
    NAME pairs the side's plugin files declare), every finding must carry the code and
    name of a rule of that rulebook, or be an input error of the engine. A finding that
    claims another rule's code, or a code nobody declares, is dropped and becomes a
    failure of the rule it came from, so it can never count as a catch."""
    raw = event.get("result")
    failures = list(event.get("failures", []))
    result = None
    if raw:
        try:
            result = FileResult.model_validate(raw)
        except ValueError as exc:
            failures.append({"rule": None, "name": "", "file": event.get("file"),
                             "kind": "crash", "where": "",
                             "message": f"the worker's result failed validation: {exc}"[:500]})
    if result is not None and declared is not None:
        kept = []
        for f in result.findings:
            engine_input = f.rule == "input" and f.authority == "input" and \
                f.code.startswith("E")
            if engine_input or declared.get(f.code) == f.rule:
                kept.append(f)
            else:
                failures.append({"rule": None, "name": f.rule, "file": result.file,
                                 "kind": "crash", "where": "",
                                 "message": (f"a finding claims code {f.code} for rule "
                                             f"{f.rule!r}, which this rulebook does not "
                                             "declare: dropped")[:500]})
        if len(kept) != len(result.findings):
            result = result.model_copy(update={"findings": tuple(kept)})
    return CaseRun(result=result,
                   seconds=event.get("seconds"), rule_seconds=event.get("rule_seconds", {}),
                   failures=failures, skipped=event.get("skipped", []),
                   run_id=event.get("run_id", ""))


def judge(setup: Setup, options: ProposalOptions, gpu: GpuInfo, run_id: str) -> Verdicts:
    """Check every case with both rulebooks (cached where both sides come from one run),
    then gather evidence for the flips."""
    cache = ResultCache(default_dir(setup.root), enabled=options.cache)
    wl = tree_digest(setup.workloads, ("*.py",)) if setup.workloads.is_dir() else ""
    runs: dict[str, dict[str, CaseRun]] = {s: {} for s in SIDES}
    need: list[Case] = []
    cached_runs: set[str] = set()
    for case in setup.cases:
        hit = {s: cache.get(_keys(setup, s, case, wl)) for s in SIDES}
        ids = {(h or {}).get("run_id") for h in hit.values()}
        if all(hit.values()) and len(ids) == 1:  # timings must come from one run
            for s in SIDES:
                runs[s][case.rel] = _run(hit[s] or {})
            cached_runs |= {str(i) for i in ids}
        else:
            need.append(case)
    info = {s: cache.get(_info_key(setup, s)) for s in SIDES}
    outputs, workers = _launch(setup, options, need, [s for s in SIDES if info[s] is None])
    failures: list[RuleFailure] = []
    quarantined: dict[str, list[str]] = {}
    errors: dict[str, str | None] = {}
    for side, out in outputs.items():
        errors[side] = out.load_error
        if out.info is not None:
            info[side] = out.info
            cache.put(_info_key(setup, side), out.info)
        quarantined[side] = out.quarantined
        for f in out.failures:
            failures.append(RuleFailure(side=side, **f))  # type: ignore[arg-type]
        declared = changes.declared_rules(setup.rules[side])
        for case in need:
            event = out.results.get(case.rel)
            run = _run(event, declared) if event else CaseRun(result=None)
            run.run_id = run_id
            runs[side][case.rel] = run
            for f in run.failures:
                failures.append(RuleFailure(side=side, **f))  # type: ignore[arg-type]
    if errors.get("base"):
        raise changes.ProposalInputError(
            f"the base rulebook at {setup.base.ref} does not load with this engine: "
            f"{errors['base']}")
    for case in need:
        pair = [runs[s][case.rel] for s in SIDES]
        if all(r.result is not None and not r.failures and not r.skipped for r in pair):
            for s, r in zip(SIDES, pair, strict=True):
                cache.put(_keys(setup, s, case, wl), {
                    "result": r.result.model_dump(mode="json") if r.result else None,
                    "seconds": r.seconds, "rule_seconds": r.rule_seconds,
                    "run_id": run_id})
    verdicts = Verdicts(info=info, runs=runs, candidate_error=errors.get("candidate"),
                        failures=failures, quarantined=quarantined, evidence={},
                        cache=cache, workers=workers, cached_runs=cached_runs,
                        containment=next((o.containment for o in outputs.values()
                                          if o.containment), None))
    if verdicts.candidate_error is None:
        verdicts.generalisation = _generalisation(setup, options, verdicts)
    if verdicts.candidate_error is None:
        verdicts.evidence = evidence.gather(
            _evidence_targets(setup, verdicts, wl), setup.workloads, setup.root, gpu,
            options.jobs, cache, require_sandbox=options.require_sandbox)
    return verdicts


def _generalisation(setup: Setup, options: ProposalOptions, v: Verdicts
                    ) -> dict[str, dict[str, Any]]:
    """For each new catch, check renamed variants of the caught schedule (variants.py) with
    the candidate rulebook, contained like every other run: a rule that recognises the
    file rather than the defect fires on none of them."""
    wanted: dict[str, set[tuple[str, int]]] = {}
    for flip in flips(setup, v):
        items = {(i.code, i.line or 0) for i in flip.items if i.kind == "new_catch" and i.code}
        if items:
            wanted[flip.file] = items
    if not wanted:
        return {}
    key = digest_json({"generalisation": 1, "engine": engine_digest(),
                       "plugins": setup.hashes["candidate"],
                       "cases": sorted((rel, sorted(items), next(
                           (c.sha256 for c in setup.cases if c.rel == rel), ""))
                           for rel, items in wanted.items())})
    hit = v.cache.get(key)
    if hit is not None and isinstance(hit.get("out"), dict):
        return hit["out"]
    out = _run_variants(setup, options, wanted)
    v.cache.put(key, {"out": out})
    return out


def _run_variants(setup: Setup, options: ProposalOptions,
                  wanted: dict[str, set[tuple[str, int]]]) -> dict[str, dict[str, Any]]:
    by_rel = {c.rel: c for c in setup.cases}
    out: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="cakegov-variants-") as tmp:
        cases: list[Case] = []
        owner: dict[str, str] = {}
        for rel, items in sorted(wanted.items()):
            case = by_rel.get(rel)
            text = case.path.read_text(encoding="utf-8", errors="replace") if case else ""
            found = [v.text for v in variants(text) if v.kind == "rename"]  # lines stay
            out[rel] = {"codes": sorted({c for c, _ in items}), "fired": 0,
                        "total": len(found)}
            for k, variant in enumerate(found, 1):
                path = Path(tmp) / f"variant-{len(cases):05d}.cake"
                path.write_text(variant, encoding="utf-8")
                vrel = f"{rel} (variant {k})"
                cases.append(Case(vrel, path, sha256_bytes(variant.encode()), case.labels))
                owner[vrel] = rel
        if not cases:
            return out
        aliases = _blinded(cases, Path(tmp) / "blind")
        job = Job(side="candidate", mode="check", rules=setup.rules["candidate"],
                  workloads=setup.workloads, root=setup.root,
                  files=[(aliases[c.rel][0], str(aliases[c.rel][1])) for c in cases],
                  time_limit_s=options.time_limit_s, memory_limit_mb=options.memory_limit_mb,
                  require_sandbox=options.require_sandbox)
        result = run_job(job)
    back = {alias: rel for rel, (alias, _) in aliases.items()}
    declared = changes.declared_rules(setup.rules["candidate"])
    for alias, event in result.results.items():
        vrel = back.get(alias)
        if vrel is None:
            continue
        run = _run(_unalias(event, back), declared)
        rel = owner[vrel]
        if run.result is not None and wanted[rel] <= counted(run.result):
            out[rel]["fired"] += 1
    return out


def _evidence_targets(setup: Setup, v: Verdicts, wl: str) -> list[evidence.Target]:
    out = []
    for case in setup.cases:
        before, after = v.runs["base"][case.rel].result, v.runs["candidate"][case.rel].result
        if before is None or after is None or not classify(case, before, after):
            continue
        side = evidence.accepting(before, after)
        if side is not None:
            key = digest_json({"evidence": 1, "check": _keys(setup, side, case, wl)})
            out.append(evidence.Target(case.rel, case.path, side, setup.rules[side], key))
    return out


def _launch(setup: Setup, options: ProposalOptions, need: list[Case], info_for: list[str]
            ) -> tuple[dict[str, JobOutput], int]:
    """Run the check jobs (chunks of both sides interleaved, so that each pair of chunks
    runs side by side and their timings share the machine's state) or info jobs."""
    with tempfile.TemporaryDirectory(prefix="cakegov-blind-") as tmp:
        aliases = _blinded(need, Path(tmp))
        merged, n = _launch_blind(setup, options, need, info_for, aliases)
    back = {alias: rel for rel, (alias, _) in aliases.items()}
    for out in merged.values():
        out.results = {back.get(k, k): _unalias(v, back) for k, v in out.results.items()}
        out.failures = [_unalias(f, back) for f in out.failures]
    return merged, n


def _blinded(cases: list[Case], tmp: Path) -> dict[str, tuple[str, Path]]:
    """Plugin code sees each case under a neutral name (`case-00001.cake`: no `valid/` or
    `invalid/` directory, no file name), its comments, labels and docstrings blanked to
    spaces (labels.blind): lines and columns are those of the original."""
    tmp.mkdir(parents=True, exist_ok=True)
    out: dict[str, tuple[str, Path]] = {}
    for i, case in enumerate(sorted(cases, key=lambda c: c.rel), 1):
        alias = f"case-{i:05d}.cake"
        path = tmp / alias
        data = case.path.read_bytes()
        try:
            path.write_text(blind(data.decode("utf-8")), encoding="utf-8")
        except UnicodeDecodeError:  # the parser reports the encoding error itself
            path.write_bytes(data)
        out[case.rel] = (alias, path)
    return out


def _unalias(event: dict[str, Any], back: dict[str, str]) -> dict[str, Any]:
    """A worker's event with the neutral name replaced by the case's corpus path."""
    event = dict(event)
    if event.get("file") in back:
        event["file"] = back[event["file"]]
    result = event.get("result")
    if isinstance(result, dict) and result.get("file") in back:
        rel = back[result["file"]]
        result = {**result, "file": rel}
        if isinstance(result.get("findings"), list):
            result["findings"] = [{**f, "file": rel} if isinstance(f, dict) else f
                                  for f in result["findings"]]
        event["result"] = result
    return event


def _launch_blind(setup: Setup, options: ProposalOptions, need: list[Case],
                  info_for: list[str], aliases: dict[str, tuple[str, Path]]
                  ) -> tuple[dict[str, JobOutput], int]:
    def job(side: str, mode: str, files: list[Case]) -> Job:
        return Job(side=side, mode=mode, rules=setup.rules[side], workloads=setup.workloads,
                   root=setup.root,
                   files=[(aliases[c.rel][0], str(aliases[c.rel][1])) for c in files],
                   time_limit_s=options.time_limit_s, memory_limit_mb=options.memory_limit_mb,
                   require_sandbox=options.require_sandbox)

    tasks: list[Job] = []
    if need:
        by_size = sorted(need, key=lambda c: (-c.path.stat().st_size, c.rel))
        n = max(1, min(options.jobs, len(need)))
        for i in range(n):
            tasks += [job(side, "check", by_size[i::n]) for side in SIDES]
    else:
        tasks = [job(side, "info", []) for side in info_for]
    if not tasks:
        return {}, 0
    with ThreadPoolExecutor(max_workers=max(1, options.jobs)) as pool:
        results = list(pool.map(run_job, tasks))
    merged: dict[str, JobOutput] = {}
    for task, out in zip(tasks, results, strict=True):
        into = merged.setdefault(task.side, JobOutput())
        into.info = into.info or out.info
        into.load_error = into.load_error or out.load_error
        into.containment = into.containment or out.containment
        into.results.update(out.results)
        into.failures += out.failures
        into.quarantined += [q for q in out.quarantined if q not in into.quarantined]
    return merged, len(tasks)


# ---- comparing -----------------------------------------------------------------------

def counted(result: FileResult) -> set[tuple[str, int]]:
    return {(f.code, f.span.line if f.span else 0) for f in result.findings
            if f.severity == "blocking" or f.authority == "coverage"}


def _sig(f: Finding) -> str:
    return f.model_dump_json()


def _first(result: FileResult, code: str, line: int) -> Finding | None:
    return next((f for f in result.findings
                 if f.code == code and (f.span.line if f.span else 0) == line), None)


def classify(case: Case, before: FileResult, after: FileResult) -> list[FlipItem]:
    """The flip items of one schedule (empty when nothing changed)."""
    b, a = counted(before), counted(after)
    expected = set() if case.labels.clean else set(case.labels.expected)
    items: list[FlipItem] = []
    labels = changes.label_text(case.labels)
    for code, line in sorted(expected, key=lambda x: (x[1], x[0])):
        if (code, line) in a - b:
            items.append(FlipItem(kind="new_catch", code=code, line=line,
                                  message=f"{code} now catches the labelled defect at line "
                                          f"{line}"))
        elif (code, line) in b - a:
            items.append(FlipItem(kind="lost_catch", code=code, line=line,
                                  message=f"{code} no longer catches the labelled defect at "
                                          f"line {line}"))
    for code, line in sorted(a - b - expected, key=lambda x: (x[1], x[0])):
        f = _first(after, code, line)
        what = "rejects this valid schedule" if case.labels.clean else (
            f"fires where no label expects it (labels: {labels})")
        items.append(FlipItem(kind="new_false_positive", code=code, line=line,
                              message=f"{code} {what} at line {line}: "
                                      f"{f.message if f else ''}".rstrip(": ")))
    for code, line in sorted(b - a - expected, key=lambda x: (x[1], x[0])):
        items.append(FlipItem(kind="removed_false_positive", code=code, line=line,
                              message=f"{code} no longer fires at unlabelled line {line}"))
    if (not case.labels.clean and before.verdict == "rejected" and after.verdict != "rejected"
            and not any(i.kind == "lost_catch" for i in items)):
        items.append(FlipItem(kind="lost_catch", message=f"no longer rejected (now "
                              f"{after.verdict})"))
    explained = {(i.code, i.line) for i in items}
    old, new = {_sig(f) for f in before.findings}, {_sig(f) for f in after.findings}
    changed = sorted({(f.code, f.span.line if f.span else 0) for f in
                      [*before.findings, *after.findings] if (_sig(f) in old) != (_sig(f) in new)}
                     - explained, key=lambda x: (x[1], x[0]))
    for code, line in changed:
        items.append(FlipItem(kind="changed_diagnostic", code=code, line=line,
                              message=f"{code} at line {line}: the diagnostic changed"))
    if not items and before.verdict != after.verdict:
        items.append(FlipItem(kind="changed_diagnostic",
                              message=f"verdict {before.verdict} -> {after.verdict}"))
    return items


def flips(setup: Setup, v: Verdicts) -> list[Flip]:
    out = []
    for case in setup.cases:
        before, after = v.runs["base"][case.rel].result, v.runs["candidate"][case.rel].result
        if before is None or after is None:
            continue
        items = classify(case, before, after)
        if not items:
            continue
        old, new = {_sig(f) for f in before.findings}, {_sig(f) for f in after.findings}
        out.append(Flip(
            file=case.rel, schedule=after.schedule or before.schedule, valid=case.labels.clean,
            labels=changes.label_text(case.labels), verdict_before=before.verdict,
            verdict_after=after.verdict, kinds=sorted({i.kind for i in items}), items=items,
            new_findings=[f for f in after.findings if _sig(f) not in old],
            removed_findings=[f for f in before.findings if _sig(f) not in new],
            evidence=evidence.evidence_of(case.rel, before, after, v.evidence)))
    return out


