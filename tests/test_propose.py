"""`cakegov propose-rule` end to end, in temporary git repositories built with GitPython:
the project's rulebook and a small slice of its corpus, committed, then a proposal."""

from __future__ import annotations

import json
import re
import shutil
import textwrap
from pathlib import Path

import git
import pytest
from typer.testing import CliRunner

from cakegov.check.findings import FileResult, Finding
from cakegov.cli import app
from cakegov.corpus.labels import read_labels
from cakegov.govern import changes
from cakegov.govern.inputs import Case
from cakegov.govern.judge import classify
from cakegov.govern.models import ProposalResult
from cakegov.govern.report import COMMENT_BYTES, COMMENT_LIMIT, MARKER, render_markdown
from cakegov.ir.nodes import Span

from .conftest import ROOT

SLICE = ("corpus/workloads", "corpus/valid/scale", "corpus/invalid/gemm/smem_over_capacity.cake",
         "corpus/invalid/scale/threads_over_limit.cake", "examples/proposals")
EXAMPLE = "examples/proposals/fragment-owner.py"
MOTIVATING = "examples/proposals/corpus/invalid/scale/fragment_written_by_loader.cake"
ACTOR = git.Actor("cakegov tests", "tests@example.invalid")
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc")


def _commit(repo: git.Repo, message: str) -> git.Commit:
    repo.git.add(A=True)
    return repo.index.commit(message, author=ACTOR, committer=ACTOR)


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("template") / "project"
    shutil.copytree(ROOT / "rules", root / "rules", ignore=IGNORE)
    for entry in SLICE:
        src, dst = ROOT / entry, root / entry
        if src.is_dir():
            shutil.copytree(src, dst, ignore=IGNORE)
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)
    (root / ".gitignore").write_text(".cakegov/\nreports/\n__pycache__/\n")
    _commit(git.Repo.init(root, initial_branch="main"), "base")
    return root


@pytest.fixture
def project(template, tmp_path, monkeypatch) -> Path:
    root = tmp_path / "project"
    shutil.copytree(template, root)
    monkeypatch.chdir(root)
    return root


def propose(*args: str, gpu: str = "off") -> tuple[int, dict, str]:
    result = CliRunner().invoke(app, ["propose-rule", *args, "--jobs", "2", "--gpu", gpu])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    reports = Path("reports")
    data = json.loads((reports / "proposal.json").read_text()) \
        if (reports / "proposal.json").exists() else {}
    md = (reports / "proposal.md").read_text() if (reports / "proposal.md").exists() else ""
    return result.exit_code, data, md


