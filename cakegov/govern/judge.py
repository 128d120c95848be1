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

from cakegov.check.context import MAX_RULE_CALLS
from cakegov.check.findings import FileResult, Finding
from cakegov.check.repair import apply_edits
from cakegov.corpus.labels import blind
from cakegov.govern import changes, evidence, trusted
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
from cakegov.govern.variants import KINDS, variants
from cakegov.progress import Bar

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
    # candidate side (trusted.py): "trusted" when recomputed without proposed code,
    # "proposed" when only the contained candidate run could compute it
    source: str = trusted.TRUSTED
    capped: dict[str, int] = field(default_factory=dict)  # code -> findings dropped


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
    # new-catch case -> {"codes", "fired", "total", "dropped", "kinds", "fixed"}: on how
    # many semantics-preserving variants (per kind) and trusted fixed variants it fires
    # (judge._run_variants)
    generalisation: dict[str, dict[str, Any]] = field(default_factory=dict)
    # case -> why the contained candidate run disagrees with the trusted recomputation
    divergent: dict[str, list[str]] = field(default_factory=dict)
    # side -> where its worker's description of the rulebook disagrees with the files
    # (changes.description_problems); the description used is the files'
    misdescribed: dict[str, list[str]] = field(default_factory=dict)


# ---- running -------------------------------------------------------------------------

def _trust_descriptions(setup: Setup, info: dict[str, Any]) -> dict[str, list[str]]:
    """Replace what each worker said about its rulebook (computed by code that proposed
    plugins can patch) by what the files say: plugin entries, verifier digest and every
    rule's literal metadata. Returns, per side, where the two disagreed (a blocker)."""
    out: dict[str, list[str]] = {}
    for side in SIDES:
        claimed = info.get(side)
        if claimed is None:
            continue
        truth = changes.trusted_description(setup.rules[side], setup.hashes[side])
        if not isinstance(claimed, dict):
            claimed = {}
        problems = changes.description_problems(claimed, truth)
        if problems:
            out[side] = problems
        rules = []
        listed = claimed.get("rules", ())
        for rule in listed if isinstance(listed, list) else ():
            literal = truth["rules"].get(str(rule.get("relpath", ""))) \
                if isinstance(rule, dict) else None
            if literal is not None:
                rules.append({**rule, **{k: v for k, v in literal.items() if v is not None}})
        info[side] = {**claimed, "digest": truth["digest"], "entries": truth["entries"],
                      "rules": rules}
    return out


def _keys(setup: Setup, side: str, case: Case, workloads: str) -> str:
    return digest_json({"v": 1, "engine": engine_digest(), "plugins": setup.hashes[side],
                        "workloads": workloads, "file": case.rel, "sha256": case.sha256})


def _info_key(setup: Setup, side: str) -> str:
    return digest_json({"info": 1, "engine": engine_digest(), "plugins": setup.hashes[side]})


def _span_problem(span: Any) -> str | None:
    """Why a finding's span is not a source range (1-based lines and columns, the end not
    before the start), or None: such a span would break the SARIF and the line links."""
    if span is None:
        return None
    if span.line < 1 or span.col < 1 or span.end_line < span.line or span.end_col < 1 or (
            span.end_line == span.line and span.end_col < span.col):
        return (f"line {span.line}, column {span.col} to line {span.end_line}, column "
                f"{span.end_col}, which is not a source range")
    return None


# Bounds on what one rule may put into a proposal's reports and ledger record (issue 43):
# findings of one rule on one schedule beyond FINDINGS_PER_RULE are dropped (the earliest
# in the file kept) and counted; each text field of a finding is cut at TEXT_CAP characters.
FINDINGS_PER_RULE = 20
TEXT_CAP = 1000
_TEXT_FIELDS = ("message", "hint", "condition")


def _cut(text: str | None) -> str | None:
    if text is None or len(text) <= TEXT_CAP:
        return text
    return text[:TEXT_CAP] + f" [cut: {len(text) - TEXT_CAP} more characters]"


