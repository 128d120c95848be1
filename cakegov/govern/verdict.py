"""From what ran to the verdict: confusion table, verifier cost, motivating cases,
blockers, notes, and the assembled `ProposalResult`."""

from __future__ import annotations

import os
import re
import statistics
from collections import defaultdict
from typing import Any

from cakegov.corpus.manifest import version as corpus_version
from cakegov.govern import changes, evidence, trusted
from cakegov.govern.cache import digest_json, engine_digest, tree_digest
from cakegov.govern.inputs import Setup
from cakegov.govern.isolate import containment_for
from cakegov.govern.judge import SIDES, CaseRun, Verdicts, counted, flips
from cakegov.govern.models import (
    BLOCKING_FLIPS,
    COST_FLOOR_MS,
    COST_LIMIT,
    COST_MIN_SCHEDULES,
    Blocker,
    Confusion,
    ContractChange,
    CorpusSummary,
    Cost,
    Flip,
    GpuInfo,
    MotivatingCheck,
    PluginChange,
    ProposalOptions,
    ProposalResult,
    Provenance,
    RuleCost,
    RuleFailure,
    RuleRow,
    RunInfo,
    SourceLinks,
    Timing,
    decide,
    decision_line,
    machine,
)


def _confusion(setup: Setup, runs: dict[str, CaseRun]) -> dict[str, Confusion]:
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for case in setup.cases:
        result = runs[case.rel].result
        if result is None:
            continue
        found = counted(result)
        expected = set() if case.labels.clean else set(case.labels.expected)
        for code, _ in found & expected:
            counts[code][0] += 1
        for code, _ in found - expected:
            counts[code][1] += 1
        for code, _ in expected - found:
            counts[code][2] += 1
    return {code: Confusion(tp=c[0], fp=c[1], fn=c[2]) for code, c in counts.items()}


def _plugin_changes(setup: Setup, v: Verdicts) -> list[PluginChange]:
    """From the rulebooks' own descriptions; from file hashes alone (no versions, no
    version check) when the candidate does not load."""
    if v.info["candidate"] is not None:
        rows = changes.plugin_changes(v.info["base"] or {"entries": []}, v.info["candidate"],
                                      setup.base_lock)
    else:
        def entries(side: str) -> dict[str, list[dict[str, str | None]]]:
            return {"entries": [{"relpath": rel, "kind": changes.DIR_KINDS[rel.split("/")[0]],
                                 "version": None, "sha256": sha}
                                for rel, sha in setup.hashes[side].items()]}

        rows = [dict(r, problem=None) for r in changes.plugin_changes(
            entries("base"), entries("candidate"), None)]
    return [PluginChange(**r) for r in rows]


def rule_rows(setup: Setup, v: Verdicts) -> list[RuleRow]:
    base = {r["code"]: r for r in (v.info["base"] or {}).get("rules", [])}
    cand = {r["code"]: r for r in (v.info["candidate"] or {}).get("rules", [])}
    if v.info["candidate"] is None:  # it did not load: show the base, judge nothing after
        cand = base
    conf = {s: _confusion(setup, v.runs[s]) for s in SIDES}
    rows = []
    for code in sorted(set(base) | set(cand)):
        b, c = base.get(code), cand.get(code)
        change = ("added" if b is None else "removed" if c is None else
                  "unchanged" if b["sha256"] == c["sha256"] else "changed")
        meta = c or b or {}
        rows.append(RuleRow(
            code=code, name=meta["name"], change=change,  # type: ignore[arg-type]
            summary=meta["summary"], severity=meta["severity"], category=meta["category"],
            doc=meta["doc"] if change in ("added", "changed") else "",
            version_before=b["version"] if b else None,
            version_after=c["version"] if c else None,
            status_before=b["status"] if b else None, status_after=c["status"] if c else None,
            before=conf["base"].get(code, Confusion()) if b else None,
            after=conf["candidate"].get(code, Confusion()) if c and not v.candidate_error
            else None))
    order = {"added": 0, "changed": 1, "removed": 2, "unchanged": 3}
    return sorted(rows, key=lambda r: (order[r.change], r.code))


