"""Plugin registry: discovers rules, primitives, targets and cost parameters from files.

Nothing is listed by hand: `rules/checks/*.py`, `rules/primitives/*.py`,
`rules/targets/*.toml` and `rules/costmodel/*.toml` are found on disk. Each rulebook loads
its Python plugins under module names unique to its directory, so two rulebooks (a base
commit and a proposal) live side by side in one process without sharing state."""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
import re
import sys
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from cakegov import __version__
from cakegov.ir.parse import PrimitiveSig
from cakegov.plugin import Arg

SEVERITIES = ("blocking", "report", "hint")
AUTHORITIES = ("legality", "estimate", "coverage")
STATUSES = ("preview", "stable", "deprecated")
# early: protocol rules whose repair is a one-expression edit that a broader repair of a
# main rule (a new wait) could mask; late: classify what main rules left; final: report
# the rest
PHASES = ("early", "main", "late", "final")
CODE_RE = re.compile(r"^[A-Z]{1,3}[0-9]{3}$")
NAME_RE = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
VERSION_RE = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+$")
DOC_SECTIONS = ("What it does", "Why is this bad?", "Failing example", "Passing example")
LOCK_NAME = "rulebook.lock"


class PluginError(Exception):
    """A plugin file is malformed; the message names the file."""

    def __init__(self, path: Path | str, message: str):
        super().__init__(f"{path}: {message}")
        self.path = str(path)
        self.message = message


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass(frozen=True)
class RulePlugin:
    """One verifier rule loaded from `rules/checks/<name>.py`."""

    code: str
    name: str
    version: str
    severity: str
    authority: str
    category: str
    status: str
    motivated_by: tuple[str, ...]
    doc: str
    relpath: str
    sha256: str
    check: Callable[..., Iterator[Any]]
    phase: str = "main"  # "final" rules run after all others and see their findings

    @property
    def summary(self) -> str:
        return self.doc.strip().splitlines()[0] if self.doc.strip() else ""

    def section(self, title: str) -> str:
        """The text of one docstring section (`What it does`, ...)."""
        return doc_sections(self.doc).get(title, "")


@dataclass(frozen=True)
class PrimitivePlugin:
    """One IR primitive loaded from `rules/primitives/<name>.py`."""

    name: str
    version: str
    spelling: str
    receiver: str | None
    args: tuple[Arg, ...]
    category: str
    doc: str
    relpath: str
    sha256: str
    effects: Callable[..., Any]
    simulate: Callable[..., Any] | None = None
    template: str | None = None  # CUDA call site (Jinja2), docs/lowering.md
    cost: Callable[..., Any] | None = None
    device: str | None = None  # CUDA device functions the template calls (Jinja2)
    requires: tuple[str, ...] = ()  # primitives whose DEVICE code the template also calls

    @property
    def sig(self) -> PrimitiveSig:
        return PrimitiveSig(name=self.name, spelling=self.spelling, args=self.args,
                            receiver=self.receiver)


@dataclass(frozen=True)
class Limit:
    value: int | float | str
    unit: str
    source: str


@dataclass(frozen=True)
class Target:
    """Hardware limits of one target, each value with its source."""

    name: str
    version: str
    description: str
    limits: dict[str, Limit]
    relpath: str
    sha256: str

    def __getitem__(self, key: str) -> Any:
        return self.limits[key].value

    def get(self, key: str, default: Any = None) -> Any:
        limit = self.limits.get(key)
        return default if limit is None else limit.value

    def source(self, key: str) -> str:
        return self.limits[key].source


@dataclass(frozen=True)
class TomlPlugin:
    """A TOML table plugin other than a target (cost-model parameters)."""

    name: str
    version: str
    data: dict[str, Any]
    relpath: str
    sha256: str


@dataclass(frozen=True)
class PluginEntry:
    relpath: str
    kind: str
    version: str
    sha256: str