def cap_findings(result: FileResult) -> tuple[FileResult, dict[str, int]]:
    """`result` with at most FINDINGS_PER_RULE findings per code (the first by position)
    and every text field cut at TEXT_CAP, and per code how many findings were dropped."""
    by_code: dict[str, list[Finding]] = {}
    for f in result.findings:
        by_code.setdefault(f.code, []).append(f)
    dropped = {code: len(fs) - FINDINGS_PER_RULE for code, fs in by_code.items()
               if len(fs) > FINDINGS_PER_RULE}
    long = any(len(getattr(f, k) or "") > TEXT_CAP for f in result.findings
               for k in _TEXT_FIELDS)
    if not dropped and not long:
        return result, {}
    keep: set[int] = set()
    for fs in by_code.values():
        ordered = sorted(fs, key=lambda f: ((f.span.line, f.span.col) if f.span else (0, 0)))
        keep |= {id(f) for f in ordered[:FINDINGS_PER_RULE]}
    findings = tuple(f.model_copy(update={k: _cut(getattr(f, k)) for k in _TEXT_FIELDS})
                     for f in result.findings if id(f) in keep)
    return result.model_copy(update={"findings": findings}), dropped


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
            bad_span = _span_problem(f.span)
            if bad_span is not None:
                failures.append({"rule": None, "name": f.rule, "file": result.file,
                                 "kind": "crash", "where": "",
                                 "message": (f"a finding of {f.code} points at {bad_span}: "
                                             "dropped")[:500]})
            elif engine_input or declared.get(f.code) == f.rule:
                kept.append(f)
            else:
                failures.append({"rule": None, "name": f.rule, "file": result.file,
                                 "kind": "crash", "where": "",
                                 "message": (f"a finding claims code {f.code} for rule "
                                             f"{f.rule!r}, which this rulebook does not "
                                             "declare: dropped")[:500]})
        if len(kept) != len(result.findings):
            result = result.model_copy(update={"findings": tuple(kept)})
    capped: dict[str, int] = {}
    if result is not None:
        result, capped = cap_findings(result)
    return CaseRun(result=result, capped=capped,
                   seconds=event.get("seconds"), rule_seconds=event.get("rule_seconds", {}),
                   failures=failures, skipped=event.get("skipped", []),
                   run_id=event.get("run_id", ""),
                   source=trusted.PROPOSED if event.get("source") == trusted.PROPOSED
                   else trusted.TRUSTED)


def judge(setup: Setup, options: ProposalOptions, gpu: GpuInfo, run_id: str,
          bar: Bar | None = None) -> Verdicts:
    """Check every case with both rulebooks (cached where both sides come from one run),
    then gather evidence for the flips. `bar` shows the check jobs' progress."""
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
    outputs, workers = _launch(setup, options, need, [s for s in SIDES if info[s] is None],
                               bar)
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
    misdescribed = _trust_descriptions(setup, info)
    divergent: dict[str, list[str]] = {}
    if need and errors.get("candidate") is None and "candidate" in outputs:
        divergent = _recompute(setup, options, need, outputs["candidate"], runs["candidate"],
                               outputs.get("base"), runs["base"], info.get("base"))
    for case in need:
        pair = [runs[s][case.rel] for s in SIDES]
        if case.rel not in divergent and all(
                r.result is not None and not r.failures and not r.skipped for r in pair):
            for s, r in zip(SIDES, pair, strict=True):
                cache.put(_keys(setup, s, case, wl), {
                    "result": r.result.model_dump(mode="json") if r.result else None,
                    "seconds": r.seconds, "rule_seconds": r.rule_seconds,
                    "run_id": run_id, "source": r.source})
    verdicts = Verdicts(info=info, runs=runs, candidate_error=errors.get("candidate"),
                        failures=failures, quarantined=quarantined, evidence={},
                        cache=cache, workers=workers, cached_runs=cached_runs,
                        containment=next((o.containment for o in outputs.values()
                                          if o.containment), None), divergent=divergent,
                        misdescribed=misdescribed)
    if verdicts.candidate_error is None:
        verdicts.generalisation = _generalisation(setup, options, verdicts)
    if verdicts.candidate_error is None:
        verdicts.evidence = evidence.gather(
            _evidence_targets(setup, verdicts, wl), setup.workloads, setup.root, gpu,
            options.jobs, cache, require_sandbox=options.require_sandbox)
    return verdicts