def _quantile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def cost(setup: Setup, v: Verdicts, rows: list[RuleRow]) -> Cost:
    pairs = [(v.runs["base"][c.rel].seconds, v.runs["candidate"][c.rel].seconds)
             for c in setup.cases]
    pairs = [(b, a) for b, a in pairs if b is not None and a is not None]
    if not pairs or v.candidate_error:
        return Cost()
    before = [b * 1000 for b, _ in pairs]
    after = [a * 1000 for _, a in pairs]
    mb, ma = statistics.median(before), statistics.median(after)
    ratio = ma / mb if mb > 0 else 1.0
    judged = len(pairs) >= COST_MIN_SCHEDULES
    per_rule = []
    for row in rows:
        if row.change in ("added", "changed"):
            times = [v.runs["candidate"][c.rel].rule_seconds.get(row.code, 0.0) * 1000
                     for c in setup.cases]
            per_rule.append(RuleCost(code=row.code, total_ms=round(sum(times), 3),
                                     median_ms=round(statistics.median(times), 4)))
    fresh = any(v.runs["base"][c.rel].run_id not in v.cached_runs for c in setup.cases)
    measured = "this run" if fresh or not v.cached_runs else (
        "an earlier run (cached): " + ", ".join(sorted(v.cached_runs)))
    return Cost(schedules=len(pairs), median_before_ms=round(mb, 3),
                median_after_ms=round(ma, 3), p95_before_ms=round(_quantile(before, 0.95), 3),
                p95_after_ms=round(_quantile(after, 0.95), 3), ratio=round(ratio, 3),
                judged=judged, exceeded=judged and ratio > COST_LIMIT and ma - mb > COST_FLOOR_MS,
                measured=measured, rules=per_rule,
                samples_before_ms=[round(x, 3) for x in before],
                samples_after_ms=[round(x, 3) for x in after])


def _motivations(setup: Setup) -> dict[str, list[str]]:
    """code -> MOTIVATED_BY of each candidate check plugin, read from the files by this
    process (inputs.prepare; never from a worker's description, which proposed code can
    write)."""
    return setup.motivations


# The flipped schedules' findings are what a hostile rule can inflate (everything else in
# a proposal result is bounded by the corpus and the rulebook): past FLIPS_CAP bytes of
# them, each flip keeps its first FLIPS_KEEP new and removed findings and a blocker names
# the rules that yielded the most.
FLIPS_CAP = 4 << 20
FLIPS_KEEP = 5


def bound_flips(flips_: list[Flip]) -> tuple[list[Flip], Blocker | None]:
    size = sum(len(f.model_dump_json()) for f in flips_)
    if size <= FLIPS_CAP:
        return flips_, None
    counts: dict[str, int] = defaultdict(int)
    for f in flips_:
        for finding in f.new_findings:
            counts[finding.code] += 1
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
    trimmed = [f.model_copy(update={"new_findings": f.new_findings[:FLIPS_KEEP],
                                    "removed_findings": f.removed_findings[:FLIPS_KEEP]})
               for f in flips_]
    named = ", ".join(f"{code} ({n} findings)" for code, n in top)
    return trimmed, Blocker(
        kind="size", rule=top[0][0] if top else None,
        message=f"the flipped schedules' findings come to {size:,} bytes, over the bound of "
                f"{FLIPS_CAP:,} for one proposal's reports and ledger record; most from "
                f"{named}. Each flip now shows its first {FLIPS_KEEP} new and removed "
                "findings")


def capped_notes(setup: Setup, v: Verdicts) -> list[str]:
    """One note per (side, code) whose findings hit the per-rule cap on some schedule."""
    from cakegov.govern.judge import FINDINGS_PER_RULE

    dropped: dict[tuple[str, str], list[int]] = defaultdict(list)
    for side in ("base", "candidate"):
        for case in setup.cases:
            run = v.runs[side].get(case.rel)
            for code, n in (run.capped.items() if run is not None else ()):
                dropped[(side, code)].append(n)
    return [f"{side}: {code} yielded more than {FINDINGS_PER_RULE} findings on "
            f"{len(ns)} schedule(s); {sum(ns)} over the cap were dropped"
            for (side, code), ns in sorted(dropped.items())]