@dataclass
class Rulebook:
    """All plugins of one rulebook directory."""

    root: Path
    rules: tuple[RulePlugin, ...] = ()
    primitives: dict[str, PrimitivePlugin] = field(default_factory=dict)
    targets: dict[str, Target] = field(default_factory=dict)
    costmodels: dict[str, TomlPlugin] = field(default_factory=dict)

    @classmethod
    def load(cls, root: Path | str) -> Rulebook:
        root = Path(root).resolve()
        if not root.is_dir():
            raise PluginError(root, "rulebook directory does not exist")
        book = cls(root=root)
        tag = hashlib.sha256(str(root).encode()).hexdigest()[:12]
        prims: dict[str, PrimitivePlugin] = {}
        for path in sorted((root / "primitives").glob("*.py")):
            prim = _load_primitive(path, root, tag)
            if prim.name in prims:
                raise PluginError(path, f"primitive `{prim.name}` is defined twice")
            prims[prim.name] = prim
        spellings: dict[str, str] = {}
        for prim in prims.values():
            if prim.spelling in spellings:
                raise PluginError(prim.relpath, f"spelling `{prim.spelling}` is also used by "
                                  f"{spellings[prim.spelling]}")
            spellings[prim.spelling] = prim.relpath
        rules = [_load_rule(p, root, tag) for p in sorted((root / "checks").glob("*.py"))]
        codes: dict[str, str] = {}
        for rule in rules:
            if rule.code in codes:
                raise PluginError(rule.relpath, f"code {rule.code} is also used by "
                                  f"{codes[rule.code]}")
            codes[rule.code] = rule.relpath
        # protocol rules classify what the exploration found: after the structural rules,
        # which can explain a schedule on their own
        book.rules = tuple(sorted(rules, key=lambda r: (PHASES.index(r.phase),
                                                        r.category == "protocol", r.code)))
        book.primitives = prims
        book.targets = {
            t.name: t for t in (_load_target(p, root) for p in
                                sorted((root / "targets").glob("*.toml")))
        }
        book.costmodels = {
            c.name: c for c in (_load_toml(p, root) for p in
                                sorted((root / "costmodel").glob("*.toml")))
        }
        return book

    def rule(self, code_or_name: str) -> RulePlugin | None:
        key = code_or_name.strip()
        for rule in self.rules:
            if key.upper() == rule.code or key == rule.name:
                return rule
        return None

    def spellings(self) -> dict[str, PrimitiveSig]:
        return {p.spelling: p.sig for p in self.primitives.values()}

    def entries(self) -> list[PluginEntry]:
        """Every plugin with its version and content hash, sorted by path."""
        out = [PluginEntry(r.relpath, "check", r.version, r.sha256) for r in self.rules]
        out += [PluginEntry(p.relpath, "primitive", p.version, p.sha256)
                for p in self.primitives.values()]
        out += [PluginEntry(t.relpath, "target", t.version, t.sha256)
                for t in self.targets.values()]
        out += [PluginEntry(c.relpath, "costmodel", c.version, c.sha256)
                for c in self.costmodels.values()]
        return sorted(out, key=lambda e: e.relpath)

    def lock_data(self) -> dict[str, Any]:
        return {
            "format": 1,
            "plugins": {
                e.relpath: {"kind": e.kind, "version": e.version, "sha256": e.sha256}
                for e in self.entries()
            },
        }

    def digest(self) -> str:
        """The verifier digest: engine version plus every plugin's version and hash."""
        payload = json.dumps(
            {"engine": __version__, "plugins": self.lock_data()["plugins"]},
            sort_keys=True, separators=(",", ":"),
        )
        return hashlib.sha256(payload.encode()).hexdigest()


def doc_sections(doc: str) -> dict[str, str]:
    """Split a plugin docstring into `## Section` parts keyed by title."""
    sections: dict[str, str] = {}
    current: str | None = None
    lines: list[str] = []
    for line in inspect.cleandoc(doc).splitlines():
        if line.startswith("## "):
            if current is not None:
                sections[current] = "\n".join(lines).strip()
            current, lines = line[3:].strip(), []
        elif current is not None:
            lines.append(line)
    if current is not None:
        sections[current] = "\n".join(lines).strip()
    return sections