def rule_file(path: Path, code: str, name: str, body: str, motivated_by: tuple[str, ...] = (),
              version: str = "0.1.0", category: str = "test") -> Path:
    """A minimal, loadable rule plugin whose `check(ctx)` runs `body`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(f'''\
        """A test rule.

        ## What it does
        Test.

        ## Why is this bad?
        Test.

        ## Failing example
        Test.

        ## Passing example
        Test.
        """
        import os, signal, time

        CODE = "{code}"
        NAME = "{name}"
        VERSION = "{version}"
        SEVERITY = "blocking"
        CATEGORY = "{category}"
        STATUS = "preview"
        MOTIVATED_BY = {motivated_by!r}


        def check(ctx):
        ''') + textwrap.indent(textwrap.dedent(body), "    "))
    return path


# ---- end to end ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def eligible(template, tmp_path_factory):
    """The example proposal, judged once: (exit code, JSON, Markdown, project, ledger)."""
    root = tmp_path_factory.mktemp("eligible") / "project"
    shutil.copytree(template, root)
    ledger = root.parent / "ledger.sqlite"
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        code, data, md = propose(EXAMPLE, "--ledger", str(ledger))
    return code, data, md, root, ledger


def test_good_rule_is_eligible_and_recorded(eligible, monkeypatch):
    code, data, md, project, ledger = eligible
    monkeypatch.chdir(project)
    assert code == 0, md
    assert data["verdict"] == "eligible" and data["exit_code"] == 0
    assert md.startswith(MARKER + "\n### ✅ Eligible for merge: 0 valid schedules newly "
                         "rejected, 0 lost catches, 1 new catch, 0 changed diagnostics")
    assert "#### New catches (1)\n\n<details open><summary>" \
        f"<code>{MOTIVATING}</code> (invalid) R020: clean → rejected; simulator: confirmed" in md
    assert "error[R020]: `loader` writes register fragment `y`" in md
    # the simulator reproduces the defect: the new catch is confirmed dynamically
    assert "| simulator | confirmed | uninitialised read: line 24: worker warp 0: " \
        "fragment y&#91;0, 0&#93;" in md  # brackets escaped for Markdown
    assert data["flips"][0]["evidence"]["simulator"]["status"] == "confirmed"
    assert "simulator evidence on the flipped schedules: 1 confirmed" in data["notes"]
    [flip] = data["flips"]
    assert flip["file"] == MOTIVATING and flip["kinds"] == ["new_catch"]
    assert [(i["code"], i["line"]) for i in flip["items"]] == [("R020", 20)]
    row = next(r for r in data["rules"] if r["code"] == "R020")
    assert row["change"] == "added" and row["after"] == {"tp": 1, "fp": 0, "fn": 0}
    assert data["motivating"] == [{"rule": "R020", "file": MOTIVATING, "status": "caught",
                                   "detail": ""}]
    assert data["plugin_changes"][0]["relpath"] == "checks/fragment-owner.py"
    assert data["proposed"][0]["placed_at"] == "rules/checks/fragment-owner.py"
    sarif = json.loads(Path("reports/proposal.sarif").read_text())
    assert [r["ruleId"] for r in sarif["runs"][0]["results"]] == ["R020"]
    html = Path("reports/proposal.html").read_text()
    assert "<svg" in html and "fragment_written_by_loader.cake" in html and "http" not in \
        html.replace("http://www.w3.org/2000/svg", "")
    from cakegov.govern.ledger import Ledger

    with Ledger.open(ledger) as book:
        [rec] = book.records("proposal")
        assert rec.payload["verdict"] == "eligible"
        assert book.blob(data["proposed"][0]["sha256"]) == (project / EXAMPLE).read_bytes()
    assert data["timing"]["run"]["ledger"]["id"] == rec.id
    # The working tree is untouched, and a second run is served from the cache with the
    # same deterministic content.
    assert not (project / "rules" / "checks" / "fragment-owner.py").exists()
    first = ProposalResult.model_validate(data)
    code2, data2, _ = propose(EXAMPLE, "--no-record")
    second = ProposalResult.model_validate(data2)
    assert code2 == 0 and second.timing.run.workers == 0
    assert second.timing.run.cache_misses == 0
    assert first.deterministic_json() == second.deterministic_json()


@pytest.mark.slow
def test_rule_rejecting_a_valid_schedule_is_blocked(project, tmp_path):
    path = rule_file(tmp_path / "no-elementwise.py", "T901", "no-elementwise", """\
        for site in ctx.calls("elementwise"):
            yield ctx.finding(site.call, "elementwise is forbidden")
        """, motivated_by=("corpus/invalid/gemm/smem_over_capacity.cake",))
    code, data, md = propose(str(path), "--no-record")
    assert code == 1
    assert md.splitlines()[1].startswith("### ❌ Blocked:")
    fps = [b for b in data["blockers"] if b["kind"] == "new-false-positive"]
    assert fps and fps[0]["rule"] == "T901"
    assert "corpus/valid/scale/tile_1stage.cake" in fps[0]["files"]
    assert "T901 no-elementwise newly fires where no label expects it on" in md
    assert f"schedule(s), {data['corpus']['valid']} of them valid" in md
    assert "T901 rejects this valid schedule at line" in md
    motivating = [b for b in data["blockers"] if b["kind"] == "motivating-case"]
    assert motivating and "smem_over_capacity.cake (not caught" in motivating[0]["message"]


@pytest.mark.slow
def test_removing_a_rule_loses_its_catches(project):
    (project / "rules" / "checks" / "smem-capacity.py").unlink()
    code, data, md = propose("--no-record")
    assert code == 1 and data["mode"] == "working-tree"
    lost = [b for b in data["blockers"] if b["kind"] == "lost-catch"]
    assert lost and lost[0]["rule"] == "R001"
    assert lost[0]["files"] == ["corpus/invalid/gemm/smem_over_capacity.cake"]
    row = next(r for r in data["rules"] if r["code"] == "R001")
    assert row["change"] == "removed" and row["after"] is None and row["before"]["tp"] == 1
    assert "R001 no longer catches the labelled defect at line" in md
    change = next(p for p in data["plugin_changes"] if p["relpath"] == "checks/smem-capacity.py")
    assert change["change"] == "removed"


RELABELLED = "corpus/invalid/scale/threads_over_limit.cake"


def _relabel(project: Path) -> None:
    path = project / RELABELLED
    text = path.read_text()
    assert "# expect: R005" in text
    path.write_text(text.replace("# expect: R005", "# expect: R005, R006"))


@pytest.mark.slow
def test_label_change_without_reason_is_blocked(project):
    _relabel(project)
    code, data, md = propose("--no-record", "--corpus", "corpus/invalid/scale")
    assert code == 1
    [change] = [c for c in data["contract_changes"] if c["kind"] == "label"]
    assert change["path"] == RELABELLED and change["reason"] is None
    assert "R005@" in change["detail"] and "R006@" in change["detail"]
    [blocker] = [b for b in data["blockers"] if b["kind"] == "contract-change-without-reason"]
    assert blocker["files"] == [RELABELLED]
    assert "no stated reason" in md and RELABELLED in md


@pytest.mark.slow
def test_label_change_with_a_reason_is_not_blocked_for_it(project):
    repo = git.Repo(project)
    base = repo.head.commit.hexsha
    _relabel(project)
    _commit(repo, "Relabel threads_over_limit\n\nReason: the launch also breaks the role "
                  "partition (R006).\n")
    code, data, _ = propose("--no-record", "--base", base, "--corpus", "corpus/invalid/scale")
    [change] = [c for c in data["contract_changes"] if c["kind"] == "label"]
    assert change["reason"] == "commit message: the launch also breaks the role partition (R006)."
    assert not [b for b in data["blockers"] if b["kind"] == "contract-change-without-reason"]
    assert data["provenance"]["base_commit"] == base
    # A reason explains the change; only a maintainer's acceptance of this exact change
    # (its digest) lets the proposal through.
    assert code == 1 and [b["kind"] for b in data["blockers"]] == ["contract-change"]
    digest = data["contract_digest"]
    assert f"--accept-contract {digest}" in data["blockers"][0]["message"]
    code, wrong, _ = propose("--no-record", "--base", base, "--corpus", "corpus/invalid/scale",
                             "--accept-contract", "0" * 64)
    assert code == 1 and "names another change" in wrong["blockers"][0]["message"]
    code, data, _ = propose("--no-record", "--base", base, "--corpus", "corpus/invalid/scale",
                            "--accept-contract", digest)
    assert code == 0, data["blockers"]
    assert f"contract change accepted by a maintainer (--accept-contract {digest})" in \
        data["notes"]


def test_change_note_file_is_a_reason(project):
    _relabel(project)
    (project / changes.CHANGE_NOTES).write_text(
        "# Corpus changes\n\n- invalid/scale/threads_over_limit.cake: R006 as well\n")
    _, data, _ = propose("--no-record", "--corpus", "corpus/invalid/scale")
    [change] = [c for c in data["contract_changes"] if c["kind"] == "label"]
    assert change["reason"].startswith("corpus/CHANGES.md: - invalid/scale/threads_over_limit")


@pytest.mark.slow
@pytest.mark.parametrize("kind, body, extra", [
    ("hang", "while True:\n    pass\nyield from ()\n", ["--time-limit", "1"]),
    ("hang", "while True:\n    try:\n        time.sleep(0.05)\n    except BaseException:\n"
             "        pass\nyield from ()\n", ["--time-limit", "1"]),
    ("crash", "yield ctx.finding(None, str(1 // 0))\n", []),
    ("crash", "os.kill(os.getpid(), signal.SIGKILL)\nyield from ()\n", []),
    ("memory", "blob = bytearray(1 << 30)\nyield ctx.finding(None, str(len(blob)))\n",
     ["--memory-limit", "512"]),
], ids=["hang-soft", "hang-killed", "raises", "dies", "memory"])
def test_misbehaving_rule_blocks_without_crashing_the_tool(project, tmp_path, kind, body, extra):
    path = rule_file(tmp_path / "bad-rule.py", "T902", "bad-rule", body,
                     motivated_by=(MOTIVATING,))
    code, data, md = propose(str(path), "--no-record", "--corpus", "corpus/invalid", *extra)
    assert code == 1, md
    blockers = [b for b in data["blockers"] if b["kind"] == f"rule-{kind}"]
    assert blockers, data["blockers"]
    assert blockers[0]["rule"] == "T902" and blockers[0]["files"]
    assert blockers[0]["files"][0].endswith(".cake")
    assert f"rule T902 bad-rule {dict(hang='hung', crash='crashed').get(kind, 'blew')}" in md
    failure = next(f for f in data["failures"] if f["rule"] == "T902")
    assert failure["side"] == "candidate" and failure["file"] in blockers[0]["files"]


@pytest.mark.slow
def test_candidate_that_does_not_load_is_blocked(project, tmp_path):
    path = rule_file(tmp_path / "wrong-name.py", "T904", "not-the-file-name", "yield from ()\n",
                     motivated_by=(MOTIVATING,))
    code, data, md = propose(str(path), "--no-record", "--corpus", "corpus/invalid/gemm")
    assert code == 1
    [blocker] = data["blockers"]
    assert blocker["kind"] == "candidate-does-not-load"
    assert "checks/wrong-name.py: NAME 'not-the-file-name' must be kebab-case" in blocker["message"]
    assert "the candidate rulebook does not load" in md
    assert [p["relpath"] for p in data["plugin_changes"]] == ["checks/wrong-name.py"]
    assert data["flips"] == []


@pytest.mark.slow
def test_gpu_require_without_a_device_exits_3(project, monkeypatch):
    from cakegov.gpu import device

    def no_device():
        raise device.NoDevice("no CUDA device in this test")

    monkeypatch.setattr(device, "probe", no_device)
    code, data, md = propose(EXAMPLE, "--no-record", "--corpus", "corpus/invalid/gemm",
                             gpu="require")
    assert code == 3
    assert data["verdict"] == "evidence-unavailable"
    assert "Required evidence unavailable" in md.splitlines()[1]
    assert "no CUDA device in this test" in md
    assert data["flips"][0]["evidence"]["gpu"]["status"] == "not measured"


@pytest.mark.slow
def test_primitive_change_needs_a_version_bump(project):
    path = project / "rules" / "primitives" / "fill.py"
    path.write_text(path.read_text() + "\n# a comment changes the content\n")
    code, data, _ = propose(str(path), "--no-record", "--corpus", "corpus/valid/scale")
    assert code == 1
    [change] = data["plugin_changes"]
    assert change["relpath"] == "primitives/fill.py" and change["kind"] == "primitive"
    assert "not greater than" in change["problem"]
    assert data["blockers"][0]["kind"] == "version-not-bumped"
    assert data["corpus"]["invalid"] == 0 and data["corpus"]["dirs"] == ["corpus/valid/scale"]


@pytest.mark.slow
def test_cost_parameters_are_placed_and_judged(project, tmp_path):
    path = tmp_path / "sm_90a.toml"
    text = (project / "rules" / "costmodel" / "sm_90a.toml").read_text()
    path.write_text(text.replace('version = "1.0.0"', 'version = "1.1.0"', 1).replace(
        "hbm_efficiency = { value = 0.85", "hbm_efficiency = { value = 0.8", 1))
    code, data, _ = propose(str(path), "--no-record", "--shard", "1/2")
    assert data["proposed"][0]["placed_at"] == "rules/costmodel/sm_90a.toml"
    assert data["plugin_changes"][0]["kind"] == "costmodel"
    assert data["corpus"]["shard"] == "1/2"
    assert data["corpus"]["valid"] + data["corpus"]["invalid"] < data["corpus"][
        "total_before_shard"]
    assert code == 0, data["blockers"]
    assert any("speed-of-light" in n and "no measurement records" in n for n in data["notes"])


@pytest.mark.slow
def test_cost_parameters_are_judged_in_a_contained_worker(project, tmp_path, monkeypatch):
    """Judging a cost-parameter file lowers the valid corpus, which imports the workload
    files (code from the checkout): the parent never does; it gets the judgement as data.
    An efficiency above 1 comes back as its blocker."""
    import cakegov.corpus.workloads as workloads

    def refuse(*args, **kwargs):
        raise AssertionError("the parent imported workload code")

    monkeypatch.setattr(workloads, "load_workloads", refuse)
    code, data = _propose_cost_edit(project, tmp_path, "hbm_efficiency = { value = 0.85",
                                    "hbm_efficiency = { value = 1.5")
    assert code == 1
    [blocker] = [b for b in data["blockers"] if b["kind"] == "cost-parameters-invalid"]
    assert blocker["files"] == ["rules/costmodel/sm_90a.toml"]
    assert "hbm_efficiency" in blocker["message"]


def _propose_cost_edit(project, tmp_path, old: str, new: str):
    """Propose the bundled cost parameters, version bumped, with `old` replaced by `new`,
    over the scale corpus; (exit code, report data)."""
    path = tmp_path / "sm_90a.toml"
    text = (project / "rules" / "costmodel" / "sm_90a.toml").read_text()
    assert old in text
    path.write_text(text.replace('version = "1.0.0"', 'version = "1.1.0"', 1).replace(
        old, new, 1))
    code, data, _ = propose(str(path), "--no-record", "--corpus", "corpus/valid/scale")
    return code, data


def test_usage_errors_exit_2(project):
    assert propose("no/such/file.py", "--no-record")[0] == 2
    readme = project / "notes.txt"
    readme.write_text("not a plugin")
    assert propose(str(readme), "--no-record")[0] == 2
    assert propose(EXAMPLE, "--no-record", "--base", "no-such-ref")[0] == 2
    assert propose(EXAMPLE, "--no-record", "--shard", "3/2")[0] == 2


# ---- units ---------------------------------------------------------------------------

def _result(file: str, verdict: str, *found: tuple[str, int, str]) -> FileResult:
    return FileResult(file=file, verdict=verdict, findings=tuple(
        Finding(code=c, rule="r", severity="blocking", authority="legality", message=m,
                file=file, path="schedule", span=Span(line=line, col=1, end_line=line,
                                                      end_col=2))
        for c, line, m in found))


def _labelled(text: str) -> Case:
    return Case("x.cake", Path("x.cake"), "0", read_labels(text))


def test_classify_flips():
    invalid = _labelled("a\nb  # expect: R001\n")
    clean = _result("x.cake", "clean")
    caught = _result("x.cake", "rejected", ("R001", 2, "m"))
    assert [i.kind for i in classify(invalid, clean, caught)] == ["new_catch"]
    assert [i.kind for i in classify(invalid, caught, clean)] == ["lost_catch"]
    wrong_line = _result("x.cake", "rejected", ("R001", 1, "m"))
    assert [(i.kind, i.line) for i in classify(invalid, clean, wrong_line)] == [
        ("new_false_positive", 1)]
    reworded = _result("x.cake", "rejected", ("R001", 2, "other words"))
    assert [i.kind for i in classify(invalid, caught, reworded)] == ["changed_diagnostic"]
    valid = _labelled("# expect: clean\n")
    [item] = classify(valid, clean, _result("x.cake", "rejected", ("T1", 1, "no")))
    assert item.kind == "new_false_positive" and "rejects this valid schedule" in item.message
    assert classify(valid, clean, clean) == []


def _timed_runs(before_ms: list[float], after_ms: list[float]) -> tuple:
    from types import SimpleNamespace

    from cakegov.govern.judge import CaseRun

    cases = [SimpleNamespace(rel=f"c{i}.cake") for i in range(len(before_ms))]
    runs = {side: {c.rel: CaseRun(result=None, seconds=t / 1000, run_id="r")
                   for c, t in zip(cases, times, strict=True)}
            for side, times in (("base", before_ms), ("candidate", after_ms))}
    return (SimpleNamespace(cases=cases),
            SimpleNamespace(runs=runs, cached_runs=set(), candidate_error=None))


def test_cost_blocks_when_the_median_more_than_doubles():
    from cakegov.govern.verdict import cost

    setup, v = _timed_runs([3.0] * 12, [7.0] * 12)
    slow = cost(setup, v, [])  # type: ignore[arg-type]
    assert slow.judged and slow.exceeded and slow.ratio == pytest.approx(7 / 3, rel=1e-3)
    assert slow.median_before_ms == 3.0 and slow.median_after_ms == 7.0
    setup, v = _timed_runs([3.0] * 12, [5.9] * 12)
    assert not cost(setup, v, []).exceeded  # type: ignore[arg-type]
    setup, v = _timed_runs([3.0] * 4, [30.0] * 4)
    few = cost(setup, v, [])  # type: ignore[arg-type]
    assert not few.judged and not few.exceeded


def test_markdown_truncation_keeps_every_rule(eligible):
    _, data, _, project, _ = eligible
    result = ProposalResult.model_validate(data)
    flip = result.flips[0]
    big = flip.model_copy(update={"new_findings": flip.new_findings * 40})
    many = result.model_copy(update={"flips": [big.model_copy(update={"file": f"f{i}.cake"})
                                               for i in range(300)]})
    text = render_markdown(many, root=project)
    assert len(text) <= COMMENT_LIMIT and len(text.encode()) <= COMMENT_BYTES
    assert text.startswith(MARKER)
    assert "Truncated to fit GitHub's 65,536-character comment limit" in text
    assert all(f"| {r.code} |" in text or f"| **{r.code}** |" in text for r in result.rules)
    assert "more flipped schedule(s) not shown here" in text


def test_placement_by_kind(tmp_path):
    check = rule_file(tmp_path / "x-rule.py", "T903", "x-rule", "yield from ()\n")
    assert changes.placement(check, tmp_path) == ("check", "checks/x-rule.py")
    prim = tmp_path / "op.py"
    prim.write_text('"""op"""\nSPELLING = "lm.op"\ndef effects(call, view):\n    pass\n')
    assert changes.placement(prim, tmp_path) == ("primitive", "primitives/op.py")
    target = tmp_path / "sm_x.toml"
    target.write_text('[target]\nname = "sm_x"\n')
    assert changes.placement(target, tmp_path) == ("target", "targets/sm_x.toml")


LABEL_READER = '''\
import pathlib
base = object.__getattribute__(ctx, "_base")
name = str(getattr(base, "file", ""))
src = getattr(base, "_source", None) or ""
try:
    src = src or pathlib.Path(name).read_text()
except OSError:
    pass
try:
    ctx.file
    api = "open"
except AttributeError:
    api = "closed"
labelled = [i for i, line in enumerate(src.splitlines(), 1) if "# expect: R020" in line]
for line in labelled:
    yield ctx.finding(None, f"label-driven at {line}")
yield ctx.finding(None, f"saw file={name} labels={'# expect' in src} "
                        f"doc={'loader' in (ctx.schedule.doc or '')} api={api}")
'''


@pytest.mark.slow
def test_labels_and_file_names_never_reach_plugin_code(project, tmp_path):
    """The measured attack: a rule that reads the `# expect:` labels of the file it is
    given (through the context, the raw source or the path) and fires only where its own
    label asks. Workers get blinded copies under neutral names, so it sees no label."""
    path = rule_file(tmp_path / "fragment-owner.py", "R020", "fragment-owner", LABEL_READER,
                     motivated_by=(MOTIVATING,))
    code, data, md = propose(str(path), "--no-record", "--corpus", "corpus/invalid")
    assert code == 1, md
    messages = {i["message"] for f in data["flips"] for i in f["new_findings"]}
    assert not any(m.startswith("label-driven") for m in messages), messages
    seen = [m for m in messages if m.startswith("saw ")]
    assert seen and all("labels=False doc=False api=closed" in m for m in seen), seen
    assert all("file=case-" in m and "invalid" not in m for m in seen), seen


INJECTOR = '''\
evil = ("x\\n```\\n</details>\\n<!-- cakegov-proposal -->\\n# \\u2705 Eligible for merge\\n"
        "[approve](https://example.invalid) | a | b |")
yield ctx.finding(None, evil, hint=evil)
'''


@pytest.mark.slow
def test_plugin_strings_cannot_forge_markdown_structure(project, tmp_path):
    """The measured attack: a finding message that closes the code fence and `</details>`
    and writes a second marker and an 'Eligible' heading into proposal.md."""
    path = rule_file(tmp_path / "inject.py", "T907", "inject", INJECTOR,
                     motivated_by=(MOTIVATING,))
    code, data, md = propose(str(path), "--no-record", "--corpus", "corpus/invalid/gemm")
    assert code == 1 and data["verdict"] == "blocked"
    assert md.count(MARKER) == 1 and md.startswith(MARKER)
    fence, outside = None, []
    for line in md.splitlines():  # outside fences no line may be the forged heading
        if line.startswith("```"):
            run = len(line) - len(line.lstrip("`"))
            if fence is None:
                fence = run
            elif run >= fence and not line.strip("`"):
                fence = None
            continue
        if fence is None:
            outside.append(line)
            assert not line.startswith("# "), line
            assert ("<!--" not in line or line == MARKER) and "](https://" not in line, line
    assert fence is None  # every fence was closed by the template, not by the plugin
    text = "\n".join(outside)
    assert text.count("<details>") == text.count("</details>") >= 1
    assert "Eligible for merge" not in md.split("\n", 2)[1]


@pytest.mark.slow
def test_a_stale_lock_blocks_even_with_the_version_bumped_in_the_lock_only(project):
    """A rule changed in the working tree while its VERSION stays: the candidate's lock
    no longer describes the file. Bumping only the lock's entry does not help either."""
    rule = project / "rules" / "checks" / "smem-capacity.py"
    rule.write_text(rule.read_text() + "\n# behaviour changed quietly\n")
    lock = project / "rules" / "rulebook.lock"
    data = json.loads(lock.read_text())
    data["plugins"]["checks/smem-capacity.py"]["version"] = "9.9.9"
    lock.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    code, out, md = propose("--no-record", "--corpus", "corpus/invalid/gemm")
    assert code == 1 and out["verdict"] == "blocked"
    [stale] = [b for b in out["blockers"] if b["kind"] == "stale-lock"]
    assert "rules/checks/smem-capacity.py: version 9.9.9 -> " in stale["message"]
    assert "rulebook.lock does not describe its plugins" in md


