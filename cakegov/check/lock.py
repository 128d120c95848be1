"""`rules/rulebook.lock`: the version and sha256 of every plugin.

`cakegov lock` writes it; `cakegov lock --check` fails when a plugin's content changed
without a version bump, or when the lock does not describe the files on disk."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cakegov.check.rulebook import LOCK_NAME, Rulebook
from cakegov.fsio import atomic_write

__all__ = ["atomic_write", "check_lock", "lock_path", "read_lock", "render_lock", "write_lock"]


def lock_path(rulebook: Rulebook) -> Path:
    return rulebook.root / LOCK_NAME


def render_lock(rulebook: Rulebook) -> str:
    return json.dumps(rulebook.lock_data(), indent=2, sort_keys=True) + "\n"


def write_lock(rulebook: Rulebook) -> Path:
    path = lock_path(rulebook)
    atomic_write(path, render_lock(rulebook))
    return path


def read_lock(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("plugins"), dict) else None


def check_lock(rulebook: Rulebook, locked: dict[str, Any] | None = None) -> list[str]:
    """Problems that make the lock wrong for the plugins on disk; empty when it is right.

    `locked` defaults to the lock file in the rulebook directory."""
    if locked is None:
        locked = read_lock(lock_path(rulebook))
        if locked is None:
            return [f"{lock_path(rulebook)}: missing or unreadable; run `cakegov lock`"]
    problems: list[str] = []
    old = locked["plugins"]
    new = rulebook.lock_data()["plugins"]
    for relpath in sorted(set(old) | set(new)):
        before, after = old.get(relpath), new.get(relpath)
        if before is None:
            problems.append(f"{relpath}: not in the lock; run `cakegov lock`")
        elif after is None:
            problems.append(f"{relpath}: in the lock but not on disk; run `cakegov lock`")
        elif before.get("sha256") != after["sha256"]:
            if before.get("version") == after["version"]:
                problems.append(
                    f"{relpath}: content changed without a version bump (still "
                    f"{after['version']}); bump VERSION, then run `cakegov lock`"
                )
            else:
                problems.append(f"{relpath}: version {before.get('version')} -> "
                                f"{after['version']} is not recorded; run `cakegov lock`")
    return problems
