"""What a proposal changes: the base rulebook at a git ref, the proposed plugin files, the
plugins added, changed and removed, version bumps, and contract changes.

The base is read with GitPython from the commit's tree into a temporary directory; the
user's working tree is never written. Proposed files are placed by kind without importing
them (their syntax tree says what they are). Contract changes are the diff between the
base commit and the working tree under `cakegov/` (the engine), `corpus/workloads/`, a
corpus label that changed and a corpus file that was removed; a changed label or a removed
corpus file needs a stated reason."""

from __future__ import annotations

import ast
import difflib
import hashlib
import json
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import git

from cakegov.corpus.labels import LabelError, Labels, read_labels
from cakegov.govern.cache import plugin_hashes

RULES = "rules"
SYMLINK_MODE = 0o120000
KIND_DIRS = {"check": "checks", "primitive": "primitives", "target": "targets",
             "costmodel": "costmodel"}
DIR_KINDS = {v: k for k, v in KIND_DIRS.items()}
REASON_RE = re.compile(r"^\s*Reason:\s*(\S.*)$", re.M)
CHANGE_NOTES = "corpus/CHANGES.md"


class ProposalInputError(Exception):
    """The command cannot run as asked (bad ref, missing file, not a plugin): exit 2."""


@dataclass(frozen=True)
class BaseRef:
    """The base of a proposal: the ref as asked (or chosen) and its commit."""

    ref: str
    commit: git.Commit
    how: str  # why this ref: "--base", "HEAD", "merge base with main"


