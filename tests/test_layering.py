"""The command layer's shape (docs/layout.md): cakegov/cli.py only builds the app, one
module per command group under cakegov/commands/ on one shared module below them, and
imports that point down only, with what a one-file check loads kept to what it runs."""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import pytest

from .conftest import ROOT

PACKAGE = ROOT / "cakegov"
COMMANDS = PACKAGE / "commands"


def _imports(path, text: str | None = None) -> set[str]:
    """Every module `path` imports, at module level or inside a function, as an absolute
    dotted name (`from cakegov.commands import shared` counts as cakegov.commands.shared)."""
    tree = ast.parse(path.read_text(encoding="utf-8") if text is None else text)
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return found


def _is_command_layer(name: str) -> bool:
    return name == "cakegov.cli" or name.startswith("cakegov.commands")


def test_nothing_below_imports_the_command_layer():
    """Only the console entry point (launch) imports cakegov.cli, and nothing outside
    the command layer imports a command module: the layer sits on top."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("cakegov/commands/") or rel in ("cakegov/cli.py",):
            continue
        up = sorted(n for n in _imports(path) if _is_command_layer(n))
        if rel == "cakegov/launch.py":
            up = [n for n in up if n not in ("cakegov.cli", "cakegov.cli.run_argv")]
        if up:
            offenders.append(f"{rel}: {', '.join(up)}")
    assert not offenders, offenders


def test_command_modules_import_only_the_shared_module_below_them():
    for path in sorted(COMMANDS.glob("*.py")):
        names = {n for n in _imports(path) if _is_command_layer(n)}
        if path.name == "shared.py":
            assert not names, f"shared.py imports {names}: it must sit below every command"
            continue
        stray = {n for n in names if not n.startswith("cakegov.commands.shared")}
        assert not stray, f"{path.name} imports {sorted(stray)}"


def test_sizes_stay_small():
    cli = (PACKAGE / "cli.py").read_text(encoding="utf-8").count("\n")
    assert cli < 200, f"cakegov/cli.py has {cli} lines: it only builds the app"
    for path in COMMANDS.glob("*.py"):
        n = path.read_text(encoding="utf-8").count("\n")
        assert n <= 500, f"{path.name} has {n} lines (at most 500: split the group)"


def test_every_command_module_is_registered_and_every_registration_exists():
    """The registry in cli.py names each command and group once, and each module's
    COMMANDS/GROUPS hold exactly what the registry says lives there: a command defined
    and never registered (or registered from the wrong module) fails here."""
    import importlib

    from cakegov import cli

    registry = {}
    for kind, table in (("COMMANDS", cli.COMMANDS), ("GROUPS", cli.GROUPS)):
        for name, module in table:
            assert (kind, name) not in registry, f"{name} registered twice"
            registry[(kind, name)] = module
    held = {}
    for path in sorted(COMMANDS.glob("*.py")):
        if path.stem in ("__init__", "shared"):
            continue
        mod = importlib.import_module(f"cakegov.commands.{path.stem}")
        for kind in ("COMMANDS", "GROUPS"):
            for name in getattr(mod, kind, {}):
                held[(kind, name)] = path.stem
    assert held == registry


def _loaded(argv: list[str]) -> set[str]:
    """The modules a fresh `cakegov ARGV` process has loaded when it exits."""
    probe = ("import atexit, sys\n"
             "atexit.register(lambda: sys.__stderr__.write('\\nMODULES ' + ' '.join("
             "sorted(sys.modules)) + '\\n'))\n"
             f"sys.argv = ['cakegov', *{argv!r}]\n"
             "from cakegov.launch import main\n"
             "main()\n")
    env = {**os.environ, "CAKEGOV_NO_CACHE": "1", "COLUMNS": "100"}
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=False)
    line = next(ln for ln in done.stderr.splitlines() if ln.startswith("MODULES "))
    return set(line.split()[1:])


def _tops(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


@pytest.mark.parametrize("argv", [["--help"], ["check", "--help"], ["audit", "--help"],
                                  ["version"]], ids=" ".join)
def test_help_and_version_load_no_analysis_stack(argv):
    loaded = _loaded(argv)
    assert not _tops(loaded) & {"jinja2", "git", "rich", "cupy"}
    if argv != ["version"]:  # version loads the rulebook, whose primitives use numpy
        assert "numpy" not in _tops(loaded)
    if argv == ["--help"]:  # lists every command: builds them all, and parses no option
        assert "pydantic" not in _tops(loaded)  # (typer's option coercion imports it)
        return
    # the result cache's key helpers (cakegov.govern.cache) are the one governance module
    # the entry point reads, before any command runs
    # (the rulebook's plugins, which version loads, use the analysis and the lowering)
    below = ("cakegov.govern.", "cakegov.sim", "cakegov.cost", "cakegov.gpu")
    if argv != ["version"]:
        below += ("cakegov.analysis", "cakegov.lower")
    assert not {m for m in loaded if m.startswith(below) and m != "cakegov.govern.cache"}
    assert {m for m in loaded if m.startswith("cakegov.commands.")} <= {
        "cakegov.commands.shared", "cakegov.commands.check", "cakegov.commands.rules",
        "cakegov.commands.audit"}


def test_a_one_file_check_loads_only_the_checker():
    """`cakegov check FILE` imports its command module and the checker: no other command
    module, no templates, no git, no governance, simulator, cost model or GPU stack."""
    loaded = _loaded(["check", "--no-cache",
                      str(ROOT / "corpus" / "valid" / "gemm" / "ws_pipeline_s4.cake")])
    assert "cakegov.check.runner" in loaded  # it did check
    commands = {m for m in loaded if m.startswith("cakegov.commands.")}
    assert commands == {"cakegov.commands.shared", "cakegov.commands.check"}
    assert not _tops(loaded) & {"jinja2", "git", "cupy", "rich"}
    assert not {m for m in loaded if m.startswith(("cakegov.govern.proposal",
                                                   "cakegov.govern.report", "cakegov.sim",
                                                   "cakegov.cost", "cakegov.gpu"))}


def test_blas_pools_are_limited_except_for_run_and_explicit_settings(monkeypatch):
    """numpy's OpenBLAS starts a thread per core at import; the entry point asks for one
    before numpy loads, except for `run` (host-side error bounds of GPU-sized products),
    and never over a value the user set."""
    from cakegov import launch

    for var in launch.BLAS_THREADS:
        monkeypatch.delenv(var, raising=False)
    launch.limit_blas_threads(["run", "x.cake"])
    assert not any(var in os.environ for var in launch.BLAS_THREADS)
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    launch.limit_blas_threads(["check", "x.cake"])
    assert os.environ["OPENBLAS_NUM_THREADS"] == "1"
    assert os.environ["MKL_NUM_THREADS"] == "1"
    assert os.environ["OMP_NUM_THREADS"] == "4"



def _allowed() -> dict[str, set[str]]:
    """docs/layout.md's lines: `- `cakegov/PART` — what it is. May import: a, b.`"""
    import re

    allowed: dict[str, set[str]] = {}
    for line in (ROOT / "docs" / "layout.md").read_text(encoding="utf-8").splitlines():
        m = re.match(r"- `cakegov/([a-z_]+)(?:/|\.py)` — .* May import: ([a-z_, ]+)\.$", line)
        if m:
            names = m.group(2).strip()
            allowed[m.group(1)] = set() if names == "nothing" else {
                n.strip() for n in names.split(",")}
    return allowed


