"""The GitHub merge gate: schema-valid workflows and action, least privilege, no script
injection, and the shell steps that validate and route data, run here with stubs."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import git
import pytest
from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / ".github" / "workflows"
GATE = WORKFLOWS / "verifier-gate.yml"
COMMENT = WORKFLOWS / "verifier-gate-comment.yml"
ACTION = ROOT / ".github" / "actions" / "cakegov-gate" / "action.yml"
MARKER = "<!-- cakegov-proposal -->"
# Contexts an attacker controls through a pull request (GitHub's script-injection guide).
UNTRUSTED = re.compile(
    r"github\.(head_ref|event\.(pull_request\.(title|body|head\.(ref|label|repo))|"
    r"issue\.(title|body)|comment\.body|review\.body|review_comment\.body|"
    r"head_commit\.(message|author)|commits|workflow_run\.(head_branch|head_commit|"
    r"display_title|pull_requests)))")


def load(path: Path) -> dict:
    return YAML(typ="safe").load(path.read_text(encoding="utf-8"))


def validate(schema: str, path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema, str(path)],
        capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("path", sorted(WORKFLOWS.glob("*.yml")), ids=lambda p: p.name)
def test_workflows_match_githubs_schema(path):
    result = validate("vendor.github-workflows", path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_action_matches_githubs_schema():
    result = validate("vendor.github-actions", ACTION)
    assert result.returncode == 0, result.stdout + result.stderr


def test_schema_check_rejects_a_broken_workflow(tmp_path):
    bad = tmp_path / "bad.yml"
    bad.write_text(GATE.read_text().replace("contents: read", "contents: maybe", 1))
    result = validate("vendor.github-workflows", bad)
    assert result.returncode != 0
    assert "maybe" in result.stdout + result.stderr


def _jobs_with(permission: str, level: str) -> list[tuple[str, str]]:
    found = []
    for path in sorted(WORKFLOWS.glob("*.yml")):
        doc = load(path)
        top = doc.get("permissions") or {}
        for name, job in doc["jobs"].items():
            perms = job.get("permissions", top)
            if isinstance(perms, str):  # read-all / write-all
                perms = {permission: perms.split("-")[0]}
            if (perms or {}).get(permission) == level:
                found.append((path.name, name))
    return found


def test_pull_request_job_is_read_only():
    doc = load(GATE)
    assert list(doc["on"]) == ["pull_request"]
    assert doc["permissions"] == {"contents": "read"}
    for job in doc["jobs"].values():
        assert job["permissions"] == {"contents": "read"}
        checkout = next(s for s in job["steps"] if s.get("uses", "").startswith(
            "actions/checkout@"))
        assert checkout["with"]["fetch-depth"] == 0
        assert checkout["with"]["persist-credentials"] is False


def test_only_the_workflow_run_job_writes_to_pull_requests():
    assert _jobs_with("pull-requests", "write") == [("verifier-gate-comment.yml", "comment")]
    doc = load(COMMENT)
    assert list(doc["on"]) == ["workflow_run"]
    assert doc["on"]["workflow_run"]["workflows"] == [load(GATE)["name"]]
    assert doc["permissions"] == {}
    steps = doc["jobs"]["comment"]["steps"]
    checkouts = [s for s in steps if "checkout" in s.get("uses", "")]
    # Only the default branch (no ref: the workflow_run's own branch) is checked out, to
    # install the trusted engine; never the pull request's head.
    assert len(checkouts) == 1 and "ref" not in checkouts[0]["with"]
    assert checkouts[0]["with"]["persist-credentials"] is False
    runs = [s.get("run", "") for s in steps]
    assert any("render-proposal artifact/report/proposal.json" in r or
               'render-proposal "$json"' in r for r in runs)
    assert not any("artifact/comment.md" in r or "artifact/report/proposal.md" in r
                   for r in runs), "the comment is rendered, never taken from the artifact"


def _run_scripts() -> list[tuple[str, str, str]]:
    scripts = []
    for path in (GATE, COMMENT):
        for job in load(path)["jobs"].values():
            scripts += [(path.name, s.get("name", "?"), s["run"]) for s in job["steps"]
                        if "run" in s]
    scripts += [(ACTION.name, s.get("name", "?"), s["run"])
                for s in load(ACTION)["runs"]["steps"] if "run" in s]
    return scripts


def test_no_expression_is_interpolated_into_a_run_script():
    scripts = _run_scripts()
    assert len(scripts) >= 8
    for file, step, script in scripts:
        assert "${{" not in script, f"{file} step {step!r} interpolates an expression; " \
                                    "pass it through env instead"


def test_no_untrusted_pull_request_field_reaches_the_gate():
    for path in (GATE, COMMENT, ACTION):
        text = path.read_text()
        assert not UNTRUSTED.search(text), f"{path.name}: {UNTRUSTED.search(text).group()}"


def test_gate_judges_against_the_base_branch_and_uploads_the_report():
    steps = load(GATE)["jobs"]["propose"]["steps"]
    # The judge is the base commit's action and engine, not the pull request's.
    gate = next(s for s in steps if s.get("uses") == "./.cakegov-base/.github/actions/cakegov-gate")
    assert gate["with"]["cakegov-spec"] == "./.cakegov-base"
    assert gate["with"]["require-sandbox"] == "true"
    base = next(s for s in steps if s.get("with", {}).get("path") == ".cakegov-base")
    assert base["with"]["ref"] == "${{ github.event.pull_request.base.sha }}"
    assert gate["with"]["base-ref"] == "origin/${{ github.base_ref }}"
    assert gate["with"]["paths"] == "${{ steps.changed.outputs.paths }}"
    assert gate["with"]["report-dir"].startswith("cakegov-artifact/")
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact"))
    assert upload["if"] == "always()"
    assert upload["with"]["path"] == "cakegov-artifact/"
    record = next(s for s in steps if "pr-number.txt" in s.get("run", ""))
    assert record["env"]["PR_NUMBER"] == "${{ github.event.pull_request.number }}"
    action_steps = load(ACTION)["runs"]["steps"]
    summary = next(s for s in action_steps if "GITHUB_STEP_SUMMARY" in s.get("run", ""))
    assert summary["if"] == "always()"


# -- the shell steps, run with stub commands -------------------------------------------


def _stub(bin_dir: Path, name: str, script: str) -> None:
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / name
    path.write_text("#!/usr/bin/env bash\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def _step(path: Path, name: str, job: str | None = None) -> dict:
    doc = load(path)
    steps = doc["runs"]["steps"] if job is None else doc["jobs"][job]["steps"]
    return next(s for s in steps if s.get("name") == name)


def _bash(script: str, cwd: Path, env: dict[str, str]) -> tuple[int, dict[str, str], str]:
    output = cwd / "github-output.txt"
    output.write_text("")
    full = {**os.environ, **env, "GITHUB_OUTPUT": str(output),
            "PATH": f"{cwd / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    (cwd / "step.sh").write_text(script)  # as GitHub runs `shell: bash` steps
    proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "step.sh"],
                          cwd=cwd, env=full,
                          capture_output=True, text=True, timeout=60)
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)
    return proc.returncode, outputs, proc.stdout + proc.stderr


def _artifact(tmp_path: Path, pr: str, body: str) -> None:
    """The artifact's PR number and what the trusted render step wrote from its JSON."""
    (tmp_path / "artifact" / "report").mkdir(parents=True)
    (tmp_path / "artifact" / "pr-number.txt").write_text(pr)
    (tmp_path / "rendered").mkdir()
    (tmp_path / "rendered" / "proposal.md").write_text(body)
    (tmp_path / "rendered" / "proposal.sarif").write_text("{}")


