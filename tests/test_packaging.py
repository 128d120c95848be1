"""Every third-party module the `cakegov` package imports is a core dependency in
pyproject.toml, or one of the optional stacks whose absence the code handles: README's
first command installs only the core (`pip install -e .`) and must work."""

from __future__ import annotations

import ast
import re
import sys
import tomllib

from .conftest import ROOT

# the GPU stack and `nvrtc`: probed, never required (cupy_backends ships in the cupy wheel)
OPTIONAL = {"cupy", "cupy_backends", "cuda", "pynvml"}
DISTRIBUTION = {"git": "gitpython", "yaml": "pyyaml"}  # import name -> distribution name


def _imported(tree: ast.AST) -> set[str]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
    return out


def test_every_imported_third_party_module_is_a_core_dependency():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = {re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0].lower() for d in project["dependencies"]}
    imported: set[str] = set()
    for path in (ROOT / "cakegov").rglob("*.py"):
        imported |= _imported(ast.parse(path.read_text(encoding="utf-8")))
    third_party = {m for m in imported if m not in sys.stdlib_module_names
                   and m not in ("cakegov", "__future__")}
    missing = sorted(m for m in third_party - OPTIONAL
                     if DISTRIBUTION.get(m, m).lower().replace("_", "-") not in core)
    assert not missing, f"imported but not core dependencies: {missing}"
    assert "jsonschema" in third_party  # the check sees the SARIF validation's import