@pytest.mark.slow
def test_a_defused_case_and_a_new_valid_file_are_contract_changes(project):
    """The measured attack: the body of a labelled invalid case changed so it is no longer
    defective (label line kept), plus a new valid corpus file. Both are listed with their
    diffs and block until accepted; accepting them names their exact content."""
    path = project / "corpus" / "invalid" / "gemm" / "smem_over_capacity.cake"
    path.write_text(path.read_text().replace("stages=8", "stages=2"))
    added = project / "corpus" / "valid" / "scale" / "new_case.cake"
    shutil.copyfile(next((project / "corpus" / "valid" / "scale").glob("*.cake")), added)
    code, data, md = propose("--no-record", "--corpus", "corpus/invalid/gemm")
    assert code == 1
    rows = {c["path"]: c for c in data["contract_changes"]}
    defused = rows["corpus/invalid/gemm/smem_over_capacity.cake"]
    assert defused["kind"] == "corpus-content" and "-" in defused["diff"] and \
        "stages=2" in defused["diff"]
    assert rows["corpus/valid/scale/new_case.cake"]["kind"] == "corpus-added"
    [blocker] = [b for b in data["blockers"] if b["kind"] == "contract-change"]
    assert set(blocker["files"]) == set(rows)
    assert data["contract_digest"] in md
    # Accepting, then changing the content again, is a different contract.
    first = data["contract_digest"]
    added.write_text(added.read_text() + "\n")
    _, again, _ = propose("--no-record", "--corpus", "corpus/invalid/gemm",
                          "--accept-contract", first)
    assert again["contract_digest"] != first
    assert [b for b in again["blockers"] if b["kind"] == "contract-change"]


