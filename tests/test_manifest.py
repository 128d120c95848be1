"""corpus/MANIFEST.json: written from the corpus, checked against it; any change to a case's
content or labels, or to a workload, makes `cakegov corpus manifest --check` fail."""

from __future__ import annotations

import shutil

from typer.testing import CliRunner

from cakegov.cli import app
from cakegov.corpus import manifest

from .conftest import ROOT


def test_the_committed_manifest_describes_the_corpus():
    assert manifest.problems(ROOT / "corpus") == []


def _project(tmp_path):
    root = tmp_path / "p"
    (root / "rules" / "checks").mkdir(parents=True)
    shutil.copytree(ROOT / "corpus" / "workloads", root / "corpus" / "workloads")
    shutil.copytree(ROOT / "corpus" / "invalid" / "scale", root / "corpus" / "invalid" / "scale")
    return root


def test_every_kind_of_change_fails_the_check(tmp_path, monkeypatch):
    root = _project(tmp_path)
    monkeypatch.chdir(root)
    run = CliRunner().invoke(app, ["corpus", "manifest"])
    assert run.exit_code == 0, run.output
    assert CliRunner().invoke(app, ["corpus", "manifest", "--check"]).exit_code == 0
    case = next((root / "corpus" / "invalid" / "scale").glob("*.cake"))
    rel = case.relative_to(root).as_posix()
    original = case.read_text()
    case.write_text(original.replace("# expect:", "# was:", 1) + "# expect: clean\n")
    run = CliRunner().invoke(app, ["corpus", "manifest", "--check"])
    assert run.exit_code == 1 and f"{rel}: content or labels differ" in run.output
    case.write_text(original)
    (root / "corpus" / "invalid" / "scale" / "new.cake").write_text("# expect: clean\n")
    run = CliRunner().invoke(app, ["corpus", "manifest", "--check"])
    assert run.exit_code == 1 and "new.cake: not in the manifest" in run.output
    (root / "corpus" / "invalid" / "scale" / "new.cake").unlink()
    wl = root / "corpus" / "workloads" / "scale.py"
    wl.write_text(wl.read_text().replace("1e-6", "1e+6"))
    run = CliRunner().invoke(app, ["corpus", "manifest", "--check"])
    assert run.exit_code == 1 and "workloads/scale.py: content or labels differ" in run.output