def _added_rules_only(setup: Setup, plan: trusted.Plan) -> bool:
    """Does the proposal only add rule plugins (no plugin changed or removed, no primitive,
    target or cost file proposed)? Then the trusted rulebook is the base's plus the
    stand-ins, and a stand-in that yields nothing leaves the base's run as it was."""
    base, cand = setup.hashes["base"], setup.hashes["candidate"]
    return bool(plan.stubs) and set(base) <= set(cand) and all(
        rel.startswith("checks/") and rel not in base for rel in plan.proposed) and \
        len(plan.stubs) == len(plan.proposed)


def _silent_replay(event: dict[str, Any], base_event: dict[str, Any] | None,
                   base_run: CaseRun | None, plan: trusted.Plan,
                   base_info: dict[str, Any] | None) -> bool:
    """Is the trusted recomputation of this schedule the base's run? When the proposal only
    adds rules (`_added_rules_only`), the trusted run is the base rulebook with a stand-in
    per added rule that replays, call by call, what the rule yielded. If every recorded
    call yielded nothing, the stand-ins only ever yield nothing, and a rule that yields
    nothing changes nothing the engine does (a rule speaks to the engine through its
    findings alone: that is what the stand-ins assume), so the trusted run is exactly the
    base's run, already computed by trusted code. The recorded number of calls must also
    be the number the engine made in the base run to each base rule it calls at the same
    points (same phase, protocol or not): fewer or more means the engine took another path
    with proposed code loaded, and the schedule is recomputed in full."""
    if base_event is None or base_run is None or base_run.result is None or \
            base_run.failures or base_run.skipped:
        return False
    counts = base_event.get("counts")
    calls = event.get("calls")
    if not isinstance(counts, dict) or not isinstance(calls, dict):
        return False
    rules = [r for r in (base_info or {}).get("rules") or [] if isinstance(r, dict)]
    for stub in plan.stubs:
        recorded = calls.get(stub["code"])
        if not isinstance(recorded, list) or any(call != [] for call in recorded):
            return False
        group = (stub["phase"], stub["category"] == "protocol")
        peers = [r.get("code") for r in rules
                 if (r.get("phase"), r.get("category") == "protocol") == group
                 and r.get("status") in ("stable", "preview")]
        if not peers or any(counts.get(code) != len(recorded) for code in peers):
            return False
    return True