def test_the_comment_is_rendered_by_the_trusted_engine_from_validated_json(eligible, tmp_path):
    """The comment job never posts PR-produced Markdown: it validates proposal.json against
    its own schema and renders it with its own templates."""
    _, data, md, _, _ = eligible
    source = tmp_path / "proposal.json"
    source.write_text(json.dumps(data))
    run = CliRunner().invoke(app, ["render-proposal", str(source), "--report-dir",
                                   str(tmp_path / "out")])
    assert run.exit_code == 0, run.output
    assert (tmp_path / "out" / "proposal.md").read_text() == md
    sarif = json.loads((tmp_path / "out" / "proposal.sarif").read_text())
    assert sarif["version"] == "2.1.0"
    forged = dict(data, verdict="eligible-and-approved")
    source.write_text(json.dumps(forged))
    run = CliRunner().invoke(app, ["render-proposal", str(source), "--report-dir",
                                   str(tmp_path / "bad")])
    assert run.exit_code == 2 and "not a valid proposal result" in run.output
    assert not (tmp_path / "bad").exists()
    source.write_text(json.dumps({**data, "injected": "# ✅ Eligible for merge"}))
    run = CliRunner().invoke(app, ["render-proposal", str(source)])
    assert run.exit_code == 2


FORGER = '''\
from cakegov.check.findings import Finding
yield Finding(code="R001", rule="smem-capacity", severity="blocking", authority="legality",
              message="forged in the name of R001", file="x", path="schedule")
yield Finding(code="Z999", rule="nobody", severity="blocking", authority="legality",
              message="a code nobody declares", file="x", path="schedule")
'''


