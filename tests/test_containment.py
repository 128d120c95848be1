"""Containment of rule-plugin workers (cakegov/govern/isolate.py): each test runs one
hostile plugin through `run_job`, under bwrap (skipped where it does not work) and under
the fallback (input copies, scrubbed environment, hard limits, subreaper)."""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import signal
import sys
import time
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cakegov.cli import app
from cakegov.govern import isolate
from cakegov.govern.isolate import BWRAP_CONTAINMENT, FALLBACK_CONTAINMENT, Job, run_job

from .conftest import ROOT
from .test_propose import EXAMPLE, IGNORE, propose, rule_file, template  # noqa: F401

SCHEDULE = "corpus/valid/scale"
MODES = [pytest.param("bwrap", marks=pytest.mark.skipif(
    isolate.bwrap_available() is None, reason="bwrap is not available or does not work")),
    "fallback"]


@pytest.fixture
def project(tmp_path) -> Path:
    root = tmp_path / "project"
    shutil.copytree(ROOT / "rules", root / "rules", ignore=IGNORE)
    shutil.copytree(ROOT / "corpus" / "workloads", root / "corpus" / "workloads", ignore=IGNORE)
    shutil.copytree(ROOT / SCHEDULE, root / SCHEDULE, ignore=IGNORE)
    (root / "ledger.sqlite").write_bytes(b"SQLite format 3\x00 ledger")
    return root


def hostile(root: Path, body: str, name: str = "hostile", code: str = "T950") -> None:
    rule_file(root / "rules" / "checks" / f"{name}.py", code, name, body)


def job(root: Path, mode: str, **kw) -> Job:
    files = sorted((root / SCHEDULE).glob("*.cake"))[:1]
    return Job(side="candidate", mode="check", rules=root / "rules",
               workloads=root / "corpus" / "workloads", root=root,
               files=[(p.relative_to(root).as_posix(), str(p)) for p in files],
               containment=mode, **kw)


def messages(out, code: str = "T950") -> list[str]:
    return [f["message"] for r in out.results.values() if r.get("result")
            for f in r["result"]["findings"] if f["code"] == code]


def expected(mode: str) -> str:
    return BWRAP_CONTAINMENT if mode == "bwrap" else FALLBACK_CONTAINMENT