def motivating_checks(setup: Setup, v: Verdicts, rows: list[RuleRow]) -> list[MotivatingCheck]:
    """For every added or changed rule, each case its MOTIVATED_BY names: `caught` only
    when it is a labelled invalid schedule and the rule fires at a line its labels name.
    A file that is not a labelled schedule, or a valid one, is no motivation; `not in
    shard` exists only in sharded runs, for a labelled case judged by another shard."""
    from cakegov.govern.inputs import is_labelled_case

    motivations = _motivations(setup)
    judged = {c.rel: c for c in setup.cases}
    sharded = setup.total > len(setup.cases)
    out = []
    for row in rows:
        if row.change not in ("added", "changed") or row.code not in motivations:
            continue
        for entry in motivations[row.code]:
            path = setup.root / entry
            if not path.is_file():
                out.append(MotivatingCheck(rule=row.code, file=entry, status="missing",
                                           detail="no such file"))
                continue
            case = judged.get(entry)
            if case is None:
                if sharded and is_labelled_case(path, setup.root):
                    out.append(MotivatingCheck(rule=row.code, file=entry,
                                               status="not in shard"))
                else:
                    out.append(MotivatingCheck(
                        rule=row.code, file=entry, status="not labelled",
                        detail="not a labelled schedule (a .cake file with `# expect:` "
                               "labels, in the corpus or added with its labels)"))
                continue
            if case.labels.clean:
                out.append(MotivatingCheck(rule=row.code, file=entry, status="not invalid",
                                           detail="labelled clean: a rule is motivated by a "
                                                  "defect, not by a valid schedule"))
                continue
            result = v.runs["candidate"][entry].result
            lines = {line for _, line in case.labels.expected}
            mine = {f.span.line if f.span else 0 for f in (result.findings if result else ())
                    if f.code == row.code}
            if mine & lines:
                out.append(MotivatingCheck(rule=row.code, file=entry, status="caught"))
            else:
                codes = {f.code for f in result.findings} if result else set()
                found = ", ".join(sorted(codes)) or "none"
                where = (f"; {row.code} fires at line(s) {sorted(mine)}, the labels name "
                         f"{sorted(lines)}" if mine else "")
                out.append(MotivatingCheck(rule=row.code, file=entry, status="not caught",
                                           detail=f"findings: {found}{where}"))
    return out


