"""The inputs of a proposal: base and candidate rulebook directories, the proposed files,
the labelled cases to judge and the contract changes, all known before any rulebook runs.

Proposed rule files are read as syntax trees (their `MOTIVATED_BY`), never imported here.
Motivating cases that live outside the corpus directories (e.g. next to a proposal in
`examples/proposals/corpus/`) join the judged cases as invalid cases."""

from __future__ import annotations

import ast
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cakegov.check.runner import expand_paths
from cakegov.corpus.labels import LabelError, Labels, read_label_file, read_labels
from cakegov.govern import changes
from cakegov.govern.cache import PLUGIN_GLOBS, plugin_hashes, sha256_bytes
from cakegov.govern.models import ProposalOptions, ProposedFile


@dataclass(frozen=True)
class Case:
    """One labelled schedule to judge."""

    rel: str
    path: Path
    sha256: str
    labels: Labels
    external: bool = False


@dataclass
class Setup:
    """Everything known before any rulebook runs."""

    root: Path
    base: changes.BaseRef
    rules: dict[str, Path]
    hashes: dict[str, dict[str, str]]
    mode: str
    proposed: list[ProposedFile]
    workloads: Path
    corpus_dirs: list[str]
    cases: list[Case]
    total: int
    unlabelled: list[str]
    external: list[str]
    base_lock: dict[str, Any] | None
    head: str
    dirty: bool
    contract: list[dict[str, Any]]
    motivating: dict[str, list[str]]  # changed check relpath -> MOTIVATED_BY
    lock_problems: list[str] = field(default_factory=list)  # the candidate's own lock
    prefix: str = ""  # the project root inside the git repository, "" or "sub/dir"
    # plugin files of the working tree's rules/ that differ from the base but are not
    # proposed (files mode): not judged, so the user is warned
    unproposed: list[str] = field(default_factory=list)
    # read from the plugin files here, while they exist (the rulebook directories are
    # temporary): per side the codes the default selection leaves out, and per candidate
    # rule code its MOTIVATED_BY
    default_off: dict[str, frozenset[str]] = field(default_factory=dict)
    symlinks: list[str] = field(default_factory=list)  # corpus paths refused, never read
    motivations: dict[str, list[str]] = field(default_factory=dict)


def _unresolved_rel(path: Path, root: Path) -> str:
    try:
        return Path(os.path.abspath(path)).relative_to(root).as_posix()
    except ValueError:
        return str(path)


def _linked(path: Path, root: Path) -> bool:
    """Whether reading `path` would follow a symbolic link (the file itself, or a directory
    on the way to it inside the project), or land outside the project."""
    absolute = Path(os.path.abspath(path))
    try:
        inside = absolute.relative_to(root)
    except ValueError:
        return False  # outside the project (an external motivating case): judged as given
    here = root
    for part in inside.parts:
        here = here / part
        if here.is_symlink():
            return True
    return not absolute.resolve().is_relative_to(root)


def _rel(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def motivated_by(path: Path) -> list[str]:
    """MOTIVATED_BY of a rule file, read from its syntax tree (never imported)."""
    try:
        tree = changes.parse_python(changes.plugin_text(path), str(path))
    except (changes.ProposalInputError, SyntaxError, ValueError):
        return []
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "MOTIVATED_BY" for t in node.targets):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                return []
            return [str(v) for v in value] if isinstance(value, tuple | list) else []
    return []


def _case(path: Path, root: Path, external: bool = False) -> Case | None:
    try:
        labels = read_label_file(path)
    except (LabelError, OSError, UnicodeDecodeError):
        return None
    return Case(_rel(path, root), path.resolve(), sha256_bytes(path.read_bytes()), labels,
                external)


def is_labelled_case(path: Path, root: Path) -> bool:
    """Whether `path` is a schedule with readable `# expect:` labels."""
    return path.suffix == ".cake" and _case(path, root) is not None


OLD_FORM = " (base version)"