def _part(path) -> str:
    rel = path.relative_to(PACKAGE).parts
    return rel[0] if len(rel) > 1 else rel[0].removesuffix(".py")


def _stray(path, allowed: dict[str, set[str]], text: str | None = None) -> list[str]:
    """The imports of `path` (a file of part P) of other parts that P's line does not allow."""
    part = _part(path)
    out = []
    for name in _imports(path, text):
        bits = name.split(".")
        if bits[0] != "cakegov" or len(bits) == 1 or bits[1] in (part, "__version__"):
            continue
        if bits[1] not in allowed[part]:
            out.append(f"{path.relative_to(ROOT).as_posix()} imports {name}")
    return out


def test_docs_layout_lists_every_part_and_every_import_it_makes():
    """Each folder and top-level module of cakegov/ has its line in docs/layout.md, and
    imports (lazy ones included) only the parts its line allows: a new edge between parts,
    such as a helper importing a command module back, fails here until the page says so."""
    allowed = _allowed()
    parts = {_part(p) for p in PACKAGE.rglob("*.py")} - {"__init__"}
    assert parts == set(allowed), (f"without a line: {sorted(parts - set(allowed))}; "
                                   f"line without a part: {sorted(set(allowed) - parts)}")
    stray = [s for path in sorted(PACKAGE.rglob("*.py")) if _part(path) != "__init__"
             for s in _stray(path, allowed)]
    assert not stray, stray


def test_the_layout_check_catches_an_upward_import():
    """Not vacuous: a lazy import of a command module inside a function of `ir`, or of
    the simulator from `lower`, is reported; an import the line allows is not."""
    allowed = _allowed()
    ir_file = PACKAGE / "ir" / "parse.py"
    upward = "def f():\n    from cakegov.commands.shared import usage_error\n"
    assert sorted(_stray(ir_file, allowed, upward)) == [
        "cakegov/ir/parse.py imports cakegov.commands.shared",
        "cakegov/ir/parse.py imports cakegov.commands.shared.usage_error"]
    assert _stray(PACKAGE / "lower" / "emit.py", allowed, "import cakegov.sim.run\n")
    assert not _stray(ir_file, allowed, "from cakegov.plugin import Access\n")
