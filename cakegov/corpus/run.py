"""`cakegov corpus run`: every corpus item checked against its labels, and the quality of
the checker measured on the corpus and the mutation suite.

For each item (a `.cake` file under corpus/valid or corpus/invalid) the blocking and
coverage findings, as (code, line), must equal its `# expect:` labels; a `# todo-expect:`
label is a known gap: reported, not a failure, until the finding appears (then the label
must be promoted, and it is a mismatch). Measured:

- per rule: true positives (a labelled finding found), false positives (a finding no
  label asks for), false negatives (a label not found; known gaps counted apart),
  precision and recall;
- coverage: for each rule, the families whose invalid items label it (a rule covered in
  fewer than two families is listed);
- the `incomplete` rate over items;
- with the mutation suite (cakegov/corpus/suite.py): the **kill rate** (harmful mutants
  the checker rejects / harmful mutants), the **benign acceptance rate** (benign mutants
  it finds clean / benign mutants), the surviving harmful mutants grouped by operator and
  outcome, and the mutants whose outcome is unknown.

`--shard I/N` keeps every N-th item and mutant starting at the I-th (1-based), so a CI
matrix of N jobs covers everything once. `--jobs J` splits the (shard's) work the same way
over J worker processes on one machine and puts the results back in the order one process
gives them, so the output is the same whatever J is. Wall time is measured for the report
only; nothing is decided by it."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cakegov.check.rulebook import Rulebook
from cakegov.check.runner import Checker
from cakegov.corpus.labels import LabelError, read_labels
from cakegov.corpus.oracle import BENIGN, UNKNOWN
from cakegov.corpus.suite import Entry, regenerate, vocabulary
from cakegov.corpus.workloads import Workload

MIN_FAMILIES = 2


@dataclass
class Item:
    file: str
    family: str
    valid: bool
    verdict: str
    expected: list[str]  # "CODE@line"
    found: list[str]
    todo: list[str]
    status: str  # ok | mismatch | known gap | gap closed | unlabelled

    @property
    def failed(self) -> bool:
        return self.status in ("mismatch", "gap closed", "unlabelled")


@dataclass
class MutantResult:
    key: str
    operator: str
    outcome: str
    verdict: str
    line: int
    what: str

    @property
    def harmful(self) -> bool:
        return self.outcome not in (BENIGN, UNKNOWN)

    @property
    def killed(self) -> bool:
        return self.harmful and self.verdict == "rejected"


@dataclass
class RunResult:
    items: list[Item] = field(default_factory=list)
    mutants: list[MutantResult] = field(default_factory=list)
    rules: list[str] = field(default_factory=list)  # every rule code of the rulebook
    seconds: float = 0.0
    shard: tuple[int, int] = (1, 1)
    with_mutants: bool = False


def shard_of(things: list[Any], shard: tuple[int, int]) -> list[Any]:
    index, count = shard
    return [t for i, t in enumerate(things) if i % count == index - 1]


def _pairs(pairs: Iterable[tuple[str, int]]) -> list[str]:
    return sorted(f"{code}@{line}" for code, line in pairs)


def corpus_paths(corpus: Path) -> list[Path]:
    """Every corpus item, valid and invalid, in the order a run checks them."""
    return sorted(p for kind in ("valid", "invalid") for p in (corpus / kind).rglob("*.cake")
                  if p.is_file())


def check_item(checker: Checker, path: Path, corpus: Path) -> Item:
    rel = path.relative_to(corpus)
    kind, family = rel.parts[0], rel.parts[1] if len(rel.parts) > 2 else "-"
    data = path.read_bytes()
    result = checker.check_bytes(data, f"corpus/{rel.as_posix()}")
    found = {(f.code, f.span.line if f.span else 0) for f in result.findings
             if f.severity == "blocking" or f.authority == "coverage"}
    try:
        labels = read_labels(data.decode("utf-8", errors="replace"), str(rel))
    except LabelError:
        return Item(rel.as_posix(), family, kind == "valid", result.verdict, [],
                    _pairs(found), [], "unlabelled")
    expected, todo = set(labels.expected), set(labels.todo)
    if found & todo:
        status = "gap closed"
    elif found != expected or (kind == "valid") != labels.clean:
        status = "mismatch"
    else:
        status = "known gap" if todo else "ok"
    return Item(rel.as_posix(), family, kind == "valid", result.verdict, _pairs(expected),
                _pairs(found), _pairs(todo), status)


def run(corpus: Path, rulebook: Rulebook, workloads: Mapping[str, Workload], *,
        suite: list[Entry] | None = None, shard: tuple[int, int] = (1, 1),
        part: tuple[int, int] = (1, 1),
        advance: Callable[[int], None] | None = None,
        total: Callable[[int], None] | None = None) -> RunResult:
    """Check the corpus (and the suite's mutants, when given) as the module says; `part`
    (P, J) keeps the P-th of J parts of the shard (one worker of `run_jobs`)."""
    start = time.perf_counter()
    checker = Checker(rulebook, dict(workloads))
    paths = shard_of(shard_of(corpus_paths(corpus), shard), part)
    pairs = shard_of(shard_of(regenerate(corpus, suite, vocabulary(rulebook, workloads)),
                              shard), part) if suite is not None else []
    if total is not None:
        total(len(paths) + len(pairs))
    out = RunResult(rules=sorted(r.code for r in rulebook.rules), shard=shard,
                    with_mutants=suite is not None)
    for path in paths:
        out.items.append(check_item(checker, path, corpus))
        if advance is not None:
            advance(1)
    for entry, text in pairs:
        verdict = checker.check_bytes(text.encode("utf-8"),
                                      f"corpus/{entry.source}#{entry.operator}:{entry.site}")
        out.mutants.append(MutantResult(entry.key, entry.operator, entry.outcome,
                                        verdict.verdict, entry.line, entry.what))
        if advance is not None:
            advance(1)
    out.seconds = time.perf_counter() - start
    return out


def _run_part(corpus: Path, rules: Path, workloads: Path, with_suite: bool,
              shard: tuple[int, int], part: tuple[int, int]) -> RunResult:
    """One worker process of `run_jobs`: it loads the rulebook, workloads and suite
    itself (plugins are modules, not data to send) and runs its part."""
    from cakegov.check.rulebook import Rulebook
    from cakegov.corpus.suite import SUITE_NAME, load
    from cakegov.corpus.workloads import load_workloads

    suite = load(corpus / SUITE_NAME) if with_suite else None
    return run(corpus, Rulebook.load(rules), load_workloads(workloads), suite=suite,
               shard=shard, part=part)


def _interleave(parts: list[list[Any]]) -> list[Any]:
    """Undo `shard_of` over len(parts) parts: part p's k-th element was at k * J + p."""
    out: list[Any] = []
    for k in range(max((len(p) for p in parts), default=0)):
        out.extend(p[k] for p in parts if k < len(p))
    return out


def run_jobs(corpus: Path, rules: Path, workloads: Path, *, jobs: int,
             with_suite: bool = False, shard: tuple[int, int] = (1, 1),
             advance: Callable[[int], None] | None = None) -> RunResult:
    """`run` over `jobs` worker processes (each a part of the shard), merged into the
    order and the result one process gives; `advance(n)` as each part finishes."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    start = time.perf_counter()
    context = multiprocessing.get_context("spawn")  # no state of this process is shared
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        futures = [pool.submit(_run_part, corpus, rules, workloads, with_suite, shard,
                               (p, jobs)) for p in range(1, jobs + 1)]
        results = []
        for future in futures:
            results.append(future.result())
            if advance is not None:
                advance(len(results[-1].items) + len(results[-1].mutants))
    out = RunResult(items=_interleave([r.items for r in results]),
                    mutants=_interleave([r.mutants for r in results]),
                    rules=results[0].rules, shard=shard, with_mutants=with_suite)
    out.seconds = time.perf_counter() - start
    return out


# ---- metrics ----------------------------------------------------------------------------

def _codes(labels: list[str]) -> list[tuple[str, str]]:
    return [(x.split("@")[0], x) for x in labels]


def rule_table(result: RunResult) -> list[dict[str, Any]]:
    """Per rule: tp, fp, fn, known gaps, precision and recall (None when undefined)."""
    rows: dict[str, dict[str, Any]] = {
        code: {"rule": code, "tp": 0, "fp": 0, "fn": 0, "gaps": 0} for code in result.rules}

    def row(code: str) -> dict[str, Any]:
        return rows.setdefault(code, {"rule": code, "tp": 0, "fp": 0, "fn": 0, "gaps": 0})

    for item in result.items:
        expected, found = set(item.expected), set(item.found)
        for code, label in _codes(item.found):
            row(code)["tp" if label in expected else "fp"] += 1
        for code, label in _codes(item.expected):
            if label not in found:
                row(code)["fn"] += 1
        for code, label in _codes(item.todo):
            if label not in found:
                row(code)["gaps"] += 1
    for r in rows.values():
        r["precision"] = r["tp"] / (r["tp"] + r["fp"]) if r["tp"] + r["fp"] else None
        r["recall"] = r["tp"] / (r["tp"] + r["fn"]) if r["tp"] + r["fn"] else None
    return [rows[k] for k in sorted(rows)]


def coverage(result: RunResult) -> dict[str, list[str]]:
    """Rule code -> the families whose invalid items label it."""
    out: dict[str, set[str]] = {code: set() for code in result.rules}
    for item in result.items:
        if not item.valid:
            for code, _ in _codes(item.expected):
                out.setdefault(code, set()).add(item.family)
    return {code: sorted(fams) for code, fams in sorted(out.items())}


def _rate(num: int, den: int) -> float | None:
    return num / den if den else None


def diagnosis_rates(items: list[Item]) -> dict[str, Any]:
    """How often a rejection names the repair's cause: over the invalid items, the share
    whose every labelled code (`# expect:` and `# todo-expect:`) is found at its labelled
    line, and the share with a P099 finding (an anomaly no rule's repair removes)."""
    invalid = [i for i in items if not i.valid]
    labelled = [i for i in invalid if i.expected or i.todo]
    at_line = [i for i in labelled if set(i.expected) | set(i.todo) <= set(i.found)]
    p099 = [i for i in invalid if any(f.split("@")[0] == "P099" for f in i.found)]
    return {"named_at_line_rate": _rate(len(at_line), len(labelled)),
            "named_at_line": [len(at_line), len(labelled)],
            "p099_rate": _rate(len(p099), len(invalid)),
            "p099_items": [i.file for i in p099]}


def summary(result: RunResult) -> dict[str, Any]:
    items = result.items
    families = sorted({i.family for i in items})
    cov = coverage(result)
    out: dict[str, Any] = {
        "items": len(items),
        "valid": sum(1 for i in items if i.valid),
        "invalid": sum(1 for i in items if not i.valid),
        "families": families,
        "mismatches": [i.file for i in items if i.failed],
        "known_gaps": [f"{i.file}: {', '.join(i.todo)}" for i in items if i.todo],
        "incomplete_rate": _rate(sum(1 for i in items if i.verdict == "incomplete"),
                                 len(items)),
        **diagnosis_rates(items),
        "under_covered_rules": [code for code, fams in cov.items()
                                if len(fams) < MIN_FAMILIES],
        "seconds": round(result.seconds, 1),
        "shard": f"{result.shard[0]}/{result.shard[1]}",
    }
    if result.with_mutants:
        ms = result.mutants
        harmful = [m for m in ms if m.harmful]
        benign = [m for m in ms if m.outcome == BENIGN]
        survivors: dict[str, list[str]] = {}
        for m in harmful:
            if not m.killed:
                survivors.setdefault(f"{m.operator} / {m.outcome} / checker {m.verdict}",
                                     []).append(m.key)
        out["mutation"] = {
            "mutants": len(ms), "harmful": len(harmful), "benign": len(benign),
            "unknown": sum(1 for m in ms if m.outcome == UNKNOWN),
            "killed": sum(1 for m in harmful if m.killed),
            "kill_rate": _rate(sum(1 for m in harmful if m.killed), len(harmful)),
            "benign_accepted": sum(1 for m in benign if m.verdict == "clean"),
            "benign_acceptance_rate": _rate(sum(1 for m in benign if m.verdict == "clean"),
                                            len(benign)),
            "benign_rejected": [m.key for m in benign if m.verdict == "rejected"],
            "survivors": dict(sorted(survivors.items())),
        }
    return out


def failed(result: RunResult, min_kill_rate: float | None = None,
           max_benign_rejected: int = 0, min_at_line: float | None = None,
           max_p099: float | None = None) -> list[str]:
    """Why the run fails: label mismatches, more rejected benign mutants than allowed, a
    kill rate below the threshold, a share of invalid items named by their labelled code
    at their labelled line below `min_at_line`, a share of invalid items reported P099
    (no rule's repair fits) above `max_p099`. Empty when it passes."""
    s = summary(result)
    out = [f"label mismatch: {f}" for f in s["mismatches"]]
    at_line = s["named_at_line_rate"]
    if min_at_line is not None and at_line is not None and at_line < min_at_line:
        out.append(f"labelled code at the labelled line in {at_line:.1%} of invalid items, "
                   f"below {min_at_line:.1%}")
    p099 = s["p099_rate"]
    if max_p099 is not None and p099 is not None and p099 > max_p099:
        out.append(f"P099 on {p099:.1%} of invalid items ({', '.join(s['p099_items'][:3])}), "
                   f"above {max_p099:.1%}")
    mutation = s.get("mutation")
    if mutation:
        rejected = mutation["benign_rejected"]
        if len(rejected) > max_benign_rejected:
            out += [f"benign mutant rejected: {k}" for k in rejected]
        rate = mutation["kill_rate"]
        if min_kill_rate is not None and rate is not None and rate < min_kill_rate:
            out.append(f"kill rate {rate:.1%} below {min_kill_rate:.1%}")
    return out


def render_json(result: RunResult, min_kill_rate: float | None = None,
                max_benign_rejected: int = 0, min_at_line: float | None = None,
                max_p099: float | None = None) -> str:
    data = {"summary": summary(result), "rules": rule_table(result),
            "coverage": coverage(result), "items": [asdict(i) for i in result.items],
            "mutants": [asdict(m) for m in result.mutants] if result.with_mutants else None,
            "failures": failed(result, min_kill_rate, max_benign_rejected, min_at_line,
                               max_p099)}
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def render_text(result: RunResult, min_kill_rate: float | None = None,
                max_benign_rejected: int = 0, min_at_line: float | None = None,
                max_p099: float | None = None) -> str:
    s = summary(result)
    lines = [f"{s['items']} items ({s['valid']} valid, {s['invalid']} invalid) in "
             f"{len(s['families'])} families ({', '.join(s['families'])}), shard "
             f"{s['shard']}, {s['seconds']} s", ""]
    for item in result.items:
        if item.status != "ok":
            lines.append(f"  {item.status:<10} {item.file}: expected "
                         f"{', '.join(item.expected) or 'clean'}; found "
                         f"{', '.join(item.found) or 'nothing'}"
                         + (f"; known gaps {', '.join(item.todo)}" if item.todo else ""))
    lines += ["", f"{'rule':<6} {'tp':>4} {'fp':>4} {'fn':>4} {'gaps':>4} {'precision':>10} "
              f"{'recall':>7}  families"]
    cov = coverage(result)
    for r in rule_table(result):
        fams = cov.get(r["rule"], [])
        lines.append(f"{r['rule']:<6} {r['tp']:>4} {r['fp']:>4} {r['fn']:>4} {r['gaps']:>4} "
                     f"{_pct(r['precision']):>10} {_pct(r['recall']):>7}  "
                     f"{', '.join(fams) or '-'}")
    hit, labelled = s["named_at_line"]
    lines += ["", f"incomplete rate {_pct(s['incomplete_rate'])}; rules labelled in fewer "
              f"than {MIN_FAMILIES} families: {len(s['under_covered_rules'])}",
              f"labelled code at the labelled line: {_pct(s['named_at_line_rate'])} "
              f"({hit}/{labelled} invalid items); P099: {_pct(s['p099_rate'])} "
              f"({len(s['p099_items'])} invalid items"
              + (f": {', '.join(s['p099_items'][:3])}" if s["p099_items"] else "")
              + (", ..." if len(s["p099_items"]) > 3 else "") + ")"]
    m = s.get("mutation")
    if m:
        lines += ["", f"mutants {m['mutants']}: {m['harmful']} harmful, {m['benign']} benign, "
                  f"{m['unknown']} unknown outcome",
                  f"kill rate {_pct(m['kill_rate'])} ({m['killed']}/{m['harmful']}); benign "
                  f"acceptance {_pct(m['benign_acceptance_rate'])} "
                  f"({m['benign_accepted']}/{m['benign']})"]
        for group, keys in m["survivors"].items():
            lines.append(f"  survives: {group}: {len(keys)} ({', '.join(keys[:3])}"
                         + (", ..." if len(keys) > 3 else "") + ")")
        for key in m["benign_rejected"]:
            lines.append(f"  benign but rejected: {key}")
    problems = failed(result, min_kill_rate, max_benign_rejected, min_at_line, max_p099)
    lines += ["", "FAILED: " + "; ".join(problems[:5]) + (" ..." if len(problems) > 5 else "")
              if problems else "passed"]
    return "\n".join(lines) + "\n"