def tree(path: Path) -> dict[str, str]:
    return {p.relative_to(path).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


def with_marker(marker: str) -> list[int]:
    out = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if marker.encode() in Path(f"/proc/{entry.name}/cmdline").read_bytes():
                    out.append(int(entry.name))
            except OSError:
                pass
    return out


@pytest.mark.parametrize("mode", MODES)
def test_setsid_daemon_does_not_outlive_the_job(project, mode):
    """(a) A double-forked, setsid'd child that sleeps is dead when run_job returns."""
    marker = f"cakegov-daemon-{uuid.uuid4().hex}"
    hostile(project, f'''\
        import sys
        pid = os.fork()
        if pid == 0:
            os.setsid()
            if os.fork() == 0:
                os.execv(sys.executable, [sys.executable, "-c",
                         "import time; time.sleep(300)", "{marker}"])
            os._exit(0)
        os.waitpid(pid, 0)
        yield ctx.finding(None, "daemon started")
        ''')
    try:
        out = run_job(job(project, mode))
        assert out.containment == expected(mode)
        assert messages(out) == ["daemon started"], out
        alive = with_marker(marker)
        for _ in range(50):  # a pid namespace's teardown may still be under way
            if not alive:
                break
            time.sleep(0.1)
            alive = with_marker(marker)
        assert alive == []
    finally:
        for pid in with_marker(marker):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("mode", MODES)
def test_plugin_cannot_change_the_checkout(project, mode):
    """(b) Writes to corpus files, the ledger and the rulebook, and deleting
    rules/rulebook.lock, leave the originals as they were. Relative paths (the worker's
    cwd used to be the checkout) and paths next to the plugin's own file are tried in both
    modes; absolute paths into the checkout only under bwrap (in the fallback the worker
    runs as the same user, so an absolute path it guesses stays writable)."""
    absolute = [str(project)] if mode == "bwrap" else []
    hostile(project, f'''\
        import pathlib
        done = []
        here = pathlib.Path(__file__).resolve().parent.parent.parent.parent
        for base in [pathlib.Path("."), here] + [pathlib.Path(p) for p in {absolute!r}]:
            for target in [base / "rules" / "rulebook.lock", base / "ledger.sqlite"]:
                try:
                    target.unlink()
                    done.append(str(target))
                except OSError:
                    pass
            for target in list((base / "{SCHEDULE}").glob("*.cake")) + [
                    base / "ledger.sqlite", base / "rules" / "checks" / "smem-capacity.py"]:
                try:
                    with open(target, "a") as f:
                        f.write("tampered")
                    done.append(str(target))
                except OSError:
                    pass
        yield ctx.finding(None, "wrote: " + ", ".join(done))
        ''')
    before = tree(project)
    out = run_job(job(project, mode))
    assert out.containment == expected(mode)
    assert messages(out), out  # the plugin ran
    assert (project / "rules" / "rulebook.lock").is_file()
    assert tree(project) == before


@pytest.mark.parametrize("mode", MODES)
def test_tokens_do_not_reach_the_plugin(project, mode, monkeypatch):
    """(c) GITHUB_TOKEN (and other secret-looking variables) of the parent's environment
    are not in the plugin's environment."""
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_containment_test_secret")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws_containment_test_secret")
    monkeypatch.setenv("HARMLESS_SETTING", "visible-but-unneeded")
    hostile(project, '''\
        yield ctx.finding(None, repr(dict(os.environ)))
        ''')
    out = run_job(job(project, mode))
    assert out.containment == expected(mode)
    [message] = messages(out)
    assert "GITHUB_TOKEN" not in message and "ghp_containment_test_secret" not in message
    assert "aws_containment_test_secret" not in message
    assert "visible-but-unneeded" not in message  # an allow-list, not a deny-list


@pytest.mark.parametrize("mode", MODES)
def test_plugin_cannot_raise_its_memory_limit(project, mode):
    """(d) With memory_limit_mb=512 the limit is hard: raising it fails, and allocating
    2 GB ends in a MemoryError, recorded as a memory failure of the rule."""
    hostile(project, '''\
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        raised = []
        for limits in [(hard, hard), (resource.RLIM_INFINITY, resource.RLIM_INFINITY)]:
            try:
                resource.setrlimit(resource.RLIMIT_AS, limits)
                raised.append(limits)
            except (ValueError, OSError):
                pass
        now = resource.getrlimit(resource.RLIMIT_AS)
        yield ctx.finding(None, f"limits {soft} {hard} now {now}")
        ''', name="limit-reporter", code="T951")
    hostile(project, '''\
        import resource
        try:
            resource.setrlimit(resource.RLIMIT_AS,
                               (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        except (ValueError, OSError):
            pass
        blob = bytearray(2 << 30)
        yield ctx.finding(None, str(len(blob)))
        ''', name="memory-hog", code="T952")
    out = run_job(job(project, mode, memory_limit_mb=512))
    assert out.containment == expected(mode)
    cap = 512 << 20
    assert messages(out, "T951") == [f"limits {cap} {cap} now ({cap}, {cap})"]
    assert messages(out, "T952") == []
    [result] = out.results.values()
    failures = result["failures"] + out.failures
    assert [(f["rule"], f["kind"]) for f in failures] == [("T952", "memory")], failures


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("where", ["stdout", "protocol"])
def test_flood_of_output_is_a_failure_and_stays_bounded(project, mode, where):
    """(e) A plugin printing 16 MiB per schedule (to its stdout, which the worker sends to
    stderr, or straight onto the progress channel) becomes an 'output exceeded' failure of
    that rule; the parent never holds the flood (its peak RSS grows by far less than the
    16 MiB per schedule times the schedules)."""
    if where == "stdout":
        body = 'print("x" * (16 << 20), flush=True)\n'
    else:  # the protocol pipe is the worker's lowest fd above 2 that is a pipe
        body = '''\
            import stat
            for fd in range(3, 64):
                try:
                    if stat.S_ISFIFO(os.fstat(fd).st_mode):
                        os.write(fd, b"x" * (16 << 20))
                        break
                except OSError:
                    pass
            '''
    hostile(project, body + "yield from ()\n", name="flood", code="T953")
    work = job(project, mode)
    files = sorted((project / SCHEDULE).glob("*.cake"))[:4]
    work.files = [(p.relative_to(project).as_posix(), str(p)) for p in files]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out = run_job(work)
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak) / 1024
    assert out.containment == expected(mode)
    flood = [f for f in out.failures if f["rule"] == "T953"]
    assert flood and flood[0]["kind"] == "output", out.failures
    assert "output exceeded" in flood[0]["message"] or "progress line exceeded" in \
        flood[0]["message"]
    assert len(flood[0]["message"]) < 1000
    assert out.quarantined == ["T953"]
    assert set(out.results) == {rel for rel, _ in work.files}  # the rest was judged
    assert grown_mib < 64 * len(work.files)


