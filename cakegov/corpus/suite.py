"""The standing mutation suite, `corpus/MUTANTS.json`: every mutant of the valid corpus by
every defect operator, each labelled by its dynamic outcome (cakegov/corpus/oracle.py).

Stored compactly: an entry names its origin (corpus-relative path and the origin's
sha256), the operator and the site index (cakegov/corpus/mutate.py), the mutant's
schedule identity (the canonical-IR sha256, cakegov/ir/canonical.py; the text's sha256
when it does not parse) and its outcome. The mutant's text is not stored: `regenerate`
derives it from the origin and checks the identity, so a changed origin or operator makes
the suite stale (an error naming the entry), never silently different.

Mutants are deduplicated by schedule identity, across all origins: two edits that mean
the same schedule are one mutant, and an edit that leaves the origin's meaning unchanged
(an equivalent mutant) is dropped."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cakegov.check.rulebook import Rulebook
from cakegov.corpus.mutate import OPERATORS, Mutant, MutateError, mutant_at, mutants
from cakegov.corpus.oracle import outcome
from cakegov.corpus.workloads import Workload
from cakegov.ir.canonical import schedule_sha256
from cakegov.ir.errors import InputError
from cakegov.ir.parse import Vocabulary, parse_bytes

SUITE_NAME = "MUTANTS.json"
FORMAT = 1


class SuiteError(Exception):
    """The suite file is unreadable, malformed or stale for the corpus on disk."""


@dataclass(frozen=True)
class Entry:
    source: str  # corpus-relative path of the origin
    source_sha256: str
    operator: str
    site: int
    line: int
    what: str
    identity: str
    outcome: str  # benign | launch failure | deadlock | race | ... | unknown
    detail: str

    @property
    def key(self) -> str:
        return f"{self.source}:{self.operator}:{self.site}"


def identity(text: str, vocab: Vocabulary) -> str:
    """Schedule identity of `text`: its canonical IR's sha256, or `text:<sha256>` of the
    text when it does not parse."""
    try:
        return schedule_sha256(parse_bytes(text.encode("utf-8"), vocab))
    except InputError:
        return "text:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def vocabulary(rulebook: Rulebook, workloads: Mapping[str, Workload]) -> Vocabulary:
    return Vocabulary(primitives=rulebook.spellings(),
                      workloads={n: w.sig for n, w in workloads.items()})


def origins(corpus: Path) -> list[Path]:
    """The valid corpus schedules, in path order: the suite's origins."""
    return sorted(p for p in (corpus / "valid").rglob("*.cake") if p.is_file())


@dataclass(frozen=True)
class Planned:
    source_sha256: str
    mutant: Mutant
    identity: str


def plan(corpus: Path, rulebook: Rulebook, workloads: Mapping[str, Workload], *,
         operators: Iterable[str] | None = None,
         sources: Iterable[Path] | None = None) -> list[Planned]:
    """Every deduplicated mutant of the origins (the valid corpus by default)."""
    vocab = vocabulary(rulebook, workloads)
    ops = list(operators) if operators else list(OPERATORS)
    paths = sorted(sources) if sources is not None else origins(corpus)
    texts = {p: p.read_text(encoding="utf-8") for p in paths}
    seen = {identity(t, vocab) for t in texts.values()}
    out: list[Planned] = []
    for path, text in texts.items():
        try:
            rel = path.resolve().relative_to(corpus.resolve()).as_posix()
        except ValueError:
            rel = str(path)
        try:
            found = mutants(text, rel, ops)
        except MutateError:
            continue
        sha = hashlib.sha256(path.read_bytes()).hexdigest()
        for m in found:
            ident = identity(m.text, vocab)
            if ident not in seen:
                seen.add(ident)
                out.append(Planned(sha, m, ident))
    return out


def label(planned: Iterable[Planned], rulebook: Rulebook,
          workloads: Mapping[str, Workload], *, seeds: int = 3,
          advance: Callable[[int], None] | None = None) -> list[Entry]:
    """Each planned mutant with its dynamic outcome (cakegov/corpus/oracle.py)."""
    out = []
    for p in planned:
        m = p.mutant
        o = outcome(m.text.encode("utf-8"), m.source, rulebook, workloads, seeds=seeds)
        out.append(Entry(m.source, p.source_sha256, m.operator, m.site, m.line, m.what,
                         p.identity, o.kind, o.detail))
        if advance is not None:
            advance(1)
    return out


_LOADED: dict[tuple[Path, Path], tuple[Rulebook, Mapping[str, Workload]]] = {}


def _label_part(rules: Path, workloads: Path, seeds: int,
                part: list[tuple[int, Planned]]) -> list[tuple[int, Entry]]:
    """One worker process of `label_jobs`: it loads the rulebook and workloads itself
    (plugins are modules, not data to send) and labels its part."""
    from cakegov.corpus.workloads import load_workloads

    key = (rules, workloads)
    if key not in _LOADED:  # once per worker process, not once per part
        _LOADED[key] = (Rulebook.load(rules), load_workloads(workloads))
    book, wls = _LOADED[key]
    entries = label([p for _, p in part], book, wls, seeds=seeds)
    return [(i, e) for (i, _), e in zip(part, entries, strict=True)]