def _recompute(setup: Setup, options: ProposalOptions, need: list[Case],
               candidate: JobOutput, runs: dict[str, CaseRun],
               base: JobOutput | None = None, base_runs: dict[str, CaseRun] | None = None,
               base_info: dict[str, Any] | None = None) -> dict[str, list[str]]:
    """Replace each candidate result by its trusted recomputation (trusted.py) and return,
    per case, how the contained candidate run disagreed with it. Where the proposal only
    adds rules and they yielded nothing on a schedule (`_silent_replay`), the trusted
    recomputation is the base's run, which trusted code already made: it is not run again
    (on the bundled example, all but one schedule; the recomputation took 70 s)."""
    declared = changes.declared_rules(setup.rules["candidate"])
    with tempfile.TemporaryDirectory(prefix="cakegov-trusted-") as tmp:
        plan = trusted.prepare(setup.rules["base"], setup.hashes, candidate.info, Path(tmp))
        if plan is None:
            return {}
        todo = [c for c in need if runs[c.rel].result is not None]
        known: dict[str, CaseRun] = {}
        if base is not None and base_runs is not None and _added_rules_only(setup, plan):
            for c in todo:
                if _silent_replay(candidate.results.get(c.rel, {}), base.results.get(c.rel),
                                  base_runs.get(c.rel), plan, base_info):
                    known[c.rel] = base_runs[c.rel]
            todo = [c for c in todo if c.rel not in known]
        aliases = _blinded(todo, Path(tmp) / "blind")
        replay = {aliases[c.rel][0]: _replay_data(candidate.results.get(c.rel, {}),
                                                  plan.stubs, aliases[c.rel][0])
                  for c in todo}
        n = max(1, min(options.jobs, len(todo)))
        by_size = sorted(todo, key=lambda c: (-c.path.stat().st_size, c.rel))
        jobs = [Job(side="candidate", mode="check", rules=plan.rules,
                    workloads=setup.workloads, root=setup.root,
                    files=[(aliases[c.rel][0], str(aliases[c.rel][1])) for c in chunk],
                    time_limit_s=options.time_limit_s,
                    memory_limit_mb=options.memory_limit_mb,
                    require_sandbox=options.require_sandbox,
                    replay={"stubs": plan.stubs, "excluded_targets": plan.targets,
                            "excluded_primitives": plan.primitives,
                            "replay": {aliases[c.rel][0]: replay[aliases[c.rel][0]]
                                       for c in chunk}})
                for chunk in (by_size[i::n] for i in range(n)) if chunk]
        with ThreadPoolExecutor(max_workers=n) as pool:
            outs = list(pool.map(run_job, jobs))
    back = {alias: rel for rel, (alias, _) in aliases.items()}
    events: dict[str, dict[str, Any]] = {}
    for out in outs:
        if out.load_error:
            raise changes.ProposalInputError(
                f"the trusted rulebook (the base's copies of the plugins the proposal keeps) "
                f"does not load: {out.load_error}")
        for alias, event in out.results.items():
            if alias in back:
                events[back[alias]] = _unalias(event, back)
    divergent: dict[str, list[str]] = {}
    for case in todo:
        contained, event = runs[case.rel], events.get(case.rel)
        if event is None:
            divergent[case.rel] = ["the trusted recomputation gave no result"]
            continue
        mine = _run(event, declared)
        why = _needs_proposed(event, mine, contained)
        if why:
            contained.source = trusted.PROPOSED
            continue
        reasons = list(event.get("divergence") or []) + _differences(contained, mine)
        if reasons:
            divergent[case.rel] = reasons[:10]
        assert contained.result is not None and mine.result is not None
        contained.result = mine.result  # the trusted one counts; timings stay paired
        contained.failures += mine.failures
    for rel, base_run in known.items():  # the base's run is the trusted recomputation
        contained = runs[rel]
        reasons = _differences(contained, base_run)
        if reasons:
            divergent[rel] = reasons[:10]
        contained.result = base_run.result
    return divergent


def _replay_data(event: dict[str, Any], stubs: list[dict[str, Any]], alias: str
                 ) -> dict[str, list[list[dict[str, Any]]]]:
    """The recorded calls of the proposed rules on one schedule, validated: each finding
    must parse and speak in its own rule's code and name (others are dropped, as the
    contained run's result dropped them)."""
    calls = event.get("calls") if isinstance(event.get("calls"), dict) else {}
    out: dict[str, list[list[dict[str, Any]]]] = {}
    for stub in stubs:
        raw = calls.get(stub["code"])
        if not isinstance(raw, list):
            continue
        kept: list[list[dict[str, Any]]] = []
        # every call the engine can make (a fixed 64 here cut the replay of a schedule
        # whose repair search re-checks 72 edited sources, and the trusted run, making
        # call 65 with no data for it, blocked an honest proposal as divergent)
        for call in raw[:MAX_RULE_CALLS]:
            found = []
            for item in call if isinstance(call, list) else []:
                try:
                    f = Finding.model_validate(item)
                except ValueError:
                    continue
                if (f.code, f.rule) == (stub["code"], stub["name"]):
                    found.append({**f.model_dump(mode="json"), "file": alias})
            kept.append(found)
        out[stub["code"]] = kept
    return out