@pytest.mark.slow
def test_a_finding_may_only_carry_a_code_its_rulebook_declares(project, tmp_path):
    """A proposed plugin that yields findings in another rule's name (R001) or with a code
    no plugin declares: the worker drops them as spoken in another rule's name, and the
    trusted parent independently drops any code its rulebook does not declare."""
    path = rule_file(tmp_path / "forger.py", "T961", "forger", FORGER,
                     motivated_by=(MOTIVATING,))
    code, data, _ = propose(str(path), "--no-record", "--corpus", "corpus/valid/scale")
    assert code == 1
    # The worker drops both findings, as spoken in another rule's name; the R001 one no
    # longer reaches the parent at all.
    forged = [f for f in data["failures"] if "another rule's name" in f["message"]]
    assert forged and all(f["rule"] == "T961" for f in forged), data["failures"]
    assert "R001/smem-capacity" in forged[0]["message"]
    messages = {i["message"] for f in data["flips"] for i in f.get("new_findings", [])}
    assert "a code nobody declares" not in messages


@pytest.mark.slow
def test_a_defused_case_whose_rule_is_deleted_is_a_lost_catch(project):
    """Defuse a labelled invalid case in place (label kept), delete the rule that caught
    it: the case is also judged in its base form, where the candidate now misses it."""
    path = project / "corpus" / "invalid" / "gemm" / "smem_over_capacity.cake"
    path.write_text(path.read_text().replace("stages=8", "stages=2"))
    (project / "rules" / "checks" / "smem-capacity.py").unlink()
    code, data, _ = propose("--no-record", "--corpus", "corpus/invalid/gemm")
    assert code == 1
    lost = [b for b in data["blockers"] if b["kind"] == "lost-catch"]
    assert lost and "corpus/invalid/gemm/smem_over_capacity.cake (base version)" in \
        lost[0]["files"], data["blockers"]


NAME_MATCHER = '''\
if ctx.schedule.name == "scale_handoff_foreign_fragment":  # overfit: the file, line 20
    for site in ctx.calls():
        if site.call.span is not None and site.call.span.line == 20:
            yield ctx.finding(site.call, "recognised by name")
            break
'''


@pytest.mark.slow
def test_a_catch_that_does_not_survive_renaming_is_blocked(project, tmp_path, eligible):
    """A rule that recognises the caught file (here by its function name) instead of the
    defect misses the renamed variants (it still fires on the reordered one, which keeps
    the name); the example rule fires on all."""
    note = next(n for n in eligible[1]["notes"] if n.startswith("generalisation:"))
    assert note == (f"generalisation: R020 on {MOTIVATING} fires on 3 of 3 "
                    "semantics-preserving variant(s) (rename 2/2, reorder 1/1); fixed "
                    "variants: 0 derived, 0 trusted, fires on 0")
    assert not [b for b in eligible[1]["blockers"] if b["kind"] == "does-not-generalise"]
    path = rule_file(tmp_path / "fragment-owner.py", "R020", "fragment-owner", NAME_MATCHER,
                     motivated_by=(MOTIVATING,))
    code, data, md = propose(str(path), "--no-record", "--corpus", "corpus/valid/scale")
    assert code == 1
    [blocker] = [b for b in data["blockers"] if b["kind"] == "does-not-generalise"]
    assert blocker["files"] == [MOTIVATING] and blocker["message"].startswith(
        f"R020 catches {MOTIVATING} but misses 2 of its 3 renamed or reordered variants "
        "(rename 0/2, reorder 1/1)")
    assert "recognises the file, not the defect" in md


def _blind_sha256(path: Path) -> str:
    """The identity of the schedule a plugin sees of `path` (blinded, parsed)."""
    from cakegov.check.rulebook import Rulebook
    from cakegov.check.runner import Checker
    from cakegov.corpus.labels import blind
    from cakegov.corpus.workloads import load_workloads
    from cakegov.ir.canonical import schedule_sha256
    from cakegov.ir.parse import parse_source

    checker = Checker(Rulebook.load(ROOT / "rules"), load_workloads(ROOT / "corpus/workloads"))
    return schedule_sha256(parse_source(blind(path.read_text()), checker.vocabulary))


HASH_MATCHER = '''\
from cakegov.ir.canonical import schedule_sha256

if schedule_sha256(ctx.schedule) == "{sha}":  # overfit: the caught schedule itself
    for site in ctx.calls("elementwise"):
        yield ctx.finding(site.call, "recognised by hash")
'''


