"""Shared fixtures: the project's rulebook, workloads and a checker over them."""

from __future__ import annotations

from pathlib import Path

import pytest

from cakegov.check.rulebook import Rulebook
from cakegov.check.runner import Checker
from cakegov.corpus.workloads import load_workloads

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "rules"
CORPUS = ROOT / "corpus"
WORKLOADS = CORPUS / "workloads"


@pytest.fixture(scope="session")
def rulebook() -> Rulebook:
    return Rulebook.load(RULES)


@pytest.fixture(scope="session")
def workloads():
    return load_workloads(WORKLOADS)


@pytest.fixture(scope="session")
def checker(rulebook, workloads) -> Checker:
    return Checker(rulebook, workloads, preview=True)