def test_require_sandbox_without_bwrap_is_a_load_error(project, monkeypatch):
    """(f) require_sandbox and no bwrap: nothing runs, the job has a load error."""
    marker = project / "ran"
    hostile(project, f'''\
        open({str(marker)!r}, "w").close()
        yield from ()
        ''')
    monkeypatch.setattr(isolate, "bwrap_available", lambda: None)
    out = run_job(job(project, "auto", require_sandbox=True))
    assert out.load_error and "sandbox is required" in out.load_error
    assert out.results == {} and out.info is None and out.containment is None
    assert not marker.exists()
    out = run_job(job(project, "auto"))  # without the requirement: the fallback
    assert out.containment == FALLBACK_CONTAINMENT and out.load_error is None
    assert marker.exists()


def test_containment_can_be_forced_by_the_environment(project, monkeypatch):
    monkeypatch.setenv("CAKEGOV_CONTAINMENT", "fallback")
    hostile(project, "yield from ()\n")
    assert run_job(job(project, "auto")).containment == FALLBACK_CONTAINMENT


@pytest.fixture
def gate_project(template, tmp_path, monkeypatch) -> Path:  # noqa: F811
    root = tmp_path / "gate" / "project"
    shutil.copytree(template, root)
    monkeypatch.chdir(root)
    return root


@pytest.mark.slow
def test_propose_rule_reports_the_containment(gate_project):
    _, data, md = propose(EXAMPLE, "--no-record", "--no-cache", "--corpus",
                             "corpus/invalid/scale")
    assert data["options"]["containment"] in (BWRAP_CONTAINMENT, FALLBACK_CONTAINMENT), data
    assert data["options"]["require_sandbox"] is False
    assert f"containment: {data['options']['containment']}" in md


def test_propose_rule_require_sandbox_without_bwrap_exits_2(gate_project, monkeypatch):
    monkeypatch.setattr(isolate, "bwrap_available", lambda: None)
    result = CliRunner().invoke(app, ["propose-rule", EXAMPLE, "--no-record", "--no-cache",
                                      "--require-sandbox", "--gpu", "off", "--jobs", "1"])
    assert result.exit_code == 2, result.output
    assert "sandbox is required" in result.output


@pytest.mark.skipif(isolate.bwrap_available() is None, reason="bwrap is not available")
def test_under_bwrap_no_corpus_label_or_ledger_is_readable(project):
    """A plugin that reads labelled corpus files by absolute path, in the judged checkout
    and in the repository the engine runs from, finds them hidden; the rulebook and the
    workloads it needs are still there."""
    (project / "corpus" / "invalid").mkdir(parents=True)
    (project / "corpus" / "invalid" / "x.cake").write_text("# expect: R001\n")
    targets = [project / "corpus" / "invalid" / "x.cake", project / "ledger.sqlite",
               ROOT / "corpus" / "invalid" / "gemm" / "smem_over_capacity.cake", ROOT / ".git"]
    hostile(project, f'''\
        import pathlib
        seen = [p for p in {[str(t) for t in targets]!r} if pathlib.Path(p).exists()]
        ok = pathlib.Path({str(project / "corpus" / "workloads")!r}).is_dir()
        yield ctx.finding(None, f"seen={{seen}} workloads={{ok}}")
        ''')
    out = run_job(job(project, "bwrap"))
    assert messages(out) == ["seen=[] workloads=True"]