@pytest.mark.slow
def test_a_catch_keyed_on_the_schedule_hash_fires_on_no_variant(project, tmp_path):
    path = rule_file(tmp_path / "fragment-owner.py", "R020", "fragment-owner",
                     HASH_MATCHER.format(sha=_blind_sha256(project / MOTIVATING)),
                     motivated_by=(MOTIVATING,))
    code, data, _ = propose(str(path), "--no-record", "--corpus", "corpus/valid/scale")
    assert code == 1
    [flip] = [f for f in data["flips"] if f["file"] == MOTIVATING]
    assert flip["kinds"] == ["new_catch"]  # the original is caught ...
    [blocker] = [b for b in data["blockers"] if b["kind"] == "does-not-generalise"]
    assert blocker["message"].startswith(  # ... and nothing else
        f"R020 catches {MOTIVATING} but none of its 3 semantics-preserving variants "
        "(rename 0/2, reorder 0/1: ")


# A schedule the base rejects (P005, with a machine fix that flips the parity) whose line
# a new rule is also labelled to catch.
TWO_CODES = "proposals/wait_parity_two_codes.cake"
ANY_WAIT = '''\
for site in ctx.calls("mbarrier_wait"):  # fires on the wait, whatever it waits for
    yield ctx.finding(site.call, "a wait")
'''
PARITY_ONE_FIRST = '''\
for site in ctx.calls("mbarrier_wait"):
    parity = site.call.args.get("parity")
    if getattr(getattr(parity, "expr", None), "value", None) == 1:
        yield ctx.finding(site.call, "waits for parity 1 on a fresh barrier")
'''


@pytest.mark.slow
def test_a_rule_that_fires_on_the_trusted_fix_too_is_blocked(project, tmp_path):
    """The base rejects the case and its P005 fix (parity 1 -> 0) makes the base accept
    it: a new rule that still fires on the fixed schedule does not recognise the defect;
    one that reasons about the parity goes quiet on the fix and passes."""
    case = project / TWO_CODES
    case.parent.mkdir()
    case.write_text((ROOT / "corpus/invalid/scale/wait_parity_one.cake").read_text()
                    .replace("# expect: P005", "# expect: P005, T971"))
    # protocol rules, so that they run beside P005 (a structural rejection would skip the
    # protocol analysis and with it P005)
    wait = rule_file(tmp_path / "any-wait.py", "T971", "any-wait", ANY_WAIT,
                     motivated_by=(TWO_CODES,), category="protocol")
    code, data, _ = propose(str(wait), "--no-record", "--corpus", "proposals")
    assert code == 1
    [flip] = data["flips"]
    assert [(i["kind"], i["code"], i["line"]) for i in flip["items"]] == [
        ("new_catch", "T971", 17)]
    [blocker] = [b for b in data["blockers"] if b["kind"] == "does-not-generalise"]
    assert blocker["message"].startswith(
        f"T971 still fires on 1 of the 1 trusted fixed variant(s) of {TWO_CODES}")
    assert not [b for b in data["blockers"] if b["kind"] != "does-not-generalise"]
    note = next(n for n in data["notes"] if n.startswith("generalisation:"))
    assert note.endswith("fixed variants: 1 derived, 1 trusted, fires on 1")

    case.write_text(case.read_text().replace("T971", "T972"))
    parity = rule_file(tmp_path / "parity-one-first.py", "T972", "parity-one-first",
                       PARITY_ONE_FIRST, motivated_by=(TWO_CODES,), category="protocol")
    code, data, md = propose(str(parity), "--no-record", "--corpus", "proposals")
    assert code == 0, md
    note = next(n for n in data["notes"] if n.startswith("generalisation:"))
    assert "fires on 3 of 3 semantics-preserving variant(s) (rename 2/2, reorder 1/1)" in note
    assert note.endswith("fixed variants: 1 derived, 1 trusted, fires on 0")


def test_a_fixed_variant_is_trusted_only_when_the_base_accepts_it():
    """Unit: `_run_variants` counts a fixed variant only when the base rejected the
    original and accepts the fix; the candidate firing on an untrusted one is ignored."""
    from cakegov.govern import judge as judge_mod

    def result(verdict, *codes):
        return FileResult(file="x.cake", verdict=verdict, findings=tuple(
            Finding(code=c, rule="r", severity="blocking", authority="legality",
                    message="m", file="x.cake", path="schedule",
                    span=Span(line=5, col=1, end_line=5, end_col=2))
            for c in codes))

    for original, base_fixed, expected in (("rejected", "clean", 1), ("clean", "clean", 0),
                                           ("rejected", "rejected", 0)):
        derived = [judge_mod._Derived("x.cake", "fixed", "text")]
        checked = [{"base": judge_mod.CaseRun(result=result(base_fixed)),
                    "candidate": judge_mod.CaseRun(result=result("rejected", "T1"))}]
        v = type("V", (), {"runs": {"base": {"x.cake": judge_mod.CaseRun(
            result=result(original, "P1"))}}})()
        g = judge_mod._tally({"x.cake": {("T1", 5)}}, v, derived, checked)["x.cake"]
        assert (g["fixed"]["derived"], g["fixed"]["total"], g["fixed"]["fired"]) == (
            1, expected, expected)


def test_the_parent_drops_codes_its_rulebook_does_not_declare():
    """The worker is untrusted too: a result naming an undeclared code, or a declared code
    under another rule's name, is dropped by the parent and becomes a failure."""
    from cakegov.govern.judge import _run

    def finding(code, rule, authority="legality"):
        return {"code": code, "rule": rule, "severity": "blocking", "authority": authority,
                "message": "m", "file": "x.cake", "path": "schedule"}

    event = {"file": "x.cake", "result": {
        "file": "x.cake", "verdict": "rejected",
        "findings": [finding("R001", "smem-capacity"), finding("R001", "impostor"),
                     finding("Z999", "nobody"), finding("E101", "input", "input")]}}
    run = _run(event, {"R001": "smem-capacity"})
    assert [(f.code, f.rule) for f in run.result.findings] == [("R001", "smem-capacity"),
                                                              ("E101", "input")]
    assert len(run.failures) == 2 and all("does not declare" in f["message"]
                                          for f in run.failures)


TARGET_EDIT = "examples/proposals/targets/sm_90a.toml"


def test_the_example_target_edit_changes_exactly_one_fact():
    """The example stays the rulebook's sm_90a with one fact raised: when the rulebook's
    target changes, this says to change the example with it."""
    from cakegov.govern.changes import target_facts

    base = target_facts((ROOT / "rules" / "targets" / "sm_90a.toml").read_bytes())
    edit = target_facts((ROOT / TARGET_EDIT).read_bytes())
    assert base is not None and edit is not None
    assert {k for k in set(base) | set(edit) if base.get(k) != edit.get(k)} == \
        {"smem_per_cta"}, "update examples/proposals/targets/sm_90a.toml from rules/targets"
    assert edit["smem_per_cta"] == (262144, "bytes")


