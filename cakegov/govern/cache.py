"""The proposal cache: results of checking one schedule with one rulebook, on disk.

An entry is keyed by what determines its content: the schedule's source bytes (findings
carry line numbers, so the source hash, not the canonical IR hash, is the identity here),
its path (findings name the file), the sha256 of every plugin file of the rulebook, the
engine's source digest, the workloads and the isolation limits. Entries live under
`.cakegov/cache/` as one JSON file each, written through a temporary file and a rename, so
concurrent runs never see half an entry. A corrupt or foreign entry is a miss."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

from cakegov.fsio import atomic_write

CACHE_FORMAT = 1
ENV_VAR = "CAKEGOV_CACHE_DIR"
PLUGIN_GLOBS = ("checks/*.py", "primitives/*.py", "targets/*.toml", "costmodel/*.toml")


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def digest_json(value: Any) -> str:
    """sha256 of the canonical JSON of `value`."""
    return sha256_bytes(json.dumps(value, sort_keys=True, separators=(",", ":")).encode())


def plugin_hashes(rules_dir: Path) -> dict[str, str]:
    """relpath -> sha256 of every plugin file of a rulebook directory (nothing imported)."""
    out: dict[str, str] = {}
    for pattern in PLUGIN_GLOBS:
        for path in sorted(rules_dir.glob(pattern)):
            out[path.relative_to(rules_dir).as_posix()] = sha256_bytes(path.read_bytes())
    return out


def tree_digest(directory: Path, patterns: Iterable[str]) -> str:
    """sha256 over the relative paths and contents of the files matching `patterns`."""
    items: list[tuple[str, str]] = []
    for pattern in patterns:
        for path in directory.rglob(pattern):
            if path.is_file() and "__pycache__" not in path.parts:
                items.append((path.relative_to(directory).as_posix(),
                              sha256_bytes(path.read_bytes())))
    return digest_json(sorted(items))


@cache
def engine_digest() -> str:
    """sha256 over the engine's own source (cakegov/**/*.py and templates): a cache entry
    made by other engine code is never reused."""
    package = Path(__file__).resolve().parent.parent
    return tree_digest(package, ("*.py", "*.j2", "*.json"))


def default_dir(root: Path) -> Path:
    env = os.environ.get(ENV_VAR)
    return Path(env) if env else root / ".cakegov" / "cache"


class ResultCache:
    """JSON entries by key under one directory; `enabled=False` makes every lookup a miss
    and every store a no-op."""

    def __init__(self, directory: Path, enabled: bool = True):
        self.directory = directory
        self.enabled = enabled
        self.hits = 0
        self.misses = 0
        self.written: dict[Path, str] = {}  # path -> sha256 of what this process stored

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        if not self.enabled:
            self.misses += 1
            return None
        try:
            data = json.loads(self._path(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = None
        if not isinstance(data, dict) or data.get("format") != CACHE_FORMAT \
                or data.get("key") != key:
            self.misses += 1
            return None
        self.hits += 1
        return data["value"]

    def put(self, key: str, value: dict[str, Any]) -> None:
        if not self.enabled:
            return
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            text = json.dumps({"format": CACHE_FORMAT, "key": key, "value": value},
                              sort_keys=True, separators=(",", ":"))
            atomic_write(path, text)
            self.written[path] = sha256_bytes(text.encode("utf-8"))
        except OSError:  # a read-only or full disk costs speed, never a wrong result
            pass