def _exec_module(path: Path, root: Path, tag: str, kind: str) -> ModuleType:
    mod_name = f"_cakegov_rulebook_{tag}.{kind}.{path.stem.replace('-', '_')}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise PluginError(path.relative_to(root), "cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # a plugin that fails to import is reported, not raised
        sys.modules.pop(mod_name, None)
        raise PluginError(path.relative_to(root), f"failed to load: {exc!r}") from exc
    return module


def _require(module: ModuleType, relpath: str, name: str, kind: type | tuple) -> Any:
    if not hasattr(module, name):
        raise PluginError(relpath, f"missing `{name}`")
    value = getattr(module, name)
    if not isinstance(value, kind):
        raise PluginError(relpath, f"`{name}` has the wrong type ({type(value).__name__})")
    return value


def _load_rule(path: Path, root: Path, tag: str) -> RulePlugin:
    relpath = path.relative_to(root).as_posix()
    module = _exec_module(path, root, tag, "checks")
    code = _require(module, relpath, "CODE", str)
    name = _require(module, relpath, "NAME", str)
    version = _require(module, relpath, "VERSION", str)
    severity = _require(module, relpath, "SEVERITY", str)
    authority = getattr(module, "AUTHORITY", "legality")
    category = _require(module, relpath, "CATEGORY", str)
    status = _require(module, relpath, "STATUS", str)
    motivated = _require(module, relpath, "MOTIVATED_BY", (tuple, list))
    check = _require(module, relpath, "check", object)
    if not CODE_RE.match(code):
        raise PluginError(relpath, f"code {code!r} is not like `HW001`")
    if code.startswith("E"):
        raise PluginError(relpath, "codes starting with E are reserved for input errors")
    if name != path.stem or not NAME_RE.match(name):
        raise PluginError(relpath, f"NAME {name!r} must be kebab-case and equal the file name")
    if not VERSION_RE.match(version):
        raise PluginError(relpath, f"VERSION {version!r} is not MAJOR.MINOR.PATCH")
    if severity not in SEVERITIES:
        raise PluginError(relpath, f"SEVERITY must be one of {SEVERITIES}")
    if authority not in AUTHORITIES:
        raise PluginError(relpath, f"AUTHORITY must be one of {AUTHORITIES}")
    if status not in STATUSES:
        raise PluginError(relpath, f"STATUS must be one of {STATUSES}")
    phase = getattr(module, "PHASE", "main")
    if phase not in PHASES:
        raise PluginError(relpath, f"PHASE must be one of {PHASES}")
    if phase == "early" and category != "protocol":
        raise PluginError(relpath, "PHASE early is for protocol rules (they run after the "
                          "structural ones whatever their phase)")
    if not callable(check) or not inspect.isgeneratorfunction(check):
        raise PluginError(relpath, "`check(ctx)` must be a generator function")
    doc = module.__doc__ or ""
    sections = doc_sections(doc)
    missing = [s for s in DOC_SECTIONS if not sections.get(s)]
    if missing:
        raise PluginError(relpath, f"docstring lacks section(s): {', '.join(missing)}")
    return RulePlugin(
        code=code, name=name, version=version, severity=severity, authority=authority,
        category=category, status=status, motivated_by=tuple(motivated),
        doc=inspect.cleandoc(doc), relpath=relpath, sha256=sha256_file(path), check=check,
        phase=phase,
    )