def test_target_facts_ignore_sources_and_versions_but_not_units(tmp_path):
    from cakegov.govern.changes import target_changes

    base, cand = tmp_path / "base", tmp_path / "cand"
    for d in (base, cand):
        shutil.copytree(ROOT / "rules" / "targets", d / "targets")
    path = cand / "targets" / "sm_80.toml"
    text = path.read_text()
    path.write_text(text.replace('version = "', 'version = "9').replace(
        'source = "', 'source = "see also: ', 1))
    assert target_changes(base, cand) == []
    path.write_text(text.replace('unit = "bytes"', 'unit = "KiB"', 1))
    [row] = target_changes(base, cand)
    assert row["kind"] == "target" and row["change"] == "modified"
    assert "bytes -> " in row["detail"] and "KiB" in row["detail"]
    (cand / "targets" / "sm_120.toml").write_text(text.replace('"sm_80"', '"sm_120"'))
    rows = {r["path"]: r for r in target_changes(base, cand)}
    assert rows["rules/targets/sm_120.toml"]["change"] == "added"
    assert rows["rules/targets/sm_120.toml"]["detail"].startswith("hardware facts: target added")


@pytest.mark.slow
def test_a_target_edit_is_a_blocking_contract_change(project):
    code, data, md = propose(TARGET_EDIT, "--no-record", "--corpus", "corpus/invalid/gemm")
    assert code == 1, md
    [row] = [c for c in data["contract_changes"] if c["kind"] == "target"]
    assert row["path"] == "rules/targets/sm_90a.toml"
    assert "smem_per_cta: 232448 bytes -> 262144 bytes" in row["detail"]
    assert "+value = 262144" in row["diff"]
    [blocker] = [b for b in data["blockers"] if b["kind"] == "contract-change"]
    assert "rules/targets/sm_90a.toml" in blocker["files"]
    assert "rules/targets/sm_90a.toml" in md and "smem_per_cta" in md
    _, accepted, _ = propose(TARGET_EDIT, "--no-record", "--corpus", "corpus/invalid/gemm",
                             "--accept-contract", data["contract_digest"])
    assert not [b for b in accepted["blockers"] if b["kind"] == "contract-change"]


def test_lock_check_fails_on_a_target_fact_without_a_source(tmp_path, monkeypatch):
    root = tmp_path / "p"
    shutil.copytree(ROOT / "rules", root / "rules", ignore=IGNORE)
    (root / "corpus").mkdir()
    path = root / "rules" / "targets" / "sm_80.toml"
    text = path.read_text()
    start = text.index("source = ", text.index("[limits.smem_per_sm]"))
    path.write_text(text[:start] + text[text.index("\n", start) + 1:])
    monkeypatch.chdir(root)
    result = CliRunner().invoke(app, ["lock", "--check"])
    assert result.exit_code == 2, result.output
    assert "targets/sm_80.toml: limit `smem_per_sm` needs `value` and `source`" in \
        " ".join(result.output.split())


def _relock() -> None:
    result = CliRunner().invoke(app, ["lock"])
    assert result.exit_code == 0, result.output


@pytest.mark.slow
def test_demoting_a_stable_rule_loses_its_catches_by_default_and_is_a_contract_change(
        project):
    """R001 moved to preview (version bumped, lock updated): the worker still runs it, but
    `cakegov check` no longer does by default, so its labelled catch is lost, and the
    demotion itself is a contract change."""
    path = project / "rules" / "checks" / "smem-capacity.py"
    text = path.read_text()
    version = re.search(r'VERSION = "(\d+)\.(\d+)\.(\d+)"', text)
    bumped = f'VERSION = "{version[1]}.{int(version[2]) + 1}.0"'
    path.write_text(text.replace('STATUS = "stable"', 'STATUS = "preview"').replace(
        version[0], bumped))
    _relock()
    code, data, md = propose("--no-record", "--corpus", "corpus/invalid/gemm")
    assert code == 1, md
    lost = [b for b in data["blockers"] if b["kind"] == "lost-catch"]
    assert lost and lost[0]["rule"] == "R001", data["blockers"]
    assert "corpus/invalid/gemm/smem_over_capacity.cake" in lost[0]["files"]
    assert "line 6 by default:" in md and "runs stable rules only" in md
    [row] = [c for c in data["contract_changes"] if c["kind"] == "rule-status"]
    assert row["path"] == "rules/checks/smem-capacity.py"
    assert "status stable -> preview" in row["detail"]
    assert [b for b in data["blockers"] if b["kind"] == "contract-change"]


@pytest.mark.slow
def test_a_changed_primitive_is_a_contract_change_a_new_one_is_not(project):
    path = project / "rules" / "primitives" / "elementwise.py"
    text = path.read_text()
    version = re.search(r'VERSION = "(\d+)\.(\d+)\.(\d+)"', text)
    path.write_text(text.replace(version[0], f'VERSION = "{version[1]}.{int(version[2]) + 1}.0"')
                    + "\n# changed semantics would go here\n")
    _relock()
    code, data, md = propose("--no-record", "--corpus", "corpus/invalid/gemm")
    assert code == 1, md
    [row] = [c for c in data["contract_changes"] if c["kind"] == "primitive"]
    assert row["path"] == "rules/primitives/elementwise.py" and row["change"] == "modified"
    assert "+# changed semantics would go here" in row["diff"]
    [blocker] = [b for b in data["blockers"] if b["kind"] == "contract-change"]
    assert "rules/primitives/elementwise.py" in blocker["files"]


def test_semantics_changes_lists_demotions_and_primitive_edits_only(tmp_path):
    from cakegov.govern.changes import default_off, semantics_changes

    base, cand = tmp_path / "base", tmp_path / "cand"
    for d in (base, cand):
        shutil.copytree(ROOT / "rules", d, ignore=IGNORE)
    assert semantics_changes(base, cand) == []
    assert "R020" not in default_off(base) and "R001" not in default_off(base)
    rule = cand / "checks" / "smem-capacity.py"
    rule.write_text(rule.read_text().replace('SEVERITY = "blocking"', 'SEVERITY = "report"'))
    (cand / "primitives" / "brand-new.py").write_text("SPELLING = 'x'\n")
    (cand / "primitives" / "elementwise.py").unlink()
    rows = {r["path"]: r for r in semantics_changes(base, cand)}
    assert set(rows) == {"rules/checks/smem-capacity.py", "rules/primitives/elementwise.py"}
    assert "severity blocking -> report" in rows["rules/checks/smem-capacity.py"]["detail"]
    assert rows["rules/primitives/elementwise.py"]["change"] == "removed"
    preview = cand / "checks" / "launch-limits.py"
    preview.write_text(preview.read_text().replace('STATUS = "stable"', 'STATUS = "preview"'))
    assert "R011" in default_off(cand)