def blockers(setup: Setup, v: Verdicts, plugin: list[PluginChange],
             contract: list[ContractChange], flips_: list[Flip], rows: list[RuleRow],
             motivating: list[MotivatingCheck], cost_: Cost) -> list[Blocker]:
    out: list[Blocker] = []
    if v.candidate_error:
        out.append(Blocker(kind="candidate-does-not-load",
                           message=f"the candidate rulebook does not load: {v.candidate_error}"))
    if setup.lock_problems:
        out.append(Blocker(kind="stale-lock", files=["rules/rulebook.lock"],
                           message="the candidate's rules/rulebook.lock does not describe its "
                           "plugins (`cakegov lock --check` fails): "
                           + "; ".join(setup.lock_problems[:10])))
    if setup.symlinks:
        out.append(Blocker(kind="symlink", files=setup.symlinks,
                           message=f"{len(setup.symlinks)} corpus path(s) reach their file "
                                   "through a symbolic link or leave the repository, so they "
                                   "were not read or judged: " + ", ".join(setup.symlinks[:10])
                                   + "; a schedule must be a regular file inside the "
                                   "repository"))
    for p in plugin:
        if p.problem:
            out.append(Blocker(kind="version-not-bumped", rule=p.relpath,
                               message=f"rules/{p.relpath}: {p.problem}"))
    for c in contract:
        if c.needs_reason and not c.reason:
            out.append(Blocker(kind="contract-change-without-reason", files=[c.path],
                               message=f"{c.path}: {c.detail}, with no stated reason: add a "
                               "`Reason:` line to the commit message or an entry naming the "
                               f"file to {changes.CHANGE_NOTES}"))
    for side, problems in sorted(v.misdescribed.items()):
        out.append(Blocker(
            kind="untrusted-description", files=["rules/"],
            message=f"the {side} rulebook's worker described it unlike its files (the "
            f"report and the ledger use the files' hashes, versions and names): "
            + "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more"
                                         if len(problems) > 5 else "")))
    if v.divergent:
        files = sorted(v.divergent)
        first = "; ".join(v.divergent[files[0]][:3])
        out.append(Blocker(
            kind="untrusted-divergence", files=files,
            message=f"with the proposed code loaded, the candidate run disagrees with the "
            f"trusted recomputation (the base's copies of the unchanged plugins, the proposed "
            f"rules' findings replayed as data) on {plural(len(files), 'schedule', 'schedules')}"
            f": proposed code changed what code it does not own reported; first, on "
            f"{files[0]}: {first}"))
    out += label_looks_wrong(flips_, rows)
    names = {r.code: r.name for r in rows}
    grouped: dict[tuple[str, str | None], list[str]] = defaultdict(list)
    for flip in flips_:
        for item in flip.items:
            if item.kind in BLOCKING_FLIPS and flip.file not in grouped[(item.kind, item.code)]:
                grouped[(item.kind, item.code)].append(flip.file)
    for (kind, code), files in sorted(grouped.items(), key=lambda x: (x[0][0], x[0][1] or "")):
        who = f"{code} {names.get(code, '')}".strip() if code else "the candidate"
        if kind == "new_false_positive":  # the valid schedules it rejects come first
            valid = {f.file for f in flips_ if f.file in files and f.valid}
            files = [f for f in files if f in valid] + [f for f in files if f not in valid]
            msg = (f"{who} newly fires where no label expects it on {len(files)} "
                   f"schedule(s), {len(valid)} of them valid")
            listed = "; ".join(
                f"{what}: {_listed(group)}" for what, group in (
                    (f"valid, newly rejected ({len(valid)})", [f for f in files if f in valid]),
                    (f"invalid, at an unlabelled place ({len(files) - len(valid)})",
                     [f for f in files if f not in valid])) if group)
        else:
            msg = f"{who} no longer catches {len(files)} labelled defect(s)"
            listed = _listed(files)
        out.append(Blocker(kind=kind.replace("_", "-"), rule=code, files=files,
                           message=f"{msg}: {listed}"))
    base_fail = {(f.rule, f.file, f.kind) for f in v.failures if f.side == "base"}
    by_rule: dict[tuple[str | None, str], list[RuleFailure]] = defaultdict(list)
    for f in v.failures:
        if f.side == "candidate" and (f.rule, f.file, f.kind) not in base_fail:
            by_rule[(f.rule, f.kind)].append(f)
    for (rule, kind), fails in sorted(by_rule.items(), key=lambda x: (x[0][0] or "", x[0][1])):
        first = fails[0]
        verb = {"hang": "hung", "crash": "crashed", "memory": "blew the memory limit",
                "output": "exceeded the output limit",
                "forged-output": "forged a frame on the worker's result channel"}.get(
            kind, kind)
        who = f"rule {rule} {names.get(rule or '', '')}".strip() if rule else "the worker"
        out.append(Blocker(kind=f"rule-{kind}", rule=rule,
                           files=sorted({f.file for f in fails if f.file}),
                           message=f"{who} {verb} on {first.file or 'loading'}: "
                                   f"{first.message}" + (f" [{first.where}]" if first.where
                                                         else "")
                                   + (f" (and on {len(fails) - 1} more schedule(s))"
                                      if len(fails) > 1 else "")))
    blamed = {f.file for f in v.failures if f.side == "candidate"}
    unjudged = [c.rel for c in setup.cases if v.runs["candidate"][c.rel].result is None
                and c.rel not in blamed]
    if unjudged and not v.candidate_error:
        out.append(Blocker(kind="not-judged", files=unjudged,
                           message=f"the candidate gave no result for {len(unjudged)} "
                                   f"schedule(s): {', '.join(unjudged[:10])}"))
    for m in motivating:
        if m.status in ("missing", "not caught", "not labelled", "not invalid"):
            detail = f"{m.status}: {m.detail}" if m.detail else m.status
            out.append(Blocker(kind="motivating-case", rule=m.rule, files=[m.file],
                               message=f"{m.rule} does not catch its motivating case "
                                       f"{m.file} ({detail})"))
    motivations = _motivations(setup) if not v.candidate_error else {}
    for row in rows:
        needs = row.change == "added" or (row.change == "changed"
                                          and row.status_after == "stable")
        if needs and row.code in motivations and not motivations[row.code]:
            out.append(Blocker(kind="motivating-case", rule=row.code,
                               message=f"{row.code} {row.name} names no motivating case "
                                       "(MOTIVATED_BY): a new or changed rule must catch a "
                                       "real defect, a labelled invalid schedule"))
    if cost_.exceeded:
        out.append(Blocker(kind="verifier-cost", message=(
            f"the median check time per schedule more than doubled (limit "
            f"{cost_.limit_ratio:g}x); see Verifier cost")))
    return out


def _listed(files: list[str], cap: int = 10) -> str:
    return ", ".join(files[:cap]) + (f" and {len(files) - cap} more" if len(files) > cap
                                     else "")


_SERVER = re.compile(r"https://[A-Za-z0-9.-]+(:[0-9]{1,5})?")
_REPOSITORY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}/[A-Za-z0-9_.-]{1,100}")
_SHA = re.compile(r"[0-9a-f]{40}")


def source_links(head: str, prefix: str, env: dict[str, str] | None = None
                 ) -> SourceLinks | None:
    """Where the judged commit can be read, when this runs in GitHub Actions (the gate
    checks out the pull request's merge commit, `GITHUB_SHA`: the commit judged here, so
    line numbers are exact there); None elsewhere or when a part is malformed."""
    env = dict(os.environ) if env is None else env
    server = env.get("GITHUB_SERVER_URL", "")
    repository = env.get("GITHUB_REPOSITORY", "")
    if env.get("GITHUB_ACTIONS") != "true" or not _SERVER.fullmatch(server) or \
            not _REPOSITORY.fullmatch(repository) or not _SHA.fullmatch(head):
        return None
    return SourceLinks(server_url=server, repository=repository, sha=head,
                       prefix=f"{prefix.strip('/')}/" if prefix.strip("/") else "")