def _load_primitive(path: Path, root: Path, tag: str) -> PrimitivePlugin:
    relpath = path.relative_to(root).as_posix()
    module = _exec_module(path, root, tag, "primitives")
    name = _require(module, relpath, "NAME", str)
    version = _require(module, relpath, "VERSION", str)
    spelling = _require(module, relpath, "SPELLING", str)
    args = _require(module, relpath, "ARGS", tuple)
    effects = _require(module, relpath, "effects", object)
    if name != path.stem.replace("-", "_"):
        raise PluginError(relpath, f"NAME {name!r} must equal the file name")
    if not VERSION_RE.match(version):
        raise PluginError(relpath, f"VERSION {version!r} is not MAJOR.MINOR.PATCH")
    if not re.match(r"^[a-z_]+\.[a-z_]+$", spelling):
        raise PluginError(relpath, "SPELLING is `lm.<name>` or `<kind>.<method>`")
    if not all(isinstance(a, Arg) for a in args):
        raise PluginError(relpath, "ARGS must be a tuple of `Arg`")
    receiver = getattr(module, "RECEIVER", None)
    if spelling.startswith("lm.") != (receiver is None):
        raise PluginError(relpath, "a method spelling needs RECEIVER; `lm.` spellings have none")
    if receiver is not None and receiver not in {a.name for a in args}:
        raise PluginError(relpath, f"RECEIVER {receiver!r} is not in ARGS")
    if not callable(effects):
        raise PluginError(relpath, "`effects(call, view)` must be callable")
    if not module.__doc__:
        raise PluginError(relpath, "a primitive needs a docstring")
    for attr in ("TEMPLATE", "DEVICE"):
        if not isinstance(getattr(module, attr, ""), str):
            raise PluginError(relpath, f"`{attr}` must be a string (a Jinja2 template)")
    simulate = getattr(module, "simulate", None)
    if simulate is not None and (not callable(simulate) or
                                 len(inspect.signature(simulate).parameters) != 2):
        raise PluginError(relpath, "`simulate(op, sim)` must be a function of two arguments")
    if getattr(module, "TEMPLATE", None) and simulate is None:
        # what the emitter prints, the CPU simulator executes (docs/simulator.md)
        raise PluginError(relpath, "a primitive with a CUDA TEMPLATE needs its numpy "
                          "semantics, `simulate(op, sim)`")
    requires = getattr(module, "REQUIRES", ())
    if not (isinstance(requires, tuple) and all(isinstance(r, str) for r in requires)):
        raise PluginError(relpath, "`REQUIRES` must be a tuple of primitive names")
    return PrimitivePlugin(
        name=name, version=version, spelling=spelling, receiver=receiver, args=args,
        category=getattr(module, "CATEGORY", "misc"), doc=inspect.cleandoc(module.__doc__),
        relpath=relpath, sha256=sha256_file(path), effects=effects,
        simulate=simulate, template=getattr(module, "TEMPLATE", None),
        cost=getattr(module, "cost", None), device=getattr(module, "DEVICE", None),
        requires=requires,
    )


def _read_toml(path: Path, root: Path) -> tuple[str, dict[str, Any]]:
    relpath = path.relative_to(root).as_posix()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise PluginError(relpath, f"invalid TOML: {exc}") from exc
    return relpath, data


def _load_target(path: Path, root: Path) -> Target:
    relpath, data = _read_toml(path, root)
    head = data.get("target")
    if not isinstance(head, dict) or head.get("name") != path.stem:
        raise PluginError(relpath, "needs a [target] table whose name equals the file name")
    version = str(head.get("version", ""))
    if not VERSION_RE.match(version):
        raise PluginError(relpath, "[target] version is not MAJOR.MINOR.PATCH")
    limits: dict[str, Limit] = {}
    for key, entry in (data.get("limits") or {}).items():
        if not isinstance(entry, dict) or "value" not in entry or not entry.get("source"):
            raise PluginError(relpath, f"limit `{key}` needs `value` and `source`")
        limits[key] = Limit(value=entry["value"], unit=str(entry.get("unit", "")),
                            source=str(entry["source"]))
    return Target(name=path.stem, version=version, description=str(head.get("description",
                  "")), limits=limits, relpath=relpath, sha256=sha256_file(path))


def _load_toml(path: Path, root: Path) -> TomlPlugin:
    relpath, data = _read_toml(path, root)
    version = str(data.get("version", ""))
    if not VERSION_RE.match(version):
        raise PluginError(relpath, "needs a top-level `version = \"MAJOR.MINOR.PATCH\"`")
    return TomlPlugin(name=path.stem, version=version, data=data, relpath=relpath,
                      sha256=sha256_file(path))