def open_repo(root: Path) -> git.Repo:
    try:
        return git.Repo(root, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise ProposalInputError(f"{root} is not inside a git repository: propose-rule "
                                 "compares against a commit") from None


def _default_branch(repo: git.Repo) -> str | None:
    try:
        target = repo.git.symbolic_ref("--short", "refs/remotes/origin/HEAD")
        if target:
            return target.strip()
    except git.GitCommandError:
        pass
    names = {h.name for h in repo.heads}
    return next((n for n in ("main", "master") if n in names), None)


def resolve_base(repo: git.Repo, ref: str | None) -> BaseRef:
    """`ref` as given, else HEAD on the default branch, else the merge base with it."""
    try:
        head = repo.head.commit
    except ValueError:
        raise ProposalInputError("the repository has no commit yet") from None
    if ref is not None:
        try:
            return BaseRef(ref, repo.commit(ref), "--base")
        except (git.BadName, git.BadObject, ValueError):
            raise ProposalInputError(f"no commit {ref!r} in {repo.working_tree_dir}") from None
    default = _default_branch(repo)
    branch = None if repo.head.is_detached else repo.active_branch.name
    if default is None or branch == default.split("/")[-1]:
        return BaseRef("HEAD", head, "HEAD")
    try:
        bases = repo.merge_base(head, default)
    except git.GitCommandError:  # e.g. a shallow clone without the fork point
        bases = []
    if not bases:
        return BaseRef("HEAD", head, f"HEAD (no merge base with {default})")
    return BaseRef(bases[0].hexsha, bases[0], f"merge base of HEAD and {default}")


def materialise(commit: git.Commit, subdir: str, dest: Path) -> bool:
    """Write the tree of `subdir` at `commit` into `dest`; False if it does not exist."""
    try:
        tree = commit.tree / subdir
    except KeyError:
        return False
    dest.mkdir(parents=True, exist_ok=True)
    for item in tree.traverse():
        if item.type != "blob" or item.mode == SYMLINK_MODE:
            continue
        target = dest / PurePosixPath(item.path).relative_to(subdir)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(item.data_stream.read())
    return True


DIFF_CAP = 4000


def blob_bytes(commit: git.Commit, path: str) -> bytes | None:
    try:
        return (commit.tree / path).data_stream.read()
    except KeyError:
        return None


def _diff(rel: str, before: bytes | None, after: bytes | None) -> str:
    a = (before or b"").decode("utf-8", errors="replace").splitlines(keepends=True)
    b = (after or b"").decode("utf-8", errors="replace").splitlines(keepends=True)
    text = "".join(difflib.unified_diff(a, b, f"base/{rel}", f"candidate/{rel}"))
    return text if len(text) <= DIFF_CAP else text[:DIFF_CAP] + "\n[diff cut]\n"


ACCEPT_PREFIX = 32  # hex digits: 128 bits, what fits in a GitHub label


def accepts(given: str | None, digest: str) -> bool:
    """Whether `given` (from --accept-contract) names this contract digest: the whole
    digest, or at least its first ACCEPT_PREFIX hex digits (a label holds 50 characters)."""
    given = (given or "").strip().lower()
    return len(given) >= ACCEPT_PREFIX and digest.startswith(given)


def contract_digest(rows: list[dict[str, Any]]) -> str:
    """The sha256 a maintainer passes to `--accept-contract`: it names every changed path
    with its before and after content hashes, so accepting one change accepts no other."""
    items = sorted((r["path"], r["change"], r.get("sha256_before"), r.get("sha256_after"))
                   for r in rows)
    return hashlib.sha256(json.dumps(items, separators=(",", ":")).encode()).hexdigest()


def blob_text(commit: git.Commit, path: str) -> str | None:
    try:
        return (commit.tree / path).data_stream.read().decode("utf-8", errors="replace")
    except KeyError:
        return None


# ---- proposed files ------------------------------------------------------------------

PLUGIN_CAP = 1 << 20  # bytes of one plugin file; the largest in the rulebook is ~40 KB


def plugin_text(path: Path) -> str:
    """The text of a plugin file the parent is asked to judge, read within bounds: a
    regular file (never a FIFO or a device), at most PLUGIN_CAP bytes, UTF-8. Anything
    else is a ProposalInputError (exit 2) naming the file, read no further."""
    import stat

    try:
        info = path.stat()
    except OSError as exc:
        raise ProposalInputError(f"{path}: cannot be read: {exc.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise ProposalInputError(f"{path}: not a regular file")
    if info.st_size > PLUGIN_CAP:
        raise ProposalInputError(f"{path}: {info.st_size} bytes, over {PLUGIN_CAP} bytes "
                                 "for one plugin file; not read")
    try:  # never through a symbolic link (one swapped in after the check above)
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ProposalInputError(f"{path}: cannot be read without following a link: "
                                 f"{exc.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        data = f.read(PLUGIN_CAP + 1)
    if len(data) > PLUGIN_CAP:
        raise ProposalInputError(f"{path}: over {PLUGIN_CAP} bytes for one plugin file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProposalInputError(f"{path}: not UTF-8 text (byte {exc.start}): a plugin is "
                                 "a UTF-8 .py or .toml file") from None


def parse_python(text: str, name: str) -> ast.Module:
    """ast.parse, with a nesting too deep for the parser (RecursionError, MemoryError)
    reported like a syntax error."""
    try:
        return ast.parse(text, name)
    except (RecursionError, MemoryError):
        raise SyntaxError("nested too deeply to parse") from None


def _python_kind(path: Path) -> str | None:
    """`check` or `primitive`, from the module's top-level names; never imported."""
    try:
        tree = parse_python(plugin_text(path), str(path))
    except (SyntaxError, ValueError) as exc:
        raise ProposalInputError(f"{path}: not valid Python, so its kind is unknown: "
                                 f"{exc}") from None
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.FunctionDef):
            names.add(node.name)
    if {"CODE", "check"} <= names:
        return "check"
    if {"SPELLING", "effects"} <= names:
        return "primitive"
    return None


def _toml_kind(path: Path) -> str | None:
    try:
        data = tomllib.loads(plugin_text(path))
    except (tomllib.TOMLDecodeError, RecursionError, MemoryError):
        return None
    return "target" if isinstance(data.get("target"), dict) else "costmodel"


def placement(path: Path, root: Path) -> tuple[str, str]:
    """(kind, relpath inside the rulebook) for a proposed file."""
    if not path.is_file():
        raise ProposalInputError(f"no such file: {path}")
    try:
        rel = path.resolve().relative_to((root / RULES).resolve())
    except ValueError:
        rel = None
    if rel is not None:
        parts = rel.parts
        if len(parts) != 2 or parts[0] not in DIR_KINDS:
            raise ProposalInputError(f"{path}: not a plugin location (rules/checks, "
                                     "rules/primitives, rules/targets, rules/costmodel)")
        plugin_text(path)  # bounded, UTF-8
        return DIR_KINDS[parts[0]], rel.as_posix()
    if path.suffix == ".py":
        kind = _python_kind(path)
        if kind is None:
            raise ProposalInputError(f"{path}: not a plugin: a check defines CODE and "
                                     "check(ctx), a primitive SPELLING and effects()")
    elif path.suffix == ".toml":
        kind = _toml_kind(path)
        if kind is None:
            raise ProposalInputError(f"{path}: not valid TOML")
    else:
        raise ProposalInputError(f"{path}: a plugin is a .py or .toml file")
    return kind, f"{KIND_DIRS[kind]}/{path.name}"


# ---- plugin changes ------------------------------------------------------------------

def semver(version: str | None) -> tuple[int, ...] | None:
    if version is None or not re.fullmatch(r"\d+\.\d+\.\d+", version):
        return None
    return tuple(int(p) for p in version.split("."))


def plugin_changes(base: dict[str, Any], cand: dict[str, Any], base_lock: dict[str, Any] | None
                   ) -> list[dict[str, Any]]:
    """Added, changed and removed plugins, each with its versions and whether the version
    was bumped against the base's rulebook.lock (or the base plugin when the lock lacks
    it). Unchanged plugins are left out."""
    before = {e["relpath"]: e for e in base["entries"]}
    after = {e["relpath"]: e for e in cand["entries"]}
    locked = (base_lock or {}).get("plugins", {})
    out: list[dict[str, Any]] = []
    for rel in sorted(set(before) | set(after)):
        b, a = before.get(rel), after.get(rel)
        if b is not None and a is not None and b["sha256"] == a["sha256"]:
            continue
        change = "added" if b is None else "removed" if a is None else "changed"
        entry = (a or b)
        old_version = (locked.get(rel) or {}).get("version") or (b or {}).get("version")
        row = {"relpath": rel, "kind": entry["kind"], "change": change,
               "version_before": b["version"] if b else None,
               "version_after": a["version"] if a else None,
               "sha256_before": b["sha256"] if b else None,
               "sha256_after": a["sha256"] if a else None, "problem": None}
        if change == "changed":
            new, old = semver(a["version"]), semver(old_version)
            if new is None or old is None or new <= old:
                row["problem"] = (f"content changed but VERSION {a['version']} is not "
                                  f"greater than {old_version} in the base's rulebook.lock; "
                                  "bump it (patch for a fix, minor for a new check)")
        out.append(row)
    return out


def declared_version(path: Path) -> str | None:
    """The VERSION a plugin file declares, read without running it: a module-level
    `VERSION = "..."` in Python, the `version` key in TOML. None when absent or not a
    plain string literal."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if path.suffix == ".toml":
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            return None
        value = data.get("version")
        for table in data.values():  # `[target] version = ...`, `[costmodel] ...`
            if value is None and isinstance(table, dict):
                value = table.get("version")
        return value if isinstance(value, str) else None
    return plugin_literal(path, "VERSION")


def plugin_literal(path: Path, name: str) -> str | None:
    try:
        tree = parse_python(plugin_text(path), str(path))
    except (ProposalInputError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name) and node.targets[0].id == name and \
                isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return node.value.value
    return None


_RULE_LITERALS = ("code", "name", "version", "severity", "status", "category")


def trusted_description(rules_dir: Path, hashes: dict[str, str]) -> dict[str, Any]:
    """A rulebook's description as the trusted parent reads it from the files (content
    hashes, and VERSION, CODE, NAME, SEVERITY, STATUS, CATEGORY as literals; nothing
    imported): the plugin entries, the verifier digest (Rulebook.digest's formula) and the
    literal metadata of every check plugin, keyed by its path."""
    from cakegov import __version__

    plugins: dict[str, dict[str, Any]] = {}
    rules: dict[str, dict[str, str | None]] = {}
    for rel, sha in sorted(hashes.items()):
        path = rules_dir / rel
        plugins[rel] = {"kind": DIR_KINDS[rel.split("/")[0]],
                        "version": declared_version(path), "sha256": sha}
        if rel.startswith("checks/"):
            rules[rel] = {key: plugin_literal(path, key.upper()) for key in _RULE_LITERALS}
    digest = hashlib.sha256(json.dumps({"engine": __version__, "plugins": plugins},
                                       sort_keys=True, separators=(",", ":")).encode()
                            ).hexdigest()
    return {"digest": digest, "rules": rules,
            "entries": [{"relpath": rel, **entry} for rel, entry in plugins.items()]}


def description_problems(claimed: dict[str, Any], trusted: dict[str, Any]) -> list[str]:
    """Where a worker's description of its rulebook (worker.describe, computed by code
    that proposed plugins can patch) disagrees with what the files say."""
    problems: list[str] = []
    if claimed.get("digest") != trusted["digest"]:
        problems.append(f"it reports verifier digest {str(claimed.get('digest'))[:16]}, its "
                        f"files make {trusted['digest'][:16]}")
    mine = {e["relpath"]: e for e in trusted["entries"]}
    listed = claimed.get("entries", ())
    theirs = {e.get("relpath"): e for e in (listed if isinstance(listed, list) else ())
              if isinstance(e, dict)}
    for rel in sorted(set(mine) | {r for r in theirs if isinstance(r, str)}):
        a, b = theirs.get(rel), mine.get(rel)
        if a is None or b is None:
            problems.append(f"rules/{rel}: {'missing from' if a is None else 'not a file of'}"
                            " its description")
            continue
        for key in ("kind", "version", "sha256"):
            if a.get(key) != b[key]:
                problems.append(f"rules/{rel}: it reports {key} {str(a.get(key))[:16]}, the "
                                f"file says {str(b[key])[:16]}")
    rules = claimed.get("rules", ())
    for rule in rules if isinstance(rules, list) else ():
        if not isinstance(rule, dict):
            continue
        literal = trusted["rules"].get(str(rule.get("relpath", "")))
        if literal is None:
            problems.append(f"rule {str(rule.get('code'))[:12]}: no check plugin file "
                            f"{str(rule.get('relpath'))[:60]}")
            continue
        for key in _RULE_LITERALS:
            if literal[key] is None:
                problems.append(f"rules/{rule['relpath']}: {key.upper()} is not a string "
                                "literal")
            elif rule.get(key) != literal[key]:
                problems.append(f"rules/{rule['relpath']}: it reports {key} "
                                f"{str(rule.get(key))[:16]}, the file declares {literal[key]}")
    return problems


def declared_rules(rules_dir: Path) -> dict[str, str]:
    """CODE -> NAME of every check plugin of `rules_dir`, read from the files as literals
    (nothing imported): the only codes a worker's findings may carry for that rulebook."""
    out: dict[str, str] = {}
    for path in sorted((rules_dir / "checks").glob("*.py")):
        code, name = plugin_literal(path, "CODE"), plugin_literal(path, "NAME")
        if code and name:
            out[code] = name
    return out


def stale_lock(rules_dir: Path) -> list[str]:
    """What makes `rules_dir`'s own rulebook.lock wrong for its plugin files, computed in
    the trusted parent from file hashes and literally declared versions (nothing is
    imported): the same conditions as `cakegov lock --check`."""
    lock = rules_dir / "rulebook.lock"
    try:
        data = json.loads(lock.read_text(encoding="utf-8"))
        locked = data["plugins"]
        if not isinstance(locked, dict):
            raise TypeError
    except (OSError, ValueError, KeyError, TypeError):
        return ["rules/rulebook.lock is missing or unreadable; run `cakegov lock`"]
    problems: list[str] = []
    hashes = plugin_hashes(rules_dir)
    for rel in sorted(set(locked) | set(hashes)):
        entry = locked.get(rel) if isinstance(locked.get(rel), dict) else None
        if rel not in hashes:
            problems.append(f"rules/{rel}: in the lock but not on disk")
            continue
        if entry is None:
            problems.append(f"rules/{rel}: not in the lock")
            continue
        version = declared_version(rules_dir / rel)
        if entry.get("sha256") != hashes[rel]:
            if entry.get("version") == version:
                problems.append(f"rules/{rel}: content changed without a version bump "
                                f"(still {version})")
            else:
                problems.append(f"rules/{rel}: version {entry.get('version')} -> {version} "
                                "is not recorded in the lock")
        elif entry.get("version") != version:
            problems.append(f"rules/{rel}: the lock says version {entry.get('version')}, the "
                            f"file declares {version}")
    return problems


# ---- contract changes ----------------------------------------------------------------

def _labels_or_none(text: str | None, where: str) -> Labels | None:
    if text is None:
        return None
    try:
        return read_labels(text, where)
    except LabelError:
        return None


def label_text(labels: Labels | None) -> str:
    if labels is None:
        return "(no valid label)"
    if labels.clean:
        return "clean"
    return ", ".join(f"{c}@{line}" for c, line in sorted(labels.expected, key=lambda x: x[1]))


def _reasons(repo: git.Repo, commit: git.Commit, root: Path) -> tuple[list[tuple[set[str],
             str, str]], list[str]]:
    """(files touched, message, reason) of each commit in base..HEAD with a `Reason:` line,
    and the lines of corpus/CHANGES.md."""
    commits = []
    try:
        for c in repo.iter_commits(f"{commit.hexsha}..HEAD"):
            msg = c.message if isinstance(c.message, str) else c.message.decode()
            m = REASON_RE.search(msg)
            if m:
                commits.append((set(c.stats.files), msg, m.group(1).strip()))
    except git.GitCommandError:
        pass
    notes = root / CHANGE_NOTES
    lines = notes.read_text(encoding="utf-8", errors="replace").splitlines() \
        if notes.is_file() else []
    return commits, lines


def _reason_for(rel: str, commits: list[tuple[set[str], str, str]], notes: list[str]
                ) -> str | None:
    short = rel.removeprefix("corpus/")
    for files, msg, reason in commits:
        if rel in files or rel in msg or short in msg:
            return f"commit message: {reason}"
    for line in notes:
        if (rel in line or short in line) and line.replace(rel, "").replace(short, "").strip(
                " -*#:`|\t"):
            return f"{CHANGE_NOTES}: {line.strip()}"
    return None


def contract_changes(repo: git.Repo, commit: git.Commit, root: Path) -> list[dict[str, Any]]:
    """Every contract change between `commit` and the working tree (see module doc)."""
    top = Path(repo.working_tree_dir or root).resolve()
    try:
        prefix = root.resolve().relative_to(top).as_posix()
    except ValueError:
        prefix = "."
    prefix = "" if prefix == "." else prefix + "/"
    changes: dict[str, str] = {}
    for d in commit.diff(None, paths=[prefix + "cakegov", prefix + "corpus"]):
        path = d.b_path if d.change_type != "D" else d.a_path
        changes[path.removeprefix(prefix)] = {"A": "added", "D": "removed"}.get(
            d.change_type, "modified")
    for path in repo.untracked_files:
        if path.startswith((prefix + "cakegov/", prefix + "corpus/")):
            changes[path.removeprefix(prefix)] = "added"
    commits, notes = _reasons(repo, commit, root)
    out: list[dict[str, Any]] = []
    for rel in sorted(changes):
        change = changes[rel]
        row: dict[str, Any] = {"path": rel, "change": change, "detail": "",
                               "needs_reason": False, "reason": None}
        if (root / rel).is_symlink():  # never followed: the link is the change
            target = os.readlink(root / rel)
            before = blob_bytes(commit, prefix + rel)
            link = f"symbolic link -> {target}\n".encode()
            row.update(kind="engine" if rel.startswith("cakegov/") else "corpus-added"
                       if change == "added" else "corpus-content", needs_reason=True,
                       detail=f"a symbolic link to {target!r}: refused, its target is not read",
                       sha256_before=hashlib.sha256(before).hexdigest()
                       if before is not None else None,
                       sha256_after=hashlib.sha256(link).hexdigest(),
                       diff=_diff(rel, before, link))
            row["reason"] = None
            out.append(row)
            continue
        if rel.startswith("cakegov/"):
            if "__pycache__" in rel:
                continue
            row.update(kind="engine", detail="engine code")
        elif rel.startswith("corpus/workloads/"):
            row.update(kind="workload", detail="reference semantics, inputs or tolerances")
        elif rel.endswith(".cake") and change == "removed":
            old = _labels_or_none(blob_text(commit, prefix + rel), rel)
            row.update(kind="corpus-removed", needs_reason=True,
                       detail=f"corpus case removed (its labels: {label_text(old)})")
        elif rel.endswith(".cake") and change == "modified":
            old = _labels_or_none(blob_text(commit, prefix + rel), rel)
            path = root / rel
            new = _labels_or_none(path.read_text(encoding="utf-8", errors="replace"), rel) \
                if path.is_file() else None
            if old == new:  # the expectation stayed: was the case defused?
                row.update(kind="corpus-content", needs_reason=True,
                           detail=f"schedule changed, labels kept ({label_text(new)}); "
                           "the old form is judged too")
            else:
                row.update(kind="label", needs_reason=True,
                           detail=f"label {label_text(old)} -> {label_text(new)}")
        elif rel.endswith(".cake") and change == "added":
            path = root / rel
            new = _labels_or_none(path.read_text(encoding="utf-8", errors="replace"), rel) \
                if path.is_file() else None
            row.update(kind="corpus-added", needs_reason=True,
                       detail=f"corpus case added (its labels: {label_text(new)})")
        else:
            continue
        before = blob_bytes(commit, prefix + rel)
        path = root / rel
        after = path.read_bytes() if path.is_file() else None
        row.update(sha256_before=hashlib.sha256(before).hexdigest() if before is not None
                   else None,
                   sha256_after=hashlib.sha256(after).hexdigest() if after is not None
                   else None,
                   diff=_diff(rel, before, after))
        if row["needs_reason"]:
            row["reason"] = _reason_for(rel, commits, notes)
        out.append(row)
    return out


TARGET_CAP = 1 << 20  # bytes of a target file read for its facts


def target_facts(data: bytes | None) -> dict[str, Any] | None:
    """A target file's hardware facts, `{limit: (value, unit)}` plus `target.name`, read
    as data (tomllib, nothing executed); None when the bytes are absent, too large or not
    a target. Sources, descriptions and versions are not facts."""
    import tomllib

    if data is None or len(data) > TARGET_CAP:
        return None
    try:
        table = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):
        return None
    head, limits = table.get("target"), table.get("limits")
    if not isinstance(head, dict) or not isinstance(limits, dict):
        return None
    facts: dict[str, Any] = {"target.name": head.get("name")}
    for key, entry in limits.items():
        facts[key] = ((entry.get("value"), entry.get("unit")) if isinstance(entry, dict)
                      else (entry, None))
    return facts