def simulator_notes(flips_: list[Flip]) -> list[str]:
    """One line: what the simulator said of the flipped schedules, by evidence status."""
    counts: dict[str, int] = defaultdict(int)
    for f in flips_:
        counts[f.evidence.simulator.status] += 1
    if not counts:
        return []
    return ["simulator evidence on the flipped schedules: " + ", ".join(
        f"{n} {status}" for status, n in sorted(counts.items()))]


def _notes(setup: Setup, v: Verdicts, contract: list[ContractChange]) -> list[str]:
    notes = []
    kinds = defaultdict(int)
    for c in contract:
        kinds[c.kind] += 1
    if kinds.get("engine"):
        notes.append(f"contract change: {kinds['engine']} engine file(s) under cakegov/ "
                     "differ from the base; review them as engine code")
    if kinds.get("target"):
        notes.append(f"contract change: {kinds['target']} hardware target file(s) state "
                     "other facts than the base; check each against its cited source")
    if kinds.get("workload"):
        notes.append(f"contract change: {kinds['workload']} workload file(s) differ from "
                     "the base")
    for side, rules in sorted(v.quarantined.items()):
        for rule in rules:
            notes.append(f"{side}: rule {rule} was skipped after it killed its worker")
    for f in v.failures:
        if f.side == "base":
            notes.append(f"base: rule {f.rule} {f.kind} on {f.file} (already in the base)")
    missing = [c.rel for c in setup.cases if v.runs["base"][c.rel].result is None]
    if missing:
        notes.append(f"base: no result for {len(missing)} schedule(s), not compared: "
                     + ", ".join(missing[:5]))
    proposed = sorted(c.rel for c in setup.cases
                      if v.runs["candidate"][c.rel].source == trusted.PROPOSED)
    if proposed:
        notes.append(f"{plural(len(proposed), 'candidate result', 'candidate results')} "
                     "came from proposed code (the schedule uses a proposed primitive or "
                     "target, so no trusted recomputation exists): " + ", ".join(proposed[:5])
                     + (f" and {len(proposed) - 5} more" if len(proposed) > 5 else ""))
    if setup.unlabelled:
        notes.append(f"{len(setup.unlabelled)} schedule(s) without a `# expect:` label were "
                     f"not judged: {', '.join(setup.unlabelled[:5])}")
    if setup.external:
        notes.append("motivating cases outside the corpus judged as invalid cases: "
                     + ", ".join(setup.external))
    return notes


def plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _kind_counts(g: dict[str, Any]) -> str:
    """`rename 2/2, reorder 1/1, ...`: fired/total per variant kind that applied."""
    parts = [f"{kind} {c['fired']}/{c['total']}" for kind, c in g["kinds"].items()
             if c["total"]]
    return ", ".join(parts) or "none applied"


# Variants that differ from the original only in spelling and declaration order: a rule
# that reasons about the defect finds it on every one of them, at the line it moved to.
EXACT_KINDS = ("rename", "reorder")


# Rule categories whose defects the simulator does not model (resource and encoding limits,
# names: docs/simulator.md): a schedule such a rule newly rejects may well simulate
# correctly, which then says nothing about its label.
NOT_SIMULATED_CATEGORIES = frozenset({"resources", "hardware", "names"})


def label_looks_wrong(flips_: list[Flip], rows: list[RuleRow]) -> list[Blocker]:
    """`label-looks-wrong`: a labelled invalid schedule the candidate newly rejects, with
    rules whose defects the simulator models, that the simulator runs correctly under
    every strategy, seed and shape of its plan. Merged, the catch would rest on the label
    alone; the dynamic evidence says the schedule is legal (or its defect is one the
    simulator cannot observe: docs/simulator.md names those)."""
    category = {r.code: r.category for r in rows}
    out = []
    for flip in flips_:
        newly = flip.verdict_before != "rejected" and flip.verdict_after == "rejected"
        if flip.valid or not newly or flip.evidence.simulator.status != evidence.UNCONFIRMED:
            continue
        codes = sorted({i.code for i in flip.items if i.kind == "new_catch" and i.code})
        if not codes or all(category.get(c, "") in NOT_SIMULATED_CATEGORIES for c in codes):
            continue
        out.append(Blocker(
            kind="label-looks-wrong", files=[flip.file], rule=", ".join(codes),
            message=f"{', '.join(codes)} newly rejects {flip.file} (labelled {flip.labels}), "
            f"but the simulator runs it correctly under every strategy: "
            f"{flip.evidence.simulator.detail.split(': ', 1)[-1][:300]}; the label looks "
            "wrong, or the defect is one the simulator cannot observe (docs/simulator.md)"))
    return out