VALID_BODY = f"{MARKER}\n**eligible for merge**\n"


@pytest.mark.parametrize(("pr", "body", "error"), [
    ("17\n", VALID_BODY, None),
    ("17; rm -rf /\n", VALID_BODY, "not a pull request number"),
    ("0\n", VALID_BODY, "not a pull request number"),
    ("17\n", "**eligible for merge**\n" + MARKER, "does not start with"),
    ("17\n", MARKER + "\n" + "x" * 70_000, "over 60000"),
])
def test_comment_job_validates_the_artifact(tmp_path, pr, body, error):
    _artifact(tmp_path, pr, body)
    _stub(tmp_path / "bin", "gh", 'echo "$@" >> gh-calls.txt; echo abc123\n')
    step = _step(COMMENT, "Validate the artifact", job="comment")
    rc, outputs, log = _bash(step["run"], tmp_path, {"REPO": "o/r", "HEAD_SHA": "abc123",
                                                     "GH_TOKEN": "x"})
    if error is None:
        assert rc == 0, log
        assert outputs["pr"] == "17"
        assert outputs["sarif"] == "rendered/proposal.sarif"
        assert "repos/o/r/pulls/17" in (tmp_path / "gh-calls.txt").read_text()
    else:
        assert rc == 1
        assert error in log
        assert "pr" not in outputs