def _fact(value: Any) -> str:
    if isinstance(value, tuple):
        shown, unit = value
        return f"{shown!r} {unit}" if unit else repr(shown)
    return repr(value)


def target_changes(base_rules: Path, cand_rules: Path) -> list[dict[str, Any]]:
    """A target is a fact about a chip, not a policy: every target file of the candidate
    rulebook whose facts (limit values and units, the target's name) differ from the base's
    is a contract change (kind `target`) with its diff, blocking until a maintainer accepts
    it, like a change to the engine. A new or removed target file is one too. Edits of
    sources, descriptions or the version alone are not."""
    names = sorted({p.name for d in (base_rules, cand_rules)
                    for p in (d / "targets").glob("*.toml")})
    out: list[dict[str, Any]] = []
    for name in names:
        rel = f"{RULES}/targets/{name}"
        before_p, after_p = base_rules / "targets" / name, cand_rules / "targets" / name
        before = before_p.read_bytes() if before_p.is_file() else None
        after = after_p.read_bytes() if after_p.is_file() else None
        if before == after:
            continue
        old, new = target_facts(before), target_facts(after)
        if before is not None and after is not None and old is not None and old == new:
            continue
        change = "added" if before is None else "removed" if after is None else "modified"
        if old is None or new is None:
            what = {"added": "target added", "removed": "target removed"}.get(
                change, "target file is not readable as a target")
            facts = f"{what} ({max(0, len(new or old or {}) - 1)} fact(s))"
        else:
            diffs = [f"{k}: {_fact(old.get(k)) if k in old else 'absent'} -> "
                     f"{_fact(new.get(k)) if k in new else 'absent'}"
                     for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
            facts = "; ".join(diffs[:12]) + (f"; and {len(diffs) - 12} more"
                                             if len(diffs) > 12 else "")
        out.append({"path": rel, "change": change, "kind": "target",
                    "detail": f"hardware facts: {facts}", "needs_reason": False,
                    "reason": None,
                    "sha256_before": hashlib.sha256(before).hexdigest()
                    if before is not None else None,
                    "sha256_after": hashlib.sha256(after).hexdigest()
                    if after is not None else None,
                    "diff": _diff(rel, before, after)})
    return out


def rule_meta(rules_dir: Path) -> dict[str, dict[str, str | None]]:
    """code -> the literal CODE, NAME, STATUS and SEVERITY of each check plugin (read,
    never imported), with its relpath."""
    out: dict[str, dict[str, str | None]] = {}
    for path in sorted((rules_dir / "checks").glob("*.py")):
        code = plugin_literal(path, "CODE")
        if code is not None:
            out[code] = {"name": plugin_literal(path, "NAME"),
                         "status": plugin_literal(path, "STATUS"),
                         "severity": plugin_literal(path, "SEVERITY"),
                         "relpath": f"checks/{path.name}"}
    return out


def default_off(rules_dir: Path) -> frozenset[str]:
    """Codes of the check plugins `cakegov check` does not run by default (any status but
    `stable`): their findings reject nothing for a user who does not opt in."""
    return frozenset(code for code, meta in rule_meta(rules_dir).items()
                     if meta["status"] != "stable")


def _row(rel: str, kind: str, change: str, detail: str, before: bytes | None,
         after: bytes | None) -> dict[str, Any]:
    return {"path": rel, "change": change, "kind": kind, "detail": detail,
            "needs_reason": False, "reason": None,
            "sha256_before": hashlib.sha256(before).hexdigest() if before is not None else None,
            "sha256_after": hashlib.sha256(after).hexdigest() if after is not None else None,
            "diff": _diff(rel, before, after)}


def semantics_changes(base_rules: Path, cand_rules: Path) -> list[dict[str, Any]]:
    """Contract changes inside the rulebook that are not new policy:

    - a changed or removed primitive plugin (kind `primitive`): it is the language's
      semantics, what every rule sees of the calls that use it, so changing it changes
      verdicts of schedules the corpus may not hold; a new primitive is not a contract
      change (nothing used it before);
    - a stable rule demoted (kind `rule-status`): its STATUS leaves `stable` (so `cakegov
      check` stops running it by default) or its SEVERITY leaves `blocking` (so its
      findings stop rejecting)."""
    out: list[dict[str, Any]] = []
    for path in sorted((base_rules / "primitives").glob("*.py")):
        rel = f"{RULES}/primitives/{path.name}"
        before = path.read_bytes()
        cand = cand_rules / "primitives" / path.name
        after = cand.read_bytes() if cand.is_file() else None
        if before == after:
            continue
        change = "removed" if after is None else "modified"
        out.append(_row(rel, "primitive", change, f"primitive {path.stem} {change}: the "
                        "semantics every rule sees of its calls", before, after))
    base, cand_meta = rule_meta(base_rules), rule_meta(cand_rules)
    for code, old in sorted(base.items()):
        new = cand_meta.get(code)
        if new is None or old["status"] != "stable":
            continue
        what = []
        if new["status"] != "stable":
            what.append(f"status stable -> {new['status']} (no longer run by default)")
        if old["severity"] == "blocking" and new["severity"] != "blocking":
            what.append(f"severity blocking -> {new['severity']} (no longer rejects)")
        if not what:
            continue
        rel = f"{RULES}/{new['relpath']}"
        before = (base_rules / str(old["relpath"])).read_bytes()
        after = (cand_rules / str(new["relpath"])).read_bytes()
        out.append(_row(rel, "rule-status", "modified",
                        f"{code} {new['name']} demoted: {'; '.join(what)}", before, after))
    return out


def head_state(repo: git.Repo) -> tuple[str, bool]:
    """HEAD's commit and whether the working tree differs from it."""
    return repo.head.commit.hexsha, repo.is_dirty(untracked_files=True)