def generalisation_blockers(v: Verdicts) -> list[Blocker]:
    """`does-not-generalise`, per new catch: its rule fires on none of the caught
    schedule's semantics-preserving variants, or misses one that is only respelled or
    reordered (it recognises the file: its names, its hash, its layout); or it fires on a
    trusted fixed variant (it fires on the repaired schedule too). Stage, tile and
    raw-barrier variants count towards the first condition only: a smaller tile or one
    stage more can remove a defect that depends on them, and pipeline rules may report the
    raw form of a defect at another line."""
    out = []
    for rel, g in sorted(v.generalisation.items()):
        codes = ", ".join(g["codes"])
        exact = [g["kinds"][k] for k in EXACT_KINDS]
        missed = sum(c["total"] - c["fired"] for c in exact)
        if g["total"] and not g["fired"]:
            out.append(Blocker(
                kind="does-not-generalise", files=[rel], rule=codes,
                message=f"{codes} catches {rel} but none of its {g['total']} "
                f"semantics-preserving variants ({_kind_counts(g)}: the same schedule "
                "with its names respelled, its declarations reordered, its stage count or "
                "tile changed, its pipelines written as raw barriers): the rule recognises "
                "the file, not the defect"))
        elif missed:
            out.append(Blocker(
                kind="does-not-generalise", files=[rel], rule=codes,
                message=f"{codes} catches {rel} but misses {missed} of its "
                f"{sum(c['total'] for c in exact)} renamed or reordered variants "
                f"({_kind_counts(g)}), which differ from it only in spelling and "
                "declaration order: the rule recognises the file, not the defect"))
        fixed = g["fixed"]
        if fixed["fired"] or fixed["failed"]:
            how = f"still fires on {fixed['fired']}"
            if fixed["failed"]:
                how += f" and fails on {fixed['failed']}"
            out.append(Blocker(
                kind="does-not-generalise", files=[rel], rule=codes,
                message=f"{codes} {how} of the {fixed['total']} trusted fixed variant(s) "
                f"of {rel} (a machine fix applied that the base rulebook accepts, where it "
                "rejected the original): the rule fires on the repaired schedule too"))
    return out


def generalisation_note(rel: str, g: dict[str, Any]) -> str:
    fixed = g["fixed"]
    return (f"generalisation: {', '.join(g['codes'])} on {rel} fires on {g['fired']} of "
            f"{g['total']} semantics-preserving variant(s) ({_kind_counts(g)}"
            + (f"; {g['dropped']} dropped: the base rulebook judges them differently"
               if g["dropped"] else "")
            + f"); fixed variants: {fixed['derived']} derived, {fixed['total']} trusted, "
            f"fires on {fixed['fired']}" + (f", fails on {fixed['failed']}"
                                            if fixed["failed"] else ""))


COST_BLOCKERS = ("cost-parameters-invalid", "cost-below-speed-of-light", "cost-ranking-worse")
# added by the parent itself: out-of-range values (read as data), a judgement that failed
COST_LIMIT_S = 300.0


def _cost_out_of_range(setup: Setup, changed: list[str]
                       ) -> list[tuple[str, list[str], str]]:
    """Blockers for proposed cost parameters outside what physics and the datasheets
    allow (cost/params.py PHYSICAL), read here as data, each naming the file and key. A
    file that does not parse is left to the contained judgement (cost-parameters-invalid)."""
    import tomllib

    from cakegov.cost.params import CostParamError, parse_params, physical_problems

    out: list[tuple[str, list[str], str]] = []
    for rel in changed:
        path = setup.rules["candidate"] / rel
        if not path.is_file():
            continue
        stem = path.stem
        try:
            cand = parse_params(tomllib.loads(changes.plugin_text(path)), f"rules/{rel}", stem)
        except (changes.ProposalInputError, tomllib.TOMLDecodeError, CostParamError,
                RecursionError, ValueError):
            continue
        base = None
        base_path = setup.rules["base"] / rel
        if base_path.is_file():
            try:
                base = parse_params(tomllib.loads(changes.plugin_text(base_path)),
                                    f"base rules/{rel}", stem)
            except (changes.ProposalInputError, tomllib.TOMLDecodeError, CostParamError,
                    RecursionError, ValueError):
                base = None
        target = setup.rules["candidate"] / "targets" / f"{cand.target}.toml"
        facts = changes.target_facts(target.read_bytes()) if target.is_file() else None
        smem = facts.get("smem_per_sm", (None,))[0] if facts else None
        for key, why in physical_problems(cand, base, smem if isinstance(smem, int)
                                          else None):
            out.append(("cost-out-of-range", [f"rules/{rel}"],
                        f"rules/{rel}: {key} = {why}: a cost parameter must stay within "
                        "what the hardware can do (cakegov/cost/params.py PHYSICAL)"))
    return out