@pytest.mark.skipif(isolate.bwrap_available() is None, reason="bwrap is not available")
def test_under_bwrap_only_the_allowed_files_exist(project, tmp_path):
    """The sandbox holds the system, the interpreter, the engine and the job's inputs, not
    the host's file system: a file next to the project (a sibling checkout, a secret), the
    home directory and /etc/shadow are absent, and the engine's repository shows only its
    package (its corpus and git directory are not there)."""
    secret = tmp_path / "secret.txt"
    secret.write_text("token")
    targets = [str(secret), str(Path.home() / ".bashrc"), str(Path.home()), "/etc/shadow",
               "/etc/hostname", str(ROOT / "README.md"), str(ROOT / "corpus")]
    hostile(project, f'''\
        import pathlib, sys
        seen = [p for p in {targets!r} if pathlib.Path(p).exists()]
        engine = pathlib.Path({str(ROOT / "cakegov" / "cli.py")!r}).is_file()
        python = pathlib.Path(sys.executable).exists()
        yield ctx.finding(None, f"seen={{seen}} engine={{engine}} python={{python}}")
        ''')
    out = run_job(job(project, "bwrap"))
    home_holds_python = Path(sys.base_prefix).is_relative_to(Path.home())
    seen = [] if not home_holds_python else [str(Path.home())]
    assert messages(out) == [f"seen={seen} engine=True python=True"]


@pytest.mark.parametrize("mode", MODES)
def test_worker_strings_lose_control_characters_and_lone_surrogates(project, mode):
    """A message with a lone surrogate (not encodable: it crashed the JSON report), a NUL,
    a terminal escape and a right-to-left override reaches the parent with each replaced
    by U+FFFD; tab and newline stay."""
    hostile(project, '''\
        yield ctx.finding(None, "a\\ud800b\\x00c\\x1b[2Jd\\u202ee\\tf\\ng")
        ''')
    out = run_job(job(project, mode))
    assert messages(out) == ["a\ufffdb\ufffdc\ufffd[2Jd\ufffde\tf\ng"]


def test_a_finding_outside_the_source_is_dropped_as_a_failure():
    """Line 0 or a negative column from a plugin would break the SARIF (it failed schema
    validation after the other reports were written): the finding becomes a failure of
    its rule, like one that claims another rule's code."""
    from cakegov.govern.judge import _run

    finding = {"code": "T950", "rule": "hostile", "severity": "blocking",
               "authority": "legality", "message": "m", "file": "a.cake", "path": "schedule",
               "span": {"line": 0, "col": -5, "end_line": 0, "end_col": 1}}
    event = {"file": "a.cake", "result": {"file": "a.cake", "verdict": "rejected",
                                          "findings": [finding]}}
    run = _run(event, {"T950": "hostile"})
    assert run.result is not None and run.result.findings == ()
    assert [f["kind"] for f in run.failures] == ["crash"]
    assert "not a source range" in run.failures[0]["message"]
    good = dict(finding, span={"line": 3, "col": 2, "end_line": 3, "end_col": 9})
    kept = _run({**event, "result": {**event["result"], "findings": [good]}},
                {"T950": "hostile"})
    assert len(kept.result.findings) == 1 and not kept.failures


# ---- the sandbox probe (issue 40) -------------------------------------------------------