def _needs_proposed(event: dict[str, Any], mine: CaseRun, contained: CaseRun) -> str:
    """Why this schedule's result can only come from proposed code ("" when it can not)."""
    if event.get("uses_proposed"):
        return str(event["uses_proposed"])[:200]
    t, c = mine.result, contained.result
    if t is not None and c is not None and t.verdict == "error" and c.verdict != "error" \
            and any(f.authority == "input" for f in t.findings):
        return "it parses only with a proposed plugin"
    return ""


def _differences(contained: CaseRun, mine: CaseRun) -> list[str]:
    """How the contained candidate result differs from the trusted one."""
    c, t = contained.result, mine.result
    if c is None or t is None:
        return ["the trusted recomputation gave no result"]
    out = []
    if c.verdict != t.verdict:
        out.append(f"verdict {t.verdict} (trusted) but {c.verdict} (contained run)")
    ours, theirs = {_sig(f) for f in t.findings}, {_sig(f) for f in c.findings}
    for f in t.findings:
        if _sig(f) not in theirs:
            out.append(f"{f.code} ({f.rule}) at line {f.span.line if f.span else 0} is "
                       "missing from the contained run")
    for f in c.findings:
        if _sig(f) not in ours:
            out.append(f"{f.code} ({f.rule}) at line {f.span.line if f.span else 0} appears "
                       "only in the contained run")
    return out


def _generalisation(setup: Setup, options: ProposalOptions, v: Verdicts
                    ) -> dict[str, dict[str, Any]]:
    """For each new catch, check semantics-preserving variants of the caught schedule
    (variants.py) and its fixed variants with both rulebooks, contained like every other
    run: a rule that recognises the file rather than the defect fires on none of the
    former, and a rule that recognises something other than the defect may fire on the
    latter (see `_run_variants`)."""
    wanted: dict[str, set[tuple[str, int]]] = {}
    for flip in flips(setup, v):
        items = {(i.code, i.line or 0) for i in flip.items if i.kind == "new_catch" and i.code}
        if items:
            wanted[flip.file] = items
    if not wanted:
        return {}
    wl = tree_digest(setup.workloads, ("*.py",)) if setup.workloads.is_dir() else ""
    key = digest_json({"generalisation": 2, "engine": engine_digest(),
                       "plugins": {s: setup.hashes[s] for s in SIDES}, "workloads": wl,
                       "cases": sorted((rel, sorted(items), next(
                           (c.sha256 for c in setup.cases if c.rel == rel), ""))
                           for rel, items in wanted.items())})
    hit = v.cache.get(key)
    if hit is not None and isinstance(hit.get("out"), dict):
        return hit["out"]
    out = _run_variants(setup, options, v, wanted)
    v.cache.put(key, {"out": out})
    return out


FIXES_PER_SIDE = 8  # machine fixes taken from one side's findings on one case
FIXED_GROWTH = 4096  # characters a fix may add to a schedule


@dataclass
class _Derived:
    """One derived schedule to check: a variant of a caught case, or a fixed version."""

    rel: str  # the caught case
    kind: str  # a variants.KINDS entry, or "fixed"
    text: str
    lines: dict[int, int] = field(default_factory=dict)


def _fixed_texts(text: str, results: list[FileResult | None]) -> list[str]:
    """`text` with each machine-applicable fix that a finding in `results` carries applied
    (fixes of the base and of the candidate: both only propose; the base rulebook decides
    which to trust). A fix whose edits do not apply is left out."""
    out: list[str] = []
    for result in results:
        fixes = [x for f in (result.findings if result else ()) for x in f.fixes
                 if x.applicability == "machine" and x.edits][:FIXES_PER_SIDE]
        for fix in fixes:
            try:
                fixed = apply_edits(text, fix.edits)
            except (IndexError, ValueError):
                continue
            if fixed != text and fixed not in out and len(fixed) <= len(text) + FIXED_GROWTH:
                out.append(fixed)
    return out