def judge_costmodel(setup: Setup, options: ProposalOptions) -> Any:
    """Cost-parameter changes (cakegov/cost/gate.py), judged while the rulebooks exist;
    None when no cost-parameter file changed. The judgement lowers the valid corpus, which
    imports the workload files (code from the checkout) and the base's plugins, so it runs
    in a contained worker like every other run, on copies; what comes back is data the
    parent validates (known blocker kinds, bounded strings)."""
    import shutil
    import tempfile
    from pathlib import Path

    from cakegov.cost.gate import CostJudgement
    from cakegov.govern.isolate import Job, run_job

    base, cand = setup.hashes["base"], setup.hashes["candidate"]
    changed = sorted(rel for rel in set(base) | set(cand)
                     if rel.startswith("costmodel/") and base.get(rel) != cand.get(rel))
    if not changed:
        return None
    changed_paths = [f"rules/{rel}" for rel in changed]
    physical = _cost_out_of_range(setup, changed)
    with tempfile.TemporaryDirectory(prefix="cakegov-cost-") as tmp:
        proj = Path(tmp)
        files: list[tuple[str, str]] = []

        def copy(src: Path, rel: str) -> Path:
            dst = proj / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)
            files.append((rel, str(dst)))
            return dst

        valid = [copy(c.path, c.rel) for c in setup.cases if c.labels.clean]
        for rel in changed:
            if (setup.rules["candidate"] / rel).is_file():
                copy(setup.rules["candidate"] / rel, f"candidate/{rel}")
        measured = setup.root / "corpus" / "measurements"
        for m in sorted(measured.glob("*.jsonl")) if measured.is_dir() else []:
            copy(m, f"corpus/measurements/{m.name}")
        (proj / "candidate").mkdir(exist_ok=True)
        marker = proj / "judgement.txt"  # the name the worker reports under
        marker.write_text("cost-parameter judgement\n", encoding="utf-8")
        files.insert(0, ("judgement", str(marker)))
        job = Job(side="base", mode="cost", rules=setup.rules["base"],
                  workloads=setup.workloads, root=proj, files=files,
                  time_limit_s=options.time_limit_s, memory_limit_mb=options.memory_limit_mb,
                  step_limit_s=COST_LIMIT_S, require_sandbox=options.require_sandbox,
                  replay={"cost": {"changed": changed, "valid": [str(v) for v in valid],
                                   "candidate": str(proj / "candidate"),
                                   "measurements": str(proj / "corpus" / "measurements"),
                                   "root": str(proj)}})
        out = run_job(job)
    event = next((e for e in out.results.values() if e.get("ev") == "cost"), None)
    judgement = CostJudgement()
    judgement.blockers += physical
    if event is None:
        why = out.load_error or next((f["message"] for f in out.failures), "no answer")
        judgement.blockers.append(("cost-judgement-failed", changed_paths,
                                   f"the cost-parameter change could not be judged: the "
                                   f"contained judgement failed: {why}"[:2000]))
        return judgement
    for b in event.get("blockers") or []:
        if isinstance(b, list) and len(b) == 3 and b[0] in COST_BLOCKERS and \
                isinstance(b[1], list) and isinstance(b[2], str):
            judgement.blockers.append((b[0], [str(f)[:300] for f in b[1][:50]], b[2][:2000]))
    judgement.notes = [str(n)[:2000] for n in (event.get("notes") or [])[:20]]
    return judgement