def _stub_bwrap(tmp_path, monkeypatch, stderr: str, code: int) -> None:
    """A `bwrap` first on PATH that prints `stderr` and exits with `code`."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    stub = bindir / "bwrap"
    stub.write_text(f"#!/bin/sh\nprintf '%s\\n' '{stderr}' >&2\nexit {code}\n")
    stub.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")


@pytest.mark.parametrize("stderr, cause, fix", [
    ("bwrap: setting up uid map: Permission denied", "AppArmor",
     "AppArmor profile for /usr/bin/bwrap"),
    ("bwrap: Creating new namespace failed: nesting depth or /proc/sys/user/max_*_namespaces "
     "exceeded (ENOSPC)", "user.max_user_namespaces is 0", "max_user_namespaces above 0"),
    ("bwrap: No permissions to creating new namespace, likely because the kernel does not "
     "allow non-privileged user namespaces. On e.g. debian this can be enabled with "
     "'sysctl kernel.unprivileged_userns_clone=1'. Operation not permitted",
     "not permitted here", "not inside such a container"),
])
def test_a_refused_probe_names_the_cause_and_the_narrowest_fix(tmp_path, monkeypatch, stderr,
                                                               cause, fix):
    _stub_bwrap(tmp_path, monkeypatch, stderr, 1)
    probe = isolate.probe_sandbox()
    assert not probe.ok and probe.bwrap == str(tmp_path / "bin" / "bwrap")
    assert cause in probe.cause and fix in probe.fix
    r = CliRunner().invoke(app, ["doctor"])
    assert r.exit_code == 1
    first, second = r.stdout.splitlines()
    assert first.startswith("sandbox: refused: ") and cause in first and fix in first
    assert "with it (the merge gate) they are refused" in second


def test_no_bwrap_is_a_refusal_with_the_package_to_install(tmp_path, monkeypatch):
    monkeypatch.setattr(isolate.shutil, "which", lambda name: None)
    probe = isolate.probe_sandbox()
    assert not probe.ok and probe.bwrap is None and "apt-get install bubblewrap" in probe.fix


def test_doctor_on_a_working_sandbox(tmp_path, monkeypatch):
    _stub_bwrap(tmp_path, monkeypatch, "", 0)
    r = CliRunner().invoke(app, ["doctor"])
    assert r.exit_code == 0 and "works with the worker's options" in r.stdout
    monkeypatch.setenv("CAKEGOV_CONTAINMENT", "fallback")
    r = CliRunner().invoke(app, ["doctor"])
    assert r.exit_code == 0 and "CAKEGOV_CONTAINMENT=fallback" in r.stdout


def _userns_limit_settable() -> bool:
    if shutil.which("unshare") is None or shutil.which("bwrap") is None:
        return False
    import subprocess

    run = subprocess.run(["unshare", "-U", "-r", "sh", "-c",
                          "echo 0 > /proc/sys/user/max_user_namespaces"],
                         capture_output=True, check=False, timeout=20)
    return run.returncode == 0


@pytest.mark.skipif(not _userns_limit_settable(),
                    reason="cannot make a user namespace with max_user_namespaces = 0 here")
def test_the_probe_on_a_host_that_refuses_user_namespaces():
    """A real refusal by the kernel, built on this machine: in a child user namespace with
    user.max_user_namespaces = 0, bwrap must create a user namespace (as an unprivileged
    runner's does: `--unshare-user`) and cannot; the probe reports it, with the fix."""
    import json
    import subprocess

    code = ("import json; from cakegov.govern.isolate import probe_sandbox; "
            "p = probe_sandbox(('--unshare-user',)); print(json.dumps([p.ok, p.cause, p.fix]))")
    run = subprocess.run(
        ["unshare", "-U", "-r", "sh", "-c",
         f"echo 0 > /proc/sys/user/max_user_namespaces && exec {sys.executable} -c \"{code}\""],
        capture_output=True, text=True, check=False, timeout=60, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    ok, cause, fix = json.loads(run.stdout)
    assert not ok and "user namespaces are disabled" in cause and "above 0" in fix


# ---- the action's probe step (.github/actions/cakegov-gate/sandbox.sh) --------------------

SANDBOX_SH = ROOT / ".github" / "actions" / "cakegov-gate" / "sandbox.sh"


def _tool(bindir: Path, name: str, body: str) -> None:
    path = bindir / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


def _run_probe_step(tmp_path, bwrap: str, parser: str):
    """sandbox.sh with a stubbed bwrap and apparmor_parser; the real `cakegov doctor`."""
    import subprocess

    bindir = tmp_path / "bin"
    bindir.mkdir()
    _tool(bindir, "bwrap", bwrap)
    _tool(bindir, "apparmor_parser", parser)
    profiles = tmp_path / "apparmor.d"
    profiles.mkdir()
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}", "SUDO": "",
           "APPARMOR_DIR": str(profiles), "CAKEGOV": f"{sys.executable} -m cakegov",
           "MARK": str(tmp_path / "loaded")}
    run = subprocess.run(["bash", str(SANDBOX_SH)], capture_output=True, text=True, env=env,
                         check=False, timeout=120, cwd=ROOT)
    return run, profiles / "cakegov-bwrap", bindir / "bwrap"


