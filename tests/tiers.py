"""The two test tiers: the quick tier (`pytest -m "not slow" -n 2`, a few minutes) for
each change, the whole suite (`bash .ci/run`) before stopping and in CI.

Tests that walk the whole corpus run, in the quick tier, on one family of it (valid and
invalid); the labels test also checks, for every code the corpus labels, the first
schedule labelled with it, so every rule is exercised through its labels. Everything else
is marked `slow` where it is and still runs in the whole suite."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest

from cakegov.corpus.labels import read_label_file

CORPUS = Path(__file__).resolve().parent.parent / "corpus"
QUICK_FAMILY = "knn"


def in_quick_family(path: Path) -> bool:
    """corpus/{valid,invalid}/<QUICK_FAMILY>/..."""
    return path.resolve().relative_to(CORPUS).parts[1:2] == (QUICK_FAMILY,)


def label_subset(paths: Iterable[Path]) -> set[Path]:
    """The quick family plus, for every labelled code, its first schedule."""
    paths = sorted(paths)
    first: dict[str, Path] = {}
    for path in paths:
        for code in sorted(read_label_file(path).codes):
            first.setdefault(code, path)
    return {p for p in paths if in_quick_family(p)} | set(first.values())


def corpus_params(paths: Iterable[Path], quick: Iterable[Path] | None = None) -> list:
    """`paths` as parameters, those outside `quick` (default: the quick family) marked
    slow."""
    paths = list(paths)
    keep = set(quick) if quick is not None else {p for p in paths if in_quick_family(p)}
    return [p if p in keep else pytest.param(p, marks=pytest.mark.slow) for p in paths]
