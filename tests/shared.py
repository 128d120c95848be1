"""Results that several test files need, computed once per test session and shared.

Checking the whole corpus takes about a minute of CPU and simulating it five; before this
module, six test files checked it again and two simulated it again. Here a result is
stored on disk under a key made of everything that determines it, so the second file
that asks reads it back, and the pytest-xdist workers of one session share one store
(the directory above their own temporary directories).

Keys are content: the bytes of the schedule and the name it is checked under, the
rulebook's verifier digest and active rules, every workload's sha256, the engine's
source digest (`engine_digest`), and the options of the computation. A result computed
by other code or other inputs is never returned. The store lives only as long as the
session's temporary directory, so CI (a fresh checkout) computes everything once.

Two workers that need the same entry do not both compute it: each entry has a lock
file; a worker that finds it held moves on to the next entry and comes back at the end,
so two workers walking the same list split it between them."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import pickle
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from cakegov.govern.cache import engine_digest

T = TypeVar("T")
Item = TypeVar("Item")


def content_key(*parts: Any) -> str:
    """sha256 of the canonical JSON of `parts` plus the engine's source digest."""
    text = json.dumps([engine_digest(), *parts], sort_keys=True, separators=(",", ":"),
                      default=str)
    return hashlib.sha256(text.encode()).hexdigest()


class SharedStore:
    """Pickled values by key under one directory, written through a rename; a value is
    computed by one process while the others compute something else."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        self._memory: dict[str, Any] = {}
        self.computed = 0
        self.read = 0

    def _path(self, key: str) -> Path:
        return self.directory / f"{key}.pickle"

    def _load(self, key: str) -> tuple[bool, Any]:
        if key in self._memory:
            return True, self._memory[key]
        try:
            data = self._path(key).read_bytes()
        except FileNotFoundError:
            return False, None
        value = pickle.loads(data)
        self._memory[key] = value
        self.read += 1
        return True, value

    def _store(self, key: str, value: Any) -> None:
        self._memory[key] = value
        tmp = self.directory / f".{key}.{os.getpid()}.tmp"
        tmp.write_bytes(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
        os.replace(tmp, self._path(key))
        self.computed += 1

    def _compute_locked(self, key: str, compute: Callable[[], T], block: bool
                        ) -> tuple[bool, Any]:
        """(True, value) when this process holds the entry's lock (computing the value
        unless another process stored it meanwhile); (False, None) when `block` is False
        and another process holds it."""
        fd = os.open(self.directory / f"{key}.lock", os.O_CREAT | os.O_RDWR, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if block else fcntl.LOCK_NB))
            except BlockingIOError:
                return False, None
            found, value = self._load(key)
            if not found:
                value = compute()
                self._store(key, value)
            return True, value
        finally:
            os.close(fd)  # closing the descriptor releases the lock

    def get(self, key: str, compute: Callable[[], T]) -> T:
        found, value = self._load(key)
        if found:
            return value
        return self._compute_locked(key, compute, block=True)[1]

    def map(self, items: Iterable[Item], key: Callable[[Item], str],
            compute: Callable[[Item], T]) -> list[T]:
        """compute(item) for every item, in order; entries another process is computing
        are taken last (by then usually read back)."""
        items = list(items)
        out: dict[int, Any] = {}
        later: list[int] = []
        for i, item in enumerate(items):
            k = key(item)
            found, value = self._load(k)
            if not found:
                found, value = self._compute_locked(k, lambda item=item: compute(item),
                                                    block=False)
            if found:
                out[i] = value
            else:
                later.append(i)
        for i in later:
            out[i] = self.get(key(items[i]), lambda i=i: compute(items[i]))
        return [out[i] for i in range(len(items))]


def session_store(tmp_path_factory, name: str) -> SharedStore:
    """The store `name` of this test session, shared by its xdist workers (each worker's
    temporary directory is a child of the session's)."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    return SharedStore(base / "shared-results" / name)


def rulebook_identity(rulebook, active: Iterable[Any]) -> list[Any]:
    """What of a rulebook determines a check: its verifier digest (every plugin's version
    and sha256) and which rules run, by code and version."""
    return [rulebook.digest(), sorted((r.code, r.version) for r in active)]


def workloads_identity(workloads: dict) -> list[Any]:
    return sorted((name, wl.sha256) for name, wl in workloads.items())


def digest_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