def label_jobs(planned: Iterable[Planned], rules: Path, workloads: Path, *, jobs: int,
               seeds: int = 3, chunk: int = 4,
               advance: Callable[[int], None] | None = None) -> list[Entry]:
    """`label` over `jobs` worker processes: the same entries in the same order (each
    outcome depends on its mutant alone, never on which process labelled it or when)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    todo = list(enumerate(planned))
    if not todo:
        return []
    parts = [todo[k:k + chunk] for k in range(0, len(todo), chunk)]
    found: dict[int, Entry] = {}
    context = multiprocessing.get_context("spawn")  # no state of this process is shared
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        futures = [pool.submit(_label_part, rules, workloads, seeds, part) for part in parts]
        for future in as_completed(futures):
            done = future.result()
            found.update(done)
            if advance is not None:
                advance(len(done))
    return [found[i] for i in range(len(todo))]


_SIM_ANALYSIS = ("protocol.py", "ctas.py", "cluster.py", "footprint.py", "semantics.py")


def oracle_digest(corpus: Path, rulebook: Rulebook) -> str:
    """What the outcomes depend on: the workloads, the primitive and target plugins, and
    the engine code that lowers, simulates and judges a launch (the parser's changes show
    in the schedule identities; the checker's do not matter). Entries labelled under
    the same digest are reused by `cakegov corpus mutate --suite`."""
    from cakegov.govern.cache import digest_json, tree_digest

    engine = Path(__file__).resolve().parent.parent
    plugins = [(e.relpath, e.sha256) for e in rulebook.entries()
               if e.kind in ("primitive", "target")]
    return digest_json({
        "workloads": tree_digest(corpus / "workloads", ("*.py",)),
        "plugins": plugins,
        "engine": [tree_digest(engine / d, ("*.py", "*.j2")) for d in ("sim", "lower")]
        + [tree_digest(engine / "corpus", ("oracle.py", "workloads.py"))]
        # what the simulator takes from the analysis: shapes (ragged, carried), CTA
        # classes, footprints and the proxy / group semantics
        + [tree_digest(engine / "analysis", _SIM_ANALYSIS)],
    })


def reuse(previous: list[Entry], planned: Iterable[Planned]) -> tuple[list[Entry],
                                                                        list[Planned]]:
    """(entries kept, mutants still to label): a planned mutant whose identity an entry
    of an equally labelled suite already has keeps that entry, moved to its new key."""
    by_identity = {e.identity: e for e in previous}
    kept, todo = [], []
    for p in planned:
        old = by_identity.get(p.identity)
        if old is None:
            todo.append(p)
            continue
        m = p.mutant
        kept.append(Entry(m.source, p.source_sha256, m.operator, m.site, m.line, m.what,
                          p.identity, old.outcome, old.detail))
    return kept, todo


def load_oracle(path: Path) -> str | None:
    try:
        return json.loads(path.read_text(encoding="utf-8")).get("oracle")
    except (OSError, ValueError, AttributeError):
        return None


def render(entries: list[Entry], oracle: str = "") -> str:
    data = {"format": FORMAT, "operators": sorted(OPERATORS), "oracle": oracle,
            "mutants": [asdict(e) for e in sorted(entries, key=lambda e: (
                e.source, e.operator, e.site))]}
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def load(path: Path) -> list[Entry]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SuiteError(f"{path}: cannot read ({exc.strerror}); run `cakegov corpus "
                         "mutate --suite`") from None
    except ValueError as exc:
        raise SuiteError(f"{path}: not JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise SuiteError(f"{path}: not a format-{FORMAT} mutation suite")
    fields = set(Entry.__dataclass_fields__)
    out = []
    for i, raw in enumerate(data.get("mutants") or []):
        if not isinstance(raw, dict) or set(raw) != fields:
            raise SuiteError(f"{path}: mutant {i} does not have the fields "
                             f"{', '.join(sorted(fields))}")
        out.append(Entry(**raw))
    return out


def regenerate(corpus: Path, entries: list[Entry], vocab: Vocabulary) -> list[tuple[Entry,
                                                                                  str]]:
    """(entry, mutant text) for every entry; SuiteError names the first stale one."""
    return [(e, m.text) for e, m in _mutants_of(corpus, entries, vocab)]


def _mutants_of(corpus: Path, entries: list[Entry],
                vocab: Vocabulary) -> list[tuple[Entry, Mutant]]:
    texts: dict[str, tuple[str, str]] = {}
    out = []
    for e in entries:
        if e.source not in texts:
            path = corpus / e.source
            try:
                data = path.read_bytes()
            except OSError:
                raise SuiteError(f"mutant {e.key}: origin corpus/{e.source} is gone; run "
                                 "`cakegov corpus mutate --suite`") from None
            texts[e.source] = (hashlib.sha256(data).hexdigest(), data.decode("utf-8"))
        sha, text = texts[e.source]
        if sha != e.source_sha256:
            raise SuiteError(f"mutant {e.key}: corpus/{e.source} changed since the suite was "
                             "generated; run `cakegov corpus mutate --suite`")
        if e.operator not in OPERATORS:
            raise SuiteError(f"mutant {e.key}: unknown operator {e.operator!r}")
        m = mutant_at(text, e.source, e.operator, e.site)
        if m is None or identity(m.text, vocab) != e.identity:
            raise SuiteError(f"mutant {e.key}: the operator no longer yields the stored "
                             "schedule; run `cakegov corpus mutate --suite`")
        out.append((e, m))
    return out


def replan(corpus: Path, entries: list[Entry], vocab: Vocabulary) -> list[Planned]:
    """The stored entries as mutants to label again, in their order: exactly the suite's
    keys (SuiteError names the first stale one, as `regenerate` does)."""
    return [Planned(e.source_sha256, m, e.identity)
            for e, m in _mutants_of(corpus, entries, vocab)]


def summary(entries: list[Entry]) -> dict[str, Any]:
    by_outcome: dict[str, int] = {}
    for e in entries:
        by_outcome[e.outcome] = by_outcome.get(e.outcome, 0) + 1
    return {"mutants": len(entries), "outcomes": dict(sorted(by_outcome.items()))}