def _equivalent(before: FileResult, after: FileResult, lines: dict[int, int]) -> bool:
    """The base rulebook judges a variant as it judged the original: the same verdict and
    the same counted findings, each at the line its original line moved to."""
    moved = {(code, lines.get(line, line)) for code, line in counted(before)}
    return after.verdict == before.verdict and counted(after) == moved


def _run_variants(setup: Setup, options: ProposalOptions, v: Verdicts,
                  wanted: dict[str, set[tuple[str, int]]]) -> dict[str, dict[str, Any]]:
    """Check every derived schedule of every caught case with both rulebooks: one job per
    side, side by side. Then, per case:
    - a semantics-preserving variant counts when the trusted base rulebook judges it as it
      judged the original (a rewrite that changed what the base sees, e.g. a smaller tile
      that no longer overflows shared memory, is dropped); it *fires* when the candidate
      finds every caught (code, line), at the line that line moved to;
    - a fixed variant counts (is trusted) when the base rulebook rejected the original
      and accepts the fixed text (verdict clean); it *fires* when the candidate still
      reports a caught code anywhere on it, and *fails* when the candidate gives no result
      or a rule fails on it that did not fail on the base side (a rule that crashed there
      would otherwise escape the check)."""
    by_rel = {c.rel: c for c in setup.cases}
    derived: list[_Derived] = []
    for rel in sorted(wanted):
        case = by_rel.get(rel)
        text = case.path.read_text(encoding="utf-8", errors="replace") if case else ""
        derived += [_Derived(rel, d.kind, d.text, d.lines) for d in variants(text)]
        results = [v.runs[s][rel].result if rel in v.runs[s] else None for s in SIDES]
        derived += [_Derived(rel, "fixed", t) for t in _fixed_texts(text, results)]
    return _tally(wanted, v, derived, _check_derived(setup, options, derived, by_rel))


def _tally(wanted: dict[str, set[tuple[str, int]]], v: Verdicts, derived: list[_Derived],
           checked: list[dict[str, CaseRun]]) -> dict[str, dict[str, Any]]:
    """Per caught case: the variants that count and fire, per kind, and the fixed ones."""
    out: dict[str, dict[str, Any]] = {}
    for rel, items in sorted(wanted.items()):
        out[rel] = {"codes": sorted({c for c, _ in items}), "fired": 0, "total": 0,
                    "dropped": 0, "kinds": {k: {"fired": 0, "total": 0} for k in KINDS},
                    "fixed": {"derived": 0, "total": 0, "fired": 0, "failed": 0}}
    for d, runs in zip(derived, checked, strict=True):
        g, items = out[d.rel], wanted[d.rel]
        original = v.runs["base"][d.rel].result if d.rel in v.runs["base"] else None
        base, cand = runs["base"].result, runs["candidate"]
        if d.kind == "fixed":
            g["fixed"]["derived"] += 1
            if original is None or original.verdict != "rejected" or base is None or \
                    base.verdict != "clean":
                continue
            g["fixed"]["total"] += 1
            codes = {c for c, _ in items}
            base_failed = {f.get("rule") for f in runs["base"].failures}
            if cand.result is None or any(f.get("rule") not in base_failed
                                          for f in cand.failures):
                g["fixed"]["failed"] += 1
            elif any(c in codes for c, _ in counted(cand.result)):
                g["fixed"]["fired"] += 1
            continue
        if original is None or base is None or not _equivalent(original, base, d.lines):
            g["dropped"] += 1
            continue
        kind = g["kinds"][d.kind]
        kind["total"] += 1
        g["total"] += 1
        moved = {(c, d.lines.get(line, line)) for c, line in items}
        if cand.result is not None and moved <= counted(cand.result):
            kind["fired"] += 1
            g["fired"] += 1
    return out


