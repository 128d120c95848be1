"""What proposed code changed that it was never given: the checkout, the cache, the ledger.

Without a sandbox (the fallback) a plugin runs as the gate's own user, so it can write
anything the gate can: the judged checkout (a defused corpus file, a deleted
`rules/rulebook.lock`), the result cache, the report directory and the audit ledger. The
gate cannot prevent those writes there; it detects them. Before any proposed code runs the
parent takes a `Snapshot`:

- every tracked and untracked (not ignored) file under the project root, and the parts of
  `.git` that decide what a later git command does (HEAD, config, refs, hooks, info), by
  content hash; ignored directories the gate itself reads or writes (`.cakegov/`, the
  report directory, the cache directory) are walked in full;
- the ledger's head: its record count and last hash (or, for a file that is not a ledger,
  its bytes' hash).

After the last worker is reaped, `Snapshot.compare` lists every difference the parent did
not make itself (its own cache writes are `excuse`d by path and content): files added,
changed or removed, records appended to the ledger (foreign: only the parent appends, and
it appends nothing while proposed code runs) and a ledger whose records up to the head
were rewritten. Any difference blocks the proposal; the gate then records no verdict, only
a `tamper` record that names the foreign records, and `audit verify` fails on them.

Under bwrap none of these paths is writable (or visible) to a worker; the comparison runs
in both modes, so a sandbox that leaks is caught too. docs/governance.md, threat model."""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Parts of .git that change what a later git command runs or resolves; objects are
# content-addressed (a new one changes nothing that a ref does not name), and the index,
# logs and lock files are rewritten by git itself.
GIT_WATCHED = ("HEAD", "config", "packed-refs", "refs", "hooks", "info", "modules")
SKIP_NAMES = frozenset({"__pycache__", ".git"})
MAX_FILES = 200_000  # a checkout beyond this is hashed up to it, and says so
SHOWN = 20


def _sha(path: Path) -> str:
    """sha256 of a regular file, the target of a symlink (never followed), or a marker."""
    try:
        if path.is_symlink():
            return "symlink:" + os.readlink(path)
        digest = hashlib.sha256()
        with path.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
        return digest.hexdigest()
    except OSError as exc:
        return f"unreadable:{type(exc).__name__}"


def _walk(directory: Path, skip: frozenset[str] = SKIP_NAMES) -> list[Path]:
    out: list[Path] = []
    if not directory.is_dir() or directory.is_symlink():
        return out
    for base, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if d not in skip)
        for name in sorted(files):
            out.append(Path(base) / name)
            if len(out) >= MAX_FILES:
                return out
    return out


def _git_listed(root: Path) -> list[Path] | None:
    """Tracked and untracked, not ignored, files of the git work tree at `root`."""
    if not (root / ".git").exists():
        return None
    try:
        run = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached",
                              "--others", "--exclude-standard"], capture_output=True,
                             timeout=120, check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    if run.returncode != 0:
        return None
    names = [n for n in run.stdout.decode("utf-8", "surrogateescape").split("\0") if n]
    return [root / n for n in names[:MAX_FILES]]


def _git_meta(root: Path) -> list[Path]:
    git = root / ".git"
    if not git.is_dir():
        return [git] if git.exists() else []
    out: list[Path] = []
    for name in GIT_WATCHED:
        path = git / name
        if path.is_dir() and not path.is_symlink():
            out += _walk(path, frozenset())
        elif path.exists() or path.is_symlink():
            out.append(path)
    return out


@dataclass(frozen=True)
class LedgerMark:
    """The ledger's state: `count` records ending in `head`, or `raw` (the file's bytes'
    hash) when it is absent (`exists` false) or not readable as a ledger."""

    path: str
    exists: bool
    count: int = 0
    head: str = ""
    raw: str = ""


def mark_ledger(path: Path | None) -> LedgerMark | None:
    if path is None:
        return None
    from cakegov.govern.ledger import Ledger

    if not path.exists():
        return LedgerMark(str(path), False)
    try:
        with contextlib.closing(Ledger.open_readonly(path)) as book:
            count, head = book.head()
        return LedgerMark(str(path), True, count, head)
    except Exception:  # LedgerError, OSError, sqlite3 errors of a damaged file
        return LedgerMark(str(path), True, raw=_sha(path))


@dataclass
class Tamper:
    """What changed behind the gate's back."""

    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    foreign: list[dict[str, Any]] = field(default_factory=list)  # {"id", "hash", "kind"}
    ledger: str = ""  # what happened to the ledger besides appended records

    def __bool__(self) -> bool:
        return bool(self.added or self.changed or self.removed or self.foreign or self.ledger)

    @property
    def files(self) -> list[str]:
        return sorted({*self.added, *self.changed, *self.removed})

    def message(self) -> str:
        parts = []
        for what, names in (("changed", self.changed), ("removed", self.removed),
                            ("added", self.added)):
            if names:
                shown = ", ".join(names[:SHOWN])
                more = f" and {len(names) - SHOWN} more" if len(names) > SHOWN else ""
                parts.append(f"{what} {shown}{more}")
        if self.foreign:
            ids = ", ".join(str(r["id"]) for r in self.foreign[:SHOWN])
            more = f" and {len(self.foreign) - SHOWN} more" if len(self.foreign) > SHOWN else ""
            parts.append(f"appended ledger record(s) {ids}{more}")
        if self.ledger:
            parts.append(self.ledger)
        return ("while proposed code ran, something other than the gate " + "; ".join(parts)
                + ". Without a sandbox a plugin runs as the gate's user and can write there; "
                "the gate detects it and records no verdict for this run. Restore the "
                "checkout and judge the proposal again with --require-sandbox")

    def payload(self) -> dict[str, Any]:
        return {"added": self.added, "changed": self.changed, "removed": self.removed,
                "foreign": self.foreign, "ledger": self.ledger}


