"""Where a cakegov project is: the directory that holds `rules/` and `corpus/`, and the
rulebook and workload directories a command uses by default. Standard library only: the
start-up path of `cakegov check` resolves them before anything heavy is imported."""

from __future__ import annotations

import os
from pathlib import Path


def project_root(start: Path | None = None) -> Path | None:
    """The nearest directory at or above `start` that holds `rules/` and `corpus/`."""
    here = (start or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        if (candidate / "rules" / "checks").is_dir() and (candidate / "corpus").is_dir():
            return candidate
    return None


def default_rules() -> Path | None:
    """`$CAKEGOV_RULES`, else `rules/` of the enclosing project, else None."""
    if os.environ.get("CAKEGOV_RULES"):
        return Path(os.environ["CAKEGOV_RULES"])
    root = project_root()
    return None if root is None else root / "rules"


def default_workloads() -> Path | None:
    """`$CAKEGOV_WORKLOADS`, else `corpus/workloads` of the enclosing project, else None."""
    if os.environ.get("CAKEGOV_WORKLOADS"):
        return Path(os.environ["CAKEGOV_WORKLOADS"])
    root = project_root()
    return None if root is None else root / "corpus" / "workloads"