def test_comment_job_skips_a_pull_request_that_moved_on(tmp_path):
    _artifact(tmp_path, "17\n", VALID_BODY)
    _stub(tmp_path / "bin", "gh", "echo def456\n")
    step = _step(COMMENT, "Validate the artifact", job="comment")
    rc, outputs, log = _bash(step["run"], tmp_path, {"REPO": "o/r", "HEAD_SHA": "abc123"})
    assert rc == 0
    assert "pr" not in outputs
    assert "moved on" in log


@pytest.mark.parametrize(("existing", "method"), [("", "POST"), ("991", "PATCH")])
def test_comment_job_updates_one_marked_comment(tmp_path, existing, method):
    _artifact(tmp_path, "17\n", VALID_BODY)
    _stub(tmp_path / "bin", "gh", "{ printf '%s ' \"$@\" | tr '\\n' ' '; echo; } >> gh-calls.txt\n"
          f'if [ "$2" = "--paginate" ]; then echo "{existing}"; fi\n')
    step = _step(COMMENT, "Create or update the comment", job="comment")
    rc, _, log = _bash(step["run"], tmp_path, {"REPO": "o/r", "PR": "17"})
    assert rc == 0, log
    calls = [c.strip() for c in (tmp_path / "gh-calls.txt").read_text().splitlines()]
    assert calls[0].startswith("api --paginate repos/o/r/issues/17/comments")
    assert MARKER in calls[0]
    target = "repos/o/r/issues/comments/991" if existing else "repos/o/r/issues/17/comments"
    assert calls[1] == f"api -X {method} {target} -F body=@rendered/proposal.md"


@pytest.mark.parametrize(("rc", "verdict"), [(0, "eligible"), (1, "blocked"),
                                             (3, "evidence-unavailable"), (7, "internal-error")])
def test_action_runs_propose_rule_and_maps_its_exit_status(tmp_path, rc, verdict):
    _stub(tmp_path / "bin", "cakegov", 'printf "%s\\n" "$@" > argv.txt\n'
          f'printf "{MARKER}\\nreport\\n" > "$REPORT_DIR/report.md"\nexit {rc}\n')
    step = _step(ACTION, "cakegov propose-rule")
    code, outputs, log = _bash(step["run"], tmp_path, {
        "BASE_REF": "origin/main", "PATHS": "rules/checks/new-rule.py *", "GPU": "off",
        "REPORT_DIR": "out", "FORMATS": "md,json"})
    assert code == 0, log
    argv = (tmp_path / "argv.txt").read_text().splitlines()
    assert argv == ["propose-rule", "rules/checks/new-rule.py", "*", "--base", "origin/main",
                    "--gpu", "off", "--report-dir", "out", "--format", "md,json"]
    assert outputs == {"verdict": verdict, "exit-code": str(rc), "report-path": "out",
                       "markdown": "out/report.md"}


def test_action_judges_the_working_tree_rulebook_without_paths(tmp_path):
    _stub(tmp_path / "bin", "cakegov", 'printf "%s\\n" "$@" > argv.txt\n')
    step = _step(ACTION, "cakegov propose-rule")
    code, outputs, log = _bash(step["run"], tmp_path, {
        "BASE_REF": "", "PATHS": "", "GPU": "auto", "REPORT_DIR": "out",
        "FORMATS": "md"})
    assert code == 0, log
    argv = (tmp_path / "argv.txt").read_text().splitlines()
    assert argv == ["propose-rule", "--gpu", "auto", "--report-dir", "out", "--format", "md"]
    assert outputs["markdown"] == ""