def _check_derived(setup: Setup, options: ProposalOptions, derived: list[_Derived],
                   by_rel: dict[str, Case]) -> list[dict[str, CaseRun]]:
    """Each derived schedule checked by both rulebooks (blinded, contained), in order."""
    empty = {s: CaseRun(result=None) for s in SIDES}
    if not derived:
        return []
    with tempfile.TemporaryDirectory(prefix="cakegov-variants-") as tmp:
        cases: list[Case] = []
        for i, d in enumerate(derived):
            path = Path(tmp) / f"derived-{i:05d}.cake"
            path.write_text(d.text, encoding="utf-8")
            cases.append(Case(f"{d.rel} ({d.kind} {i})", path, sha256_bytes(d.text.encode()),
                              by_rel[d.rel].labels))
        aliases = _blinded(cases, Path(tmp) / "blind")
        jobs = [Job(side=side, mode="check", rules=setup.rules[side],
                    workloads=setup.workloads, root=setup.root,
                    files=[(aliases[c.rel][0], str(aliases[c.rel][1])) for c in cases],
                    time_limit_s=options.time_limit_s,
                    memory_limit_mb=options.memory_limit_mb,
                    require_sandbox=options.require_sandbox) for side in SIDES]
        with ThreadPoolExecutor(max_workers=max(1, min(len(jobs), options.jobs))) as pool:
            outputs = dict(zip(SIDES, pool.map(run_job, jobs), strict=True))
    back = {alias: rel for rel, (alias, _) in aliases.items()}
    runs: dict[str, dict[str, CaseRun]] = {s: {} for s in SIDES}
    for side, output in outputs.items():
        declared = changes.declared_rules(setup.rules[side])
        for alias, event in output.results.items():
            if alias in back:
                runs[side][back[alias]] = _run(_unalias(event, back), declared)
        for f in output.failures:  # a kill: the schedule it was checking has no result
            name = back.get(str(f.get("file")))
            if name is not None and name in runs[side]:
                runs[side][name].failures.append(f)
    return [{s: runs[s].get(c.rel, empty[s]) for s in SIDES} for c in cases]


def _evidence_targets(setup: Setup, v: Verdicts, wl: str) -> list[evidence.Target]:
    """Every schedule with a flip that is more than a changed diagnostic: the simulator
    runs it (with the rulebook that accepts it, else the base's, or the candidate's when
    only proposed code can compute it), and a clean one is also compiled."""
    out = []
    off = default_off(setup)
    for case in setup.cases:
        before, after = v.runs["base"][case.rel].result, v.runs["candidate"][case.rel].result
        if before is None or after is None:
            continue
        items = classify(case, before, after, off)
        if not any(i.kind != "changed_diagnostic" for i in items):
            continue
        accepted = evidence.accepting(before, after)
        side = accepted or ("candidate" if v.runs["candidate"][case.rel].source
                            == trusted.PROPOSED else "base")
        key = digest_json({"evidence": 2, "check": _keys(setup, side, case, wl)})
        out.append(evidence.Target(case.rel, case.path, side, setup.rules[side], key,
                                   compile=accepted is not None))
    return out


