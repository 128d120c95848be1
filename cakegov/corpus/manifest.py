"""`corpus/MANIFEST.json`: every corpus case with its sha256, labels, known gaps and origin
(hand-written, transcription, agent, mutant: cakegov/corpus/labels.py), every workload
file with its sha256, and the sha256 of the mutation suite (corpus/MUTANTS.json).
`cakegov corpus manifest` writes it, `--check` fails when it does not describe the files
on disk, so a corpus change is always a visible, reviewed diff of this one file
(CODEOWNERS covers corpus/)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from cakegov.corpus.labels import LabelError, read_labels

MANIFEST_NAME = "MANIFEST.json"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build(corpus: Path) -> dict[str, Any]:
    """The manifest of the corpus directory as it is on disk."""
    cases: dict[str, Any] = {}
    for path in sorted(corpus.rglob("*.cake")):
        if "workloads" in path.relative_to(corpus).parts or not path.is_file():
            continue
        rel = path.relative_to(corpus).as_posix()
        entry: dict[str, Any] = {"sha256": _sha(path)}
        try:
            labels = read_labels(path.read_text(encoding="utf-8", errors="replace"), rel)
            entry["labels"] = "clean" if labels.clean else sorted(
                f"{code}@{line}" for code, line in labels.expected)
            entry["origin"] = labels.origin
            if labels.todo:
                entry["known_gaps"] = sorted(f"{code}@{line}" for code, line in labels.todo)
        except LabelError as exc:
            entry["labels"] = f"unlabelled: {exc}"
        cases[rel] = entry
    workloads = {p.relative_to(corpus).as_posix(): _sha(p)
                 for p in sorted((corpus / "workloads").glob("*.py")) if p.is_file()}
    suite = corpus / "MUTANTS.json"
    return {"format": 2, "cases": cases, "workloads": workloads,
            "mutation_suite": _sha(suite) if suite.is_file() else None}


def version(corpus: Path) -> str | None:
    """The corpus version: the sha256 of the manifest that describes the files on disk
    (equal to the committed corpus/MANIFEST.json's when that is current), or None when
    `corpus` holds no corpus."""
    if not (corpus / "valid").is_dir() and not (corpus / "invalid").is_dir():
        return None
    return hashlib.sha256(render(build(corpus)).encode("utf-8")).hexdigest()


def render(manifest: dict[str, Any]) -> str:
    return json.dumps(manifest, indent=2, sort_keys=True) + "\n"


def problems(corpus: Path) -> list[str]:
    """What makes corpus/MANIFEST.json wrong for the files on disk; empty when right."""
    path = corpus / MANIFEST_NAME
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return [f"{path}: missing or unreadable; run `cakegov corpus manifest`"]
    actual = build(corpus)
    out: list[str] = []
    for section in ("cases", "workloads"):
        have, want = stored.get(section) or {}, actual[section]
        for rel in sorted(set(have) | set(want)):
            if rel not in want:
                out.append(f"corpus/{rel}: in the manifest but not on disk")
            elif rel not in have:
                out.append(f"corpus/{rel}: not in the manifest")
            elif have[rel] != want[rel]:
                out.append(f"corpus/{rel}: content or labels differ from the manifest")
    if stored.get("format") != actual["format"]:
        out.append(f"{path}: format {stored.get('format')}, expected {actual['format']}; run "
                   "`cakegov corpus manifest`")
    if stored.get("mutation_suite") != actual["mutation_suite"]:
        out.append("corpus/MUTANTS.json: differs from the manifest; run `cakegov corpus "
                   "manifest`")
    return out