def _pr_repo(tmp_path: Path, change) -> Path:
    repo = git.Repo.init(tmp_path / "repo", initial_branch="main")
    work = Path(repo.working_tree_dir)
    for rel in ("rules/checks/old-rule.py", "rules/targets/sm_90a.toml", "README.md"):
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(f"# {rel}\n")
    repo.index.add(["rules", "README.md"])
    base = repo.index.commit("base")
    repo.create_head("origin-main", base)
    repo.git.update_ref("refs/remotes/origin/main", base.hexsha)
    change(work, repo)
    repo.index.commit("pull request")
    return work


@pytest.mark.parametrize(("change", "expected"), [
    (lambda w, r: (w.joinpath("rules/checks/new-rule.py").write_text("x\n"),
                   r.index.add(["rules/checks/new-rule.py"])), "rules/checks/new-rule.py"),
    (lambda w, r: (w.joinpath("README.md").write_text("y\n"), r.index.add(["README.md"])), ""),
    (lambda w, r: (w.joinpath("rules/checks/$(touch pwned).py").write_text("x\n"),
                   r.index.add(["rules/checks/$(touch pwned).py"])), ""),
    (lambda w, r: (w.joinpath("rules/checks/new-rule.py").write_text("x\n"),
                   r.index.add(["rules/checks/new-rule.py"]),
                   r.index.remove(["rules/checks/old-rule.py"], working_tree=True)), ""),
], ids=["added-rule", "no-plugin-change", "hostile-name", "rule-removed"])
def test_gate_proposes_the_changed_plugin_files(tmp_path, change, expected):
    work = _pr_repo(tmp_path, change)
    step = _step(GATE, "Changed plugin files", job="propose")
    rc, outputs, log = _bash(step["run"], work, {"BASE_REF": "main"})
    assert rc == 0, log
    assert outputs["paths"].strip() == expected
    assert not (work / "pwned").exists()


def test_every_third_party_action_is_pinned_to_a_commit():
    for path in [*sorted(WORKFLOWS.glob("*.yml")), ACTION]:
        for line in path.read_text().splitlines():
            m = re.search(r"uses:\s*([^\s#]+)", line)
            if m and not m.group(1).startswith("./"):
                assert re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", m.group(1)), \
                    f"{path.name}: {m.group(1)} is not pinned to a commit SHA"


@pytest.mark.parametrize(("labels", "digest"), [
    ('["bug", "cakegov-accept-' + "ab" * 16 + '"]', "ab" * 16),
    ('["cakegov-accept-' + "ab" * 15 + '"]', ""),  # too short: not an acceptance
    ('["cakegov-accept-' + "AB" * 16 + '"]', ""),  # not lower-case hex
    ('["cakegov-accept-$(touch pwned)"]', ""),
    ("[]", ""),
], ids=["accepted", "short", "upper", "hostile", "none"])
def test_a_maintainer_label_is_the_only_way_to_accept_a_contract(tmp_path, labels, digest):
    step = _step(GATE, "A contract change a maintainer accepted", job="propose")
    rc, outputs, log = _bash(step["run"], tmp_path, {"LABELS": labels})
    assert rc == 0, log
    assert outputs["digest"] == digest
    assert not (tmp_path / "pwned").exists()
    gate = _step(GATE, "Judge the proposal", job="propose")
    assert gate["with"]["accept-contract"] == "${{ steps.accept.outputs.digest }}"


def test_the_action_passes_only_a_hex_acceptance(tmp_path):
    _stub(tmp_path / "bin", "cakegov", 'printf "%s\\n" "$@" > argv.txt\n')
    step = _step(ACTION, "cakegov propose-rule")
    env = {"BASE_REF": "", "PATHS": "", "GPU": "off", "REPORT_DIR": "out", "FORMATS": "md"}
    for given, passed in (("cd" * 16, True), ("--no-cache", False), ("cd" * 15, False)):
        code, _, log = _bash(step["run"], tmp_path, {**env, "ACCEPT": given})
        assert code == 0, log
        argv = (tmp_path / "argv.txt").read_text().splitlines()
        assert (["--accept-contract", given] == argv[1:3]) is passed, argv


def test_a_digest_prefix_accepts_only_its_own_contract():
    from cakegov.govern.changes import accepts

    digest = "0123456789abcdef" * 4
    assert accepts(digest, digest) and accepts(digest[:32], digest)
    assert accepts(digest[:32].upper(), digest)
    assert not accepts(digest[:31], digest) and not accepts("", digest)
    assert not accepts(None, digest) and not accepts("f" * 32, digest)