@pytest.mark.slow
def test_a_rule_motivated_by_no_labelled_defect_is_blocked_naming_it(project, tmp_path):
    """A new stable rule that fires only on kernels of one name, motivated by a file that is
    not a labelled schedule and by a valid one: unsharded, neither reads `not in shard`;
    each blocks, naming the rule and the file."""
    (project / "notes.txt").write_text("T980 catches gemm_ws_s8\n")
    valid = next(p for p in sorted((project / "corpus" / "valid" / "scale").glob("*.cake")))
    valid_rel = valid.relative_to(project).as_posix()
    path = rule_file(tmp_path / "by-name.py", "T980", "by-name", """\
        if ctx.schedule.name == "gemm_ws_s8":
            yield ctx.finding(ctx.schedule, "this kernel is bad")
        """, motivated_by=("notes.txt", valid_rel))
    text = path.read_text().replace('STATUS = "preview"', 'STATUS = "stable"')
    path.write_text(text)
    code, data, md = propose(str(path), "--no-record", "--corpus", "corpus/invalid/gemm")
    assert code == 1, md
    statuses = {m["file"]: m["status"] for m in data["motivating"]}
    assert statuses == {"notes.txt": "not labelled", valid_rel: "not invalid"}
    blocked = {b["files"][0] for b in data["blockers"] if b["kind"] == "motivating-case"}
    assert blocked == {"notes.txt", valid_rel}
    assert "not in shard" not in md


@pytest.mark.slow
def test_a_changed_stable_rule_without_motivation_is_blocked(project):
    path = project / "rules" / "checks" / "smem-capacity.py"
    text = path.read_text()
    version = re.search(r'VERSION = "(\d+)\.(\d+)\.(\d+)"', text)
    text = re.sub(r"MOTIVATED_BY = \([^)]*\)", "MOTIVATED_BY = ()", text)
    path.write_text(text.replace(version[0], f'VERSION = "{version[1]}.{int(version[2]) + 1}.0"'))
    _relock()
    code, data, md = propose("--no-record", "--corpus", "corpus/invalid/gemm")
    assert code == 1, md
    [blocker] = [b for b in data["blockers"] if b["kind"] == "motivating-case"]
    assert blocker["rule"] == "R001" and "names no motivating case" in blocker["message"]


@pytest.mark.slow
def test_a_symlinked_corpus_schedule_is_refused_and_never_read(project):
    """A corpus schedule that is a symlink into .git/: a blocker names it, and nothing of
    the target (git's config) reaches the reports."""
    link = project / "corpus" / "invalid" / "gemm" / "config.cake"
    link.symlink_to(project / ".git" / "config")
    code, data, md = propose("--no-record", "--corpus", "corpus/invalid/gemm")
    assert code == 1, md
    [blocker] = [b for b in data["blockers"] if b["kind"] == "symlink"]
    assert blocker["files"] == ["corpus/invalid/gemm/config.cake"]
    assert "corpus/invalid/gemm/config.cake" not in {f["file"] for f in data["flips"]}
    secret = (project / ".git" / "config").read_text()
    for report in Path("reports").iterdir():
        text = report.read_text()
        assert "repositoryformatversion" not in text, report
    assert "repositoryformatversion" in secret


def test_a_symlinked_proposed_file_is_a_usage_error(project, tmp_path):
    outside = tmp_path / "secret.toml"
    outside.write_text('[costmodel]\nversion = "9.9.9"\nsecret = "hunter2"\n')
    link = tmp_path / "default.toml"
    link.symlink_to(outside)
    result = CliRunner().invoke(app, ["propose-rule", str(link), "--no-record", "--gpu",
                                      "off", "--jobs", "1"])
    assert result.exit_code == 2, result.output
    assert "a symbolic link" in result.output and "hunter2" not in result.output
    assert not Path("reports").exists() or not any(
        "hunter2" in p.read_text() for p in Path("reports").iterdir())


def test_a_symlinked_rulebook_plugin_is_a_usage_error(project):
    target = project / "rules" / "checks" / "smem-capacity.py"
    (project / "rules" / "checks" / "alias.py").symlink_to(target)
    result = CliRunner().invoke(app, ["propose-rule", "--no-record", "--gpu", "off",
                                      "--jobs", "1", "--corpus", "corpus/invalid/gemm"])
    assert result.exit_code == 2, result.output
    assert "rules/checks/alias.py: a symbolic link" in result.output


@pytest.mark.slow
def test_cost_values_beyond_physics_are_blocked_naming_the_key(project, tmp_path):
    code, data = _propose_cost_edit(project, tmp_path,
                                    "hbm_bandwidth = { value = 3350000000000.0",
                                    "hbm_bandwidth = { value = 1e308")
    assert code == 1
    [blocker] = [b for b in data["blockers"] if b["kind"] == "cost-out-of-range"]
    assert blocker["files"] == ["rules/costmodel/sm_90a.toml"]
    assert "device.h100_sxm.hbm_bandwidth = 1e+308 is outside" in blocker["message"]


@pytest.mark.slow
def test_a_cost_judgement_that_fails_blocks(project, tmp_path, monkeypatch):
    """The contained judgement dies (here: its worker killed, as the OOM killer would):
    the proposal is blocked, not merely noted."""
    from cakegov.govern import isolate

    real = isolate.run_job

    def dies(job, *args, **kwargs):
        if job.mode != "cost":
            return real(job, *args, **kwargs)
        return isolate.JobOutput(failures=[{
            "rule": None, "name": "", "file": "judgement", "kind": "crash", "where": "cost",
            "message": "the worker was killed by SIGKILL"}])

    monkeypatch.setattr(isolate, "run_job", dies)
    path = tmp_path / "sm_90a.toml"
    text = (project / "rules" / "costmodel" / "sm_90a.toml").read_text()
    path.write_text(text.replace('version = "1.0.0"', 'version = "1.1.0"', 1).replace(
        "hbm_efficiency = { value = 0.85", "hbm_efficiency = { value = 0.8", 1))
    code, data, _ = propose(str(path), "--no-record", "--corpus", "corpus/valid/scale")
    assert code == 1, data["blockers"]
    [blocker] = [b for b in data["blockers"] if b["kind"] == "cost-judgement-failed"]
    assert blocker["files"] == ["rules/costmodel/sm_90a.toml"]
    assert "killed by SIGKILL" in blocker["message"]


def test_physical_ranges_of_cost_parameters():
    from cakegov.cost.params import load_params, physical_problems, with_value

    base = load_params(ROOT / "rules" / "costmodel" / "sm_90a.toml")
    assert physical_problems(base, base, 233472) == []
    assert [k for k, _ in physical_problems(with_value(base, "sms", 1e308), base)] == \
        ["device.h100_sxm.sms", "device.h200_sxm.sms"]
    doubled = physical_problems(with_value(base, "tensor_peak", 989.4e12 * 2.5), base)
    assert doubled and "2x away from the base's datasheet value" in doubled[0][1]
    reserved = physical_problems(with_value(base, "smem_reserved_bytes", 300000), base, 233472)
    assert reserved == [("params.smem_reserved_bytes", "300000 is outside 0..233472")]