def assemble(setup: Setup, v: Verdicts, options: ProposalOptions, gpu: GpuInfo,
             run: RunInfo, cost_model: Any = None, tamper: Any = None) -> ProposalResult:
    plugin = _plugin_changes(setup, v)
    contract = [ContractChange(**c) for c in setup.contract]
    flips_ = [] if v.candidate_error else flips(setup, v)
    rows = rule_rows(setup, v)
    motivating = [] if v.candidate_error else motivating_checks(setup, v, rows)
    cost_ = cost(setup, v, rows)
    blocks_extra = generalisation_blockers(v)
    digest = changes.contract_digest(setup.contract) if setup.contract else ""
    accepted = bool(digest) and changes.accepts(options.accept_contract, digest)
    blocks = blockers(setup, v, plugin, contract, flips_, rows, motivating, cost_)
    blocks += blocks_extra
    cost_notes = cost_model.notes if cost_model is not None else []
    blocks += [Blocker(kind=k, files=f, message=m) for k, f, m in
               (cost_model.blockers if cost_model is not None else [])]
    flips_, size_blocker = bound_flips(flips_)
    if size_blocker is not None:
        blocks.append(size_blocker)
    if tamper:  # tamper.py: the checkout, cache or ledger changed behind the parent's back
        blocks.insert(0, Blocker(kind="tampered", files=tamper.files, message=tamper.message()))
    if accepted:  # a maintainer accepted this exact contract change: reasons are moot
        blocks = [b for b in blocks if b.kind != "contract-change-without-reason"]
    elif digest:
        listed = ", ".join(f"{c.path} ({c.kind}, {c.change})" for c in contract[:10])
        more = f" and {len(contract) - 10} more" if len(contract) > 10 else ""
        why = (" (the digest given to --accept-contract names another change)"
               if options.accept_contract else "")
        blocks.append(Blocker(kind="contract-change", files=[c.path for c in contract],
                              message=f"the proposal changes the contract it is judged "
                              f"against: {listed}{more}; a maintainer must review the diffs "
                              f"and accept exactly this change with --accept-contract "
                              f"{digest} (in the GitHub gate: the pull request label "
                              f"cakegov-accept-{digest[:changes.ACCEPT_PREFIX]}){why}"))
    missing = None
    if gpu.mode == "require" and not gpu.present:
        missing = f"GPU evidence required (--gpu require) but there is no device: {gpu.detail}"
    elif gpu.mode == "require" and any(f.evidence.accepted_by and f.evidence.gpu.status
                                       == "not measured" for f in flips_):
        missing = "GPU evidence required (--gpu require) but a flipped schedule was not run"
    verdict, code = decide(blocks, missing)
    notes = _notes(setup, v, contract) + ([missing] if missing else [])
    notes += capped_notes(setup, v)
    notes += simulator_notes(flips_) + cost_notes
    notes += [generalisation_note(rel, g) for rel, g in sorted(v.generalisation.items())]
    if accepted:
        notes.append(f"contract change accepted by a maintainer (--accept-contract {digest})")
    icon = {"eligible": "✅", "blocked": "❌", "evidence-unavailable": "⚠️"}[verdict]
    summary = f"{icon} {decision_line(verdict, flips_, len(blocks))}"
    valid = sum(1 for c in setup.cases if c.labels.clean)
    corpus_digest = digest_json({"cases": [(c.rel, c.sha256) for c in setup.cases],
                                 "workloads": tree_digest(setup.workloads, ("*.py",))
                                 if setup.workloads.is_dir() else ""})
    shard = f"{options.shard[0]}/{options.shard[1]}" if options.shard else None
    return ProposalResult(
        verdict=verdict, exit_code=code, summary=summary, mode=setup.mode,  # type: ignore
        options={"base": options.base, "gpu": options.gpu, "time_limit_s":
                 options.time_limit_s, "memory_limit_mb": options.memory_limit_mb,
                 "shard": shard, "corpus": setup.corpus_dirs,
                 "require_sandbox": options.require_sandbox,
                 "containment": v.containment or containment_for(options.require_sandbox)},
        proposed=setup.proposed, plugin_changes=plugin, contract_changes=contract,
        contract_digest=digest,
        corpus=CorpusSummary(dirs=setup.corpus_dirs, valid=valid,
                             invalid=len(setup.cases) - valid, external=setup.external,
                             unlabelled=setup.unlabelled, shard=shard,
                             total_before_shard=setup.total),
        rules=rows, flips=flips_, failures=sorted(v.failures, key=lambda f: (
            f.side, f.rule or "", f.file or "", f.kind)),
        motivating=motivating, blockers=blocks, notes=notes,
        provenance=Provenance(
            base_ref=setup.base.ref, base_how=setup.base.how,
            base_commit=setup.base.commit.hexsha, head_commit=setup.head,
            working_tree_dirty=setup.dirty, engine_version=(v.info["base"] or {}).get(
                "engine_version", ""), engine_digest=engine_digest(),
            verifier_before=(v.info["base"] or {}).get("digest", ""),
            verifier_after=(v.info["candidate"] or {}).get("digest"),
            corpus_digest=corpus_digest, corpus_version=corpus_version(setup.workloads.parent),
            machine=machine(), gpu=gpu,
            links=source_links(setup.head, setup.prefix)),
        timing=Timing(cost=cost_, run=run))