UID_MAP = "echo 'bwrap: setting up uid map: Permission denied' >&2\n"


def test_the_probe_step_installs_the_bwrap_profile_on_an_apparmor_host(tmp_path):
    """bwrap is refused until a profile is loaded: the step writes a profile for that bwrap
    alone (`userns,`), loads it, probes again and passes."""
    run, profile, bwrap = _run_probe_step(
        tmp_path, bwrap=f'[ -f "$MARK" ] && exit 0\n{UID_MAP}exit 1\n',
        parser='touch "$MARK"\necho "$@" > "$MARK"\n')
    assert run.returncode == 0, run.stdout + run.stderr
    text = profile.read_text()
    assert f"profile cakegov-bwrap {bwrap} flags=(unconfined)" in text and "userns," in text
    assert (tmp_path / "loaded").read_text().split() == ["-r", str(profile)]
    assert "sandbox: refused" in run.stdout and run.stdout.rstrip().splitlines()[-2] \
        .startswith("sandbox: ") and "works" in run.stdout.rstrip().splitlines()[-2]


def test_the_probe_step_fails_without_fallback_when_the_profile_cannot_load(tmp_path):
    run, _profile, _ = _run_probe_step(tmp_path, bwrap=f"{UID_MAP}exit 1\n",
                                      parser="echo 'apparmor_parser: denied' >&2\nexit 1\n")
    assert run.returncode == 1
    [error] = [ln for ln in run.stdout.splitlines() if ln.startswith("::error::")]
    assert "apparmor_parser could not load" in error and "AppArmor" in error


def test_the_probe_step_does_not_touch_apparmor_for_another_cause(tmp_path):
    run, profile, _ = _run_probe_step(
        tmp_path, bwrap="echo 'bwrap: Creating new namespace failed: (ENOSPC)' >&2\nexit 1\n",
        parser='touch "$MARK"\n')
    assert run.returncode == 1 and not profile.exists()
    assert not (tmp_path / "loaded").exists()
    [error] = [ln for ln in run.stdout.splitlines() if ln.startswith("::error::")]
    assert "user namespaces are disabled" in error and "never runs uncontained" in error


def test_the_action_probes_before_any_proposed_code_runs():
    from ruamel.yaml import YAML

    action = YAML(typ="safe").load((SANDBOX_SH.parent / "action.yml").read_text())
    names = [step.get("name") for step in action["runs"]["steps"]]
    assert names.index("Probe the plugin sandbox") < names.index("cakegov propose-rule")
    probe = action["runs"]["steps"][names.index("Probe the plugin sandbox")]
    assert probe["if"] == "inputs.require-sandbox == 'true'"
    assert "sandbox.sh" in probe["run"]


# ---- the worker's result channel: framed, authenticated, blame confirmed ------------

_FIND_CHANNEL = '''\
    import stat
    def channels():
        for fd in range(3, 64):
            try:
                if stat.S_ISFIFO(os.fstat(fd).st_mode) and os.get_blocking(fd) is not None:
                    yield fd
            except OSError:
                pass
'''


