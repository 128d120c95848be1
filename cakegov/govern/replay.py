"""`cakegov audit replay`: re-judge stored candidates under the rulebook of another commit.

The rulebook at the git ref is read with GitPython into a temporary directory (the working
tree is never touched); every candidate source stored by `check --record` is checked again
with the options it was recorded with, and the verdicts and findings are compared with the
recorded ones. docs/ledger.md."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import git

from cakegov.check.findings import FileResult
from cakegov.check.rulebook import Rulebook
from cakegov.check.runner import Checker
from cakegov.corpus.workloads import Workload
from cakegov.govern.audit import finding_entry
from cakegov.govern.ledger import Ledger, LedgerRecord, canonical_json

SYMLINK_MODE = 0o120000


class ReplayError(Exception):
    """The ref, the repository or the rulebook at the ref cannot be used."""


@dataclass(frozen=True)
class RefRulebook:
    """The rulebook directory materialised from one commit."""

    ref: str
    commit: str
    root: Path


@contextmanager
def rulebook_at(ref: str, rules_dir: Path) -> Iterator[RefRulebook]:
    """Write the tree of `rules_dir` as it is at `ref` into a temporary directory."""
    rules_dir = rules_dir.resolve()
    try:
        repo = git.Repo(rules_dir.parent, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise ReplayError(f"{rules_dir.parent} is not inside a git repository") from None
    try:
        top = Path(repo.working_tree_dir or "").resolve()
        rel = PurePosixPath(rules_dir.relative_to(top).as_posix())
        commit = repo.commit(ref)
    except ValueError as exc:  # relative_to, or a malformed ref
        raise ReplayError(f"cannot resolve {ref!r}: {exc}") from None
    except (git.BadName, git.BadObject):
        raise ReplayError(f"no commit {ref!r} in {repo.working_tree_dir}") from None
    try:
        tree = commit.tree / rel.as_posix()
    except KeyError:
        raise ReplayError(f"{rel}/ does not exist at {ref} ({commit.hexsha[:12]})") from None
    with tempfile.TemporaryDirectory(prefix="cakegov-replay-") as tmp:
        root = Path(tmp) / "rules"
        root.mkdir()
        for item in tree.traverse():
            if item.type != "blob" or item.mode == SYMLINK_MODE:
                continue
            dest = root / PurePosixPath(item.path).relative_to(rel)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(item.data_stream.read())
        yield RefRulebook(ref=ref, commit=commit.hexsha, root=root)


@dataclass(frozen=True)
class ReplayChange:
    """One stored candidate whose verdict or findings differ under the other rulebook."""

    record_id: int
    file: str
    source_sha256: str
    before: str
    after: str
    appeared: tuple[dict[str, Any], ...]
    disappeared: tuple[dict[str, Any], ...]

    @property
    def verdict_changed(self) -> bool:
        return self.before != self.after

    def as_dict(self) -> dict[str, Any]:
        return {"record": self.record_id, "file": self.file, "source_sha256":
                self.source_sha256, "before": self.before, "after": self.after,
                "verdict_changed": self.verdict_changed, "appeared": list(self.appeared),
                "disappeared": list(self.disappeared)}


@dataclass
class ReplayResult:
    """Every change found by one replay."""

    ref: str
    commit: str
    verifier_digest: str
    candidates: int
    changes: list[ReplayChange] = field(default_factory=list)
    missing_sources: list[int] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"ref": self.ref, "commit": self.commit, "verifier_digest":
                self.verifier_digest, "candidates": self.candidates,
                "verdict_changes": sum(c.verdict_changed for c in self.changes),
                "changes": [c.as_dict() for c in self.changes],
                "missing_sources": self.missing_sources}


def candidates(ledger: Ledger) -> list[LedgerRecord]:
    """The latest check record per (source, options): what a replay re-judges."""
    latest: dict[str, LedgerRecord] = {}
    for record in ledger.records("check"):
        p = record.payload
        if p.get("source_sha256"):
            latest[canonical_json([p["source_sha256"], p.get("file"), p.get("options")])] = record
    return sorted(latest.values(), key=lambda r: r.id)


def _key(entry: dict[str, Any]) -> tuple[str, int]:
    return (str(entry.get("code")), entry.get("line") or 0)


def compare(record: LedgerRecord, result: FileResult) -> ReplayChange | None:
    """What differs between a recorded check and a new one; None when nothing does.

    A finding is identified by its code and line: the same code on the same line with a
    reworded message is not a change."""
    old = {_key(f): f for f in record.payload.get("findings", [])}
    new = {_key(e): e for e in (finding_entry(f) for f in result.findings)}
    appeared = tuple(new[k] for k in sorted(set(new) - set(old)))
    disappeared = tuple(old[k] for k in sorted(set(old) - set(new)))
    before = str(record.payload.get("verdict"))
    if before == result.verdict and not appeared and not disappeared:
        return None
    return ReplayChange(record.id, str(record.payload.get("file")),
                        str(record.payload.get("source_sha256")), before, result.verdict,
                        appeared, disappeared)


def replay(ledger: Ledger, book: Rulebook, workloads: dict[str, Workload], *,
           ref: str = "", commit: str = "") -> ReplayResult:
    """Re-check every candidate in `ledger` under `book` and collect the differences."""
    todo = candidates(ledger)
    out = ReplayResult(ref=ref, commit=commit, verifier_digest=book.digest(),
                       candidates=len(todo))
    checkers: dict[str, Checker] = {}
    for record in todo:
        p = record.payload
        try:
            source = ledger.blob(p["source_sha256"])
        except KeyError:
            out.missing_sources.append(record.id)
            continue
        opts = p.get("options") or {}
        key = canonical_json(opts)
        if key not in checkers:
            select = opts.get("select")
            checkers[key] = Checker(book, workloads, target_override=opts.get("target"),
                                    preview=bool(opts.get("preview")),
                                    only=frozenset(select) if select is not None else None)
        change = compare(record, checkers[key].check_bytes(source, str(p.get("file"))))
        if change is not None:
            out.changes.append(change)
    return out


def _finding_line(sign: str, f: dict[str, Any]) -> str:
    where = f"line {f['line']}" if f.get("line") else "no line"
    return f"    {sign} {f.get('code')} {where} ({f.get('severity')}): {f.get('message')}"


def render_replay(result: ReplayResult, show_all: bool = False) -> str:
    """The text report: each changed verdict with the findings that appeared or vanished."""
    flips = [c for c in result.changes if c.verdict_changed]
    quiet = [c for c in result.changes if not c.verdict_changed]
    lines = [f"replay under {result.ref} ({result.commit[:12]}, verifier "
             f"{result.verifier_digest[:16]}): {result.candidates} stored candidate(s), "
             f"{len(flips)} verdict(s) change, {len(quiet)} with changed findings only"]
    for change in flips + (quiet if show_all else []):
        lines.append(f"#{change.record_id} {change.file}: {change.before} -> {change.after}")
        lines += [_finding_line("+", f) for f in change.appeared]
        lines += [_finding_line("-", f) for f in change.disappeared]
    if quiet and not show_all:
        lines.append(f"({len(quiet)} candidate(s) with the same verdict but different "
                     "findings; --all lists them)")
    if result.missing_sources:
        lines.append("no stored source for record(s) "
                     + ", ".join(f"#{i}" for i in result.missing_sources))
    return "\n".join(lines) + "\n"