def _old_forms(contract: list[dict], commit, prefix: str, into: Path) -> list[Case]:
    """Each labelled invalid case that the proposal changed or removed, in its base form:
    judged like any case, so that a case defused in place (or deleted) and then left
    uncaught by the candidate shows as a lost catch."""
    out: list[Case] = []
    for row in contract:
        if row["kind"] not in ("corpus-content", "label", "corpus-removed"):
            continue
        data = changes.blob_bytes(commit, prefix + row["path"])
        if data is None:
            continue
        try:
            labels = read_labels(data.decode("utf-8"), row["path"])
        except (LabelError, UnicodeDecodeError):
            continue
        if labels.clean:
            continue
        path = into / row["path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        out.append(Case(row["path"] + OLD_FORM, path.resolve(), sha256_bytes(data), labels))
    return out


def prepare(options: ProposalOptions, tmp: Path) -> Setup:
    """Base and candidate rulebook directories, the corpus, the contract changes."""
    root = options.root.resolve()
    repo = changes.open_repo(root)
    base = changes.resolve_base(repo, options.base)
    top = Path(repo.working_tree_dir or root).resolve()
    prefix = root.relative_to(top).as_posix() if root != top else ""
    sub = f"{prefix}/{changes.RULES}" if prefix else changes.RULES
    base_rules = tmp / "base" / "rules"
    if not changes.materialise(base.commit, sub, base_rules):
        raise changes.ProposalInputError(f"{sub}/ does not exist at {base.ref} "
                                         f"({base.commit.hexsha[:12]})")
    lock_text = changes.blob_text(base.commit, f"{sub}/rulebook.lock")
    try:
        base_lock = json.loads(lock_text) if lock_text else None
    except ValueError:
        base_lock = None
    proposed: list[ProposedFile] = []
    if options.paths:
        cand_rules = tmp / "candidate" / "rules"
        shutil.copytree(base_rules, cand_rules)
        seen: dict[str, str] = {}
        for path in options.paths:
            if path.is_symlink():
                raise changes.ProposalInputError(f"{path}: a symbolic link; a proposed "
                                                 "plugin must be a regular file (it is not "
                                                 "read)")
            kind, placed = changes.placement(path, root)
            if placed in seen:
                raise changes.ProposalInputError(f"{path} and {seen[placed]} would both be "
                                                 f"rules/{placed}")
            seen[placed] = str(path)
            (cand_rules / placed).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, cand_rules / placed)
            proposed.append(ProposedFile(source=_rel(path, root), placed_at=f"rules/{placed}",
                                         kind=kind, sha256=sha256_bytes(path.read_bytes())))
        mode = "files"
    else:
        cand_rules = root / changes.RULES
        if not (cand_rules / "checks").is_dir():
            raise changes.ProposalInputError(f"no rulebook at {cand_rules}")
        mode = "working-tree"
    for pattern in PLUGIN_GLOBS:  # bounded, UTF-8: before anything reads them whole
        for plugin in sorted(cand_rules.glob(pattern)):
            if plugin.is_symlink():
                raise changes.ProposalInputError(
                    f"{_unresolved_rel(plugin, root)}: a symbolic link; a rulebook plugin "
                    "must be a regular file (it is not read)")
            changes.plugin_text(plugin)
    hashes = {"base": plugin_hashes(base_rules), "candidate": plugin_hashes(cand_rules)}
    unproposed = (_unproposed(root / changes.RULES, hashes["base"], proposed)
                  if mode == "files" else [])
    motivating = {rel: motivated_by(cand_rules / rel) for rel, sha in
                  hashes["candidate"].items()
                  if rel.startswith("checks/") and hashes["base"].get(rel) != sha}

    dirs = options.corpus or [root / "corpus"]
    for d in dirs:
        if not d.exists():
            raise changes.ProposalInputError(f"no such corpus directory: {d}")
    cases: dict[str, Case] = {}
    unlabelled: list[str] = []
    links: list[str] = []
    for path in expand_paths(dirs):
        if "workloads" in path.parts:
            continue
        if _linked(path, root):  # never read: its content could be any file
            links.append(_rel(path, root) if not path.is_symlink() else
                         _unresolved_rel(path, root))
            continue
        case = _case(path, root)
        if case is None:
            unlabelled.append(_rel(path, root))
        else:
            cases[case.rel] = case
    external = []
    for entries in motivating.values():
        for entry in entries:
            path = root / entry
            if _linked(path, root):
                if entry not in links:
                    links.append(entry)
                continue
            if entry not in cases and path.is_file():
                case = _case(path, root, external=not entry.startswith("corpus/"))
                if case is not None:
                    cases[case.rel] = case
                    external.append(case.rel)
    contract = changes.contract_changes(repo, base.commit, root)
    contract += changes.target_changes(base_rules, cand_rules)
    contract += changes.semantics_changes(base_rules, cand_rules)
    for case in _old_forms(contract, base.commit, f"{prefix}/" if prefix else "", tmp / "old"):
        cases[case.rel] = case
    ordered = [cases[k] for k in sorted(cases)]
    total = len(ordered)
    if options.shard is not None:
        i, n = options.shard
        ordered = ordered[i - 1::n]
    if not ordered:
        raise changes.ProposalInputError("no labelled *.cake schedules to judge")
    head, dirty = changes.head_state(repo)
    return Setup(
        root=root, base=base, rules={"base": base_rules, "candidate": cand_rules},
        hashes=hashes, mode=mode, proposed=proposed, workloads=root / "corpus" / "workloads",
        corpus_dirs=[_rel(d, root) for d in dirs], cases=ordered, total=total,
        unlabelled=sorted(unlabelled), external=sorted(external), base_lock=base_lock,
        head=head, dirty=dirty, contract=contract,
        motivating=motivating, prefix=prefix,
        lock_problems=changes.stale_lock(cand_rules) if mode == "working-tree" else [],
        unproposed=unproposed,
        symlinks=sorted(set(links)),
        default_off={"base": changes.default_off(base_rules),
                     "candidate": changes.default_off(cand_rules)},
        motivations={code: motivated_by(cand_rules / str(meta["relpath"]))
                     for code, meta in changes.rule_meta(cand_rules).items()})


def _unproposed(work_rules: Path, base: dict[str, str], proposed: list[ProposedFile]
                ) -> list[str]:
    """`rules/<relpath>` of each plugin file the working tree changed, added or deleted
    relative to the base that is not among the proposed files (so not judged)."""
    if not (work_rules / "checks").is_dir():
        return []
    tree = plugin_hashes(work_rules)
    placed = {p.placed_at.removeprefix(f"{changes.RULES}/") for p in proposed}
    return [f"{changes.RULES}/{rel}" for rel in sorted(set(tree) | set(base))
            if rel not in placed and tree.get(rel) != base.get(rel)]