def _launch(setup: Setup, options: ProposalOptions, need: list[Case], info_for: list[str],
            bar: Bar | None = None) -> tuple[dict[str, JobOutput], int]:
    """Run the check jobs (chunks of both sides interleaved, so that each pair of chunks
    runs side by side and their timings share the machine's state) or info jobs."""
    with tempfile.TemporaryDirectory(prefix="cakegov-blind-") as tmp:
        aliases = _blinded(need, Path(tmp))
        merged, n = _launch_blind(setup, options, need, info_for, aliases, bar)
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
                  info_for: list[str], aliases: dict[str, tuple[str, Path]],
                  bar: Bar | None = None) -> tuple[dict[str, JobOutput], int]:
    def job(side: str, mode: str, files: list[Case]) -> Job:
        return Job(side=side, mode=mode, rules=setup.rules[side], workloads=setup.workloads,
                   root=setup.root,
                   files=[(aliases[c.rel][0], str(aliases[c.rel][1])) for c in files],
                   time_limit_s=options.time_limit_s, memory_limit_mb=options.memory_limit_mb,
                   require_sandbox=options.require_sandbox,
                   replay={"record": ["*"]} if side == "candidate" and record else {})

    # what every rule yields on every call, for the trusted recomputation's stand-ins
    record = bool(trusted.proposed_files(setup.hashes["base"], setup.hashes["candidate"]))
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
    if bar is not None and need:  # every case once per side
        bar.start(f"judging {len(need)} cases (base and candidate)",
                  sum(len(t.files) for t in tasks))
    advance = bar.advance if bar is not None else None
    with ThreadPoolExecutor(max_workers=max(1, options.jobs)) as pool:
        results = list(pool.map(lambda task: run_job(task, advance), tasks))
    if bar is not None:
        bar.stop()
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


def default_off(setup: Setup) -> tuple[frozenset[str], frozenset[str]]:
    """(base, candidate): the codes `cakegov check` does not run by default on each side,
    from the plugins' STATUS literals (read, never imported)."""
    return (setup.default_off.get("base", frozenset()),
            setup.default_off.get("candidate", frozenset()))


def classify(case: Case, before: FileResult, after: FileResult,
             off: tuple[frozenset[str], frozenset[str]] = (frozenset(), frozenset())
             ) -> list[FlipItem]:
    """The flip items of one schedule (empty when nothing changed). Rules run with every
    status (preview too), so a new rule is judged on what it finds; `off` holds, per side,
    the codes the default selection leaves out, so that a labelled defect the base caught
    by default and the candidate catches only when asked (a rule demoted to preview) is a
    lost catch too."""
    b, a = counted(before), counted(after)
    expected = set() if case.labels.clean else set(case.labels.expected)
    items: list[FlipItem] = []
    labels = changes.label_text(case.labels)
    b_default = {(c, n) for c, n in b if c not in off[0]}
    a_default = {(c, n) for c, n in a if c not in off[1]}
    for code, line in sorted(expected, key=lambda x: (x[1], x[0])):
        if (code, line) in a - b:
            items.append(FlipItem(kind="new_catch", code=code, line=line,
                                  message=f"{code} now catches the labelled defect at line "
                                          f"{line}"))
        elif (code, line) in b - a:
            items.append(FlipItem(kind="lost_catch", code=code, line=line,
                                  message=f"{code} no longer catches the labelled defect at "
                                          f"line {line}"))
        elif (code, line) in b_default - a_default:
            items.append(FlipItem(kind="lost_catch", code=code, line=line,
                                  message=f"{code} no longer catches the labelled defect at "
                                          f"line {line} by default: `cakegov check` runs "
                                          f"stable rules only, and the candidate's {code} is "
                                          "not stable"))
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
    off = default_off(setup)
    for case in setup.cases:
        before, after = v.runs["base"][case.rel].result, v.runs["candidate"][case.rel].result
        if before is None or after is None:
            continue
        items = classify(case, before, after, off)
        if not items:
            continue
        old, new = {_sig(f) for f in before.findings}, {_sig(f) for f in after.findings}
        out.append(Flip(
            file=case.rel, schedule=after.schedule or before.schedule, valid=case.labels.clean,
            labels=changes.label_text(case.labels), verdict_before=before.verdict,
            verdict_after=after.verdict, kinds=sorted({i.kind for i in items}), items=items,
            new_findings=[f for f in after.findings if _sig(f) not in old],
            removed_findings=[f for f in before.findings if _sig(f) not in new],
            evidence=evidence.evidence_of(case.rel, before, after, v.evidence, items,
                                          case.labels.clean),
            source=v.runs["candidate"][case.rel].source))
    return out