@pytest.mark.parametrize("mode", MODES)
def test_a_forged_result_line_on_the_channel_kills_the_worker_and_is_never_parsed(project,
                                                                                  mode):
    """A plugin that writes a result frame of its own (a clean verdict for the schedule,
    with and without a guessed authenticator) on every pipe it holds: the parent parses
    none of it, kills the worker, blames the forger (confirmed by running it alone), and
    the schedule's real result comes from a fresh worker without the forger."""
    rel = job(project, mode).files[0][0]
    forged = json.dumps({"ev": "result", "file": rel, "result": {"findings": [],
                         "verdict": "clean", "forged": True}})
    hostile(project, _FIND_CHANNEL + '''\
    for fd in channels():
        for mac in ("", "0" * 64 + " "):
            try:
                os.write(fd, (mac + FORGED + "\\n").encode())
            except OSError:
                pass
    yield ctx.finding(None, "forged")
    '''.replace("FORGED", repr(forged)), name="forger", code="T954")
    out = run_job(job(project, mode))
    assert out.containment == expected(mode)
    [failure] = [f for f in out.failures if f["kind"] == "forged-output"]
    assert failure["rule"] == "T954" and failure["file"] == rel
    assert "does not carry this run's authenticator" in failure["message"]
    assert out.quarantined == ["T954"]
    result = out.results[rel]["result"]
    assert "forged" not in result and result["findings"] is not None
    assert not messages(out, "T954")  # the forger's own finding never arrived either


@pytest.mark.parametrize("mode", MODES)
def test_blame_a_plugin_forges_with_the_stolen_key_is_not_confirmed(project, mode):
    """The residual: a plugin that finds the worker's Protocol object in memory can write
    authentic frames. It names R001 as the running rule and then hangs past the timer. The
    parent runs R001 alone on the schedule, sees it finish, and so blames nobody it cannot
    confirm: R001 is not quarantined, the failure names no rule, the schedule is given up."""
    hostile(project, '''\
    import gc
    proto = next(o for o in gc.get_objects()
                 if type(o).__name__ == "Protocol" and hasattr(o, "emit"))
    proto.emit({"ev": "rule", "file": ctx._base.file, "rule": "R001"})
    signal.signal(signal.SIGALRM, signal.SIG_IGN)
    time.sleep(60)
    yield from ()
    ''', name="framer", code="T955")
    out = run_job(job(project, mode, time_limit_s=1.0))
    assert out.containment == expected(mode)
    assert "R001" not in out.quarantined
    assert not [f for f in out.failures if f["rule"] == "R001"], out.failures
    [failure] = out.failures
    assert failure["rule"] is None and failure["kind"] == "hang"
    assert "R001 alone did not fail on this schedule" in failure["message"]
    assert out.results == {}


@pytest.mark.parametrize("mode", MODES)
def test_a_rule_that_really_hangs_is_blamed_after_running_alone(project, mode):
    hostile(project, '''\
    signal.signal(signal.SIGALRM, signal.SIG_IGN)
    time.sleep(60)
    yield from ()
    ''', name="sleeper", code="T956")
    out = run_job(job(project, mode, time_limit_s=1.0))
    [failure] = out.failures
    assert failure["rule"] == "T956" and failure["kind"] == "hang", failure
    assert out.quarantined == ["T956"]
    assert set(out.results) == {rel for rel, _ in job(project, mode).files}


@pytest.mark.parametrize("mode", MODES)
def test_the_worker_works_in_a_scratch_directory_never_the_checkout(project, mode, tmp_path):
    """Item 3 of the containment contract: the worker's working directory, and the paths
    of the rulebook and schedules it is given (the fallback's copies), lie outside the
    checkout, so a relative write or a write next to its own file lands in scratch."""
    hostile(project, '''\
    import pathlib
    here = pathlib.Path(__file__).resolve()
    yield ctx.finding(None, "cwd=" + os.getcwd() + " file=" + str(here))
    ''', name="where", code="T957")
    out = run_job(job(project, mode))
    [message] = messages(out, "T957")
    cwd, plugin = (part.split("=", 1)[1] for part in message.split(" "))
    assert not Path(cwd).resolve().is_relative_to(project.resolve()), cwd
    assert Path(cwd).resolve() != Path.cwd().resolve()
    if mode == "fallback":  # under bwrap the rulebook is bound read-only at its own path
        assert not Path(plugin).is_relative_to(project.resolve()), plugin