class Snapshot:
    """The state of what proposed code may not touch, taken before it runs."""

    def __init__(self, root: Path, ledger: Path | None = None,
                 extra: tuple[Path, ...] = (), cache: Path | None = None):
        self.root = root.resolve()
        self.ledger_path = ledger.resolve() if ledger is not None else None
        self.extra = tuple(p.resolve() for p in extra)
        # the proposal cache; with $CAKEGOV_CACHE_DIR it shares its directory with the
        # `cakegov check` result cache (`check/`), which other processes may write any time
        self.cache = cache.resolve() if cache is not None else None
        self._excused: dict[Path, str] = {}
        self.files = self._hash_all(self._listing())
        self.ledger = mark_ledger(self.ledger_path)

    def _ledger_files(self) -> set[Path]:
        if self.ledger_path is None:
            return set()
        name = self.ledger_path.name
        return {self.ledger_path.with_name(name + s) for s in ("", "-wal", "-shm", "-journal")}

    def _listing(self) -> set[Path]:
        listed = _git_listed(self.root)
        if listed is None:
            listed = _walk(self.root, SKIP_NAMES | {".cakegov", ".venv"})
        paths = {*listed, *_git_meta(self.root)}
        for directory in (self.root / ".cakegov", *self.extra):
            paths.update(_walk(directory, frozenset({"__pycache__"})))
        if self.cache is not None:
            paths.update(_walk(self.cache, frozenset({"__pycache__", "check"})))
        return paths - self._ledger_files()

    def _name(self, path: Path) -> str:
        with contextlib.suppress(ValueError):
            return path.relative_to(self.root).as_posix()
        return str(path)

    def _hash_all(self, paths: set[Path]) -> dict[str, str]:
        return {self._name(p): _sha(p) for p in sorted(paths)}

    def excuse(self, path: Path, sha256: str) -> None:
        """The parent itself wrote `path` with content `sha256` (a cache entry)."""
        self._excused[path.resolve()] = sha256

    def compare(self) -> Tamper:
        """Differences since the snapshot that the parent did not make."""
        out = Tamper()
        now_paths = self._listing()
        names = {self._name(p): p for p in now_paths}
        for name, path in self._root_paths(self.files).items():
            names.setdefault(name, path)
        excused = {self._name(p): sha for p, sha in self._excused.items()}
        for name in sorted(names):
            before = self.files.get(name)
            path = names[name]
            exists = path.exists() or path.is_symlink()
            after = _sha(path) if exists else None
            if after is not None and excused.get(name) == after:
                continue
            if before is None and after is not None:
                out.added.append(name)
            elif before is not None and after is None:
                out.removed.append(name)
            elif before != after:
                out.changed.append(name)
        self._compare_ledger(out)
        return out

    def _root_paths(self, files: dict[str, str]) -> dict[str, Path]:
        return {name: (Path(name) if Path(name).is_absolute() else self.root / name)
                for name in files}

    def _compare_ledger(self, out: Tamper) -> None:
        before = self.ledger
        if before is None:
            return
        after = mark_ledger(Path(before.path))
        assert after is not None
        if not before.exists:
            if after.exists:
                if after.raw:
                    out.ledger = f"created {before.path}, not a readable ledger"
                else:
                    out.foreign = _records(Path(before.path), 0)
            return
        if not after.exists:
            out.ledger = f"removed the ledger {before.path}"
            return
        if before.raw or after.raw:
            if before.raw != after.raw:
                out.ledger = f"changed {before.path}, which is not a readable ledger"
            return
        at = _record_at(Path(before.path), before.count) if before.count else None
        if before.count and (at is None or at != before.head):
            now = "is missing" if at is None else f"has {at[:16]}"
            out.ledger = (f"rewrote the ledger {before.path}: record {before.count} had hash "
                          f"{before.head[:16]} and now {now}")
            return
        if after.count > before.count:
            out.foreign = _records(Path(before.path), before.count)


def _record_at(path: Path, rid: int) -> str | None:
    from cakegov.govern.ledger import Ledger

    try:
        with contextlib.closing(Ledger.open_readonly(path)) as book:
            rec = book.record(rid)
    except Exception:  # a damaged ledger reads as "no such record"
        return None
    return rec.hash if rec is not None else None


def _records(path: Path, after_id: int) -> list[dict[str, Any]]:
    from cakegov.govern.ledger import Ledger

    try:
        with contextlib.closing(Ledger.open_readonly(path)) as book:
            rows = book._conn.execute("SELECT id, hash, kind FROM records WHERE id > ? "
                                      "ORDER BY id", (after_id,)).fetchall()
    except Exception:  # a damaged ledger: its new records cannot be listed
        return [{"id": after_id + 1, "hash": "", "kind": "unreadable"}]
    return [{"id": int(r[0]), "hash": str(r[1]), "kind": str(r[2])[:40]} for r in rows]
