"""Runs a rulebook in worker processes and turns every way they can fail into data.

The parent starts `python -m cakegov.govern.worker` with a job file and reads its progress
frames from a channel of their own, each authenticated with a per-run key
(worker.Protocol; a frame that does not authenticate kills the worker). The worker limits
itself (time per rule per schedule, address space); the parent is the backstop: when no
progress line arrives for longer than the time limit plus a grace period it kills the
worker's process group, and when the worker dies it reads the last progress line. Either
way the (rule, schedule) that was running becomes a failure record, once running that rule
alone in a fresh worker confirms it (the name came from the worker, which a plugin can
subvert; unconfirmed, the schedule is given up and no rule is blamed), that rule is
skipped from then on, and a fresh worker carries on with the schedules that are left.
Nothing a plugin does can crash this process.

Containment (plugins are attacker-controlled code). With a working `bwrap` the worker runs
in a sandbox: new user, pid, network, IPC and UTS namespaces, a file system that holds
only what running the worker needs, read-only (the system directories `/usr`, `/lib*`,
`/bin`, `/sbin`, a few non-secret files of `/etc`, the interpreter's prefixes, the engine
package, the rulebook, the workloads, the job and the blinded schedules: no home
directory, no other checkout, no corpus labels), a private `/tmp`, a fresh `/dev` and
`/proc`, a new session, a cleared environment, and it dies with its parent; when the
worker ends the pid namespace ends and with it every process the plugin started. Without
bwrap (the fallback) the worker runs in a fresh temporary directory holding copies of its
inputs (the rulebook, the workloads, the schedules), with a scrubbed environment, and this
process is a child subreaper, so that every descendant a plugin leaves behind (even one
that called setsid) is re-parented here and killed when the worker ends. In both modes the
worker gets hard resource limits (address space, processes, file size, CPU time, no core
dumps) that it cannot raise. The worker's output is read with bounded reads: one progress
line, and the output of one schedule, may not exceed a cap; beyond it the worker is killed
and the rule it was running gets a failure record."""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import functools
import hmac
import json
import os
import queue
import re
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LOAD_LIMIT_S = 60.0
GRACE_S = 2.0
STDERR_TAIL = 1500
LINE_CAP = 4 << 20  # bytes in one progress line from a worker
FILE_OUTPUT_CAP = 4 << 20  # bytes a worker may write (progress and stderr) per schedule
FILE_SIZE_LIMIT = 256 << 20  # RLIMIT_FSIZE of a worker
NPROC_MARGIN = 128  # processes a worker may add to its user's count (RLIMIT_NPROC)
BWRAP_CONTAINMENT = "bwrap"
FALLBACK_CONTAINMENT = "fallback: copies, scrubbed env, hard rlimits, subreaper"
SECRET = re.compile(r"TOKEN|SECRET|KEY|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION", re.IGNORECASE)
PASS_ENV = ("CUDA_VISIBLE_DEVICES", "CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH",
            "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "PYTHONHASHSEED")


@dataclass
class Job:
    """One worker's work: a rulebook and the schedules (relative name, absolute path)."""

    side: str
    mode: str  # "info", "check", "evidence" or "cost"
    rules: Path
    workloads: Path
    root: Path
    files: list[tuple[str, str]] = field(default_factory=list)
    time_limit_s: float = 10.0
    memory_limit_mb: int = 4096
    gpu: dict[str, Any] = field(default_factory=dict)
    step_limit_s: float | None = None  # evidence: seconds per schedule
    require_sandbox: bool = False  # refuse to run plugins without bwrap
    containment: str = "auto"  # "auto" (bwrap when it works), "bwrap" or "fallback"
    # trusted.py: "record" (codes whose calls the candidate run reports), "stubs" and
    # "replay" (the trusted run's stand-ins and their data), "excluded_targets"
    replay: dict[str, Any] = field(default_factory=dict)


@dataclass
class JobOutput:
    """What came back: the rulebook description, per-file events, hard failures."""

    info: dict[str, Any] | None = None
    load_error: str | None = None
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    failures: list[dict[str, Any]] = field(default_factory=list)  # kills and deaths
    quarantined: list[str] = field(default_factory=list)
    containment: str | None = None  # what kept the plugins in: BWRAP/FALLBACK_CONTAINMENT


def _spec(job: Job, files: list[tuple[str, str]], skip: list[str],
          paths: dict[str, str] | None = None) -> dict[str, Any]:
    paths = paths or {}
    return {"mode": job.mode, "side": job.side,
            "rules": paths.get("rules", str(job.rules)),
            "workloads": paths.get("workloads", str(job.workloads)),
            "root": paths.get("root", str(job.root)), "files": files,
            "time_limit_s": job.time_limit_s, "memory_limit_mb": job.memory_limit_mb,
            "skip_rules": skip, "gpu": job.gpu, "load_limit_s": LOAD_LIMIT_S,
            **{k: job.replay[k] for k in ("record", "stubs", "replay", "excluded_targets",
                                        "excluded_primitives", "cost")
               if k in job.replay}}


def _package_parent() -> str:
    import cakegov

    return str(Path(cakegov.__file__).resolve().parent.parent)


def _env(home: str = "/tmp", mode: str = "check") -> dict[str, str]:
    """An allow-listed environment: nothing secret (tokens, keys) reaches a plugin."""
    env = {"PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
           "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8",
           "PYTHONDONTWRITEBYTECODE": "1",  # never write __pycache__ into a rulebook
           "PYTHONPATH": _package_parent()}
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = os.environ.get(var, "1")
    if mode == "evidence":
        env.update({k: os.environ[k] for k in PASS_ENV if k in os.environ})
    return {k: v for k, v in env.items() if not SECRET.search(k)}


# Characters a worker's strings may not carry into reports, logs and terminals: C0 and C1
# controls but tab and newline (a NUL or an ESC sequence), the bidirectional overrides and
# isolates (text that reads differently from what it says, U+202A-U+202E, U+2066-U+2069),
# and lone surrogates (not encodable as UTF-8: they crashed the JSON report).
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069"
                     "\ud800-\udfff]")


def _clean(value: Any) -> Any:
    """`value` (parsed JSON from a worker) with every unsafe character of every string,
    keys included, replaced by U+FFFD."""
    if isinstance(value, str):
        return _UNSAFE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {_clean(k): _clean(v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class SandboxProbe:
    """What a real bwrap run with the worker's options found here: `ok`, the bwrap used,
    and when it failed, the cause and the narrowest fix in one line each."""

    ok: bool
    bwrap: str | None
    cause: str = ""
    fix: str = ""

    def line(self) -> str:
        if self.ok:
            return f"sandbox: {self.bwrap} works with the worker's options (--unshare-all)"
        return f"sandbox: refused: {self.cause}; fix: {self.fix}"


_APPARMOR = ("unprivileged user namespaces are refused by AppArmor "
             "(kernel.apparmor_restrict_unprivileged_userns=1, the default since Ubuntu "
             "23.10, GitHub's ubuntu-24.04 runners included)",
             "allow them for bwrap only: install the AppArmor profile for /usr/bin/bwrap "
             "with `userns,` (docs/governance.md, \"The sandbox on the runner\"), never the "
             "system-wide sysctl")
_NO_USERNS = ("user namespaces are disabled (user.max_user_namespaces is 0, or the "
              "nesting depth is exceeded)",
              "set user.max_user_namespaces above 0 on the runner, or run the gate on a host "
              "that allows user namespaces")
_NOT_PERMITTED = ("creating namespaces is not permitted here (a container without "
                  "CAP_SYS_ADMIN or a seccomp filter that refuses unshare/clone)",
                  "run the gate on the host or a VM runner, not inside such a container")


def classify_bwrap_failure(stderr: str) -> tuple[str, str]:
    """(cause, fix) of a failed bwrap probe, from what bwrap printed."""
    text = stderr.lower()
    if "uid map" in text or "gid map" in text or (
            "permission denied" in text and "namespace" in text):
        return _APPARMOR
    if "enospc" in text or "max_" in text or "no space left" in text:
        return _NO_USERNS
    if "operation not permitted" in text:
        return _NOT_PERMITTED
    first = next((ln.strip() for ln in stderr.splitlines() if ln.strip()), "no message")
    return (f"bwrap failed: {first[:200]}", "see docs/governance.md, \"The sandbox on the "
            "runner\"")


def probe_sandbox(extra: tuple[str, ...] = ()) -> SandboxProbe:
    """Run `bwrap` with the worker's namespace options (plus `extra`) on `true`; never
    raises. What the gate runs before any proposed code (`cakegov doctor`)."""
    exe = shutil.which("bwrap")
    if exe is None:
        return SandboxProbe(False, None, "bwrap is not installed",
                            "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap)")
    try:
        run = subprocess.run(
            [exe, *_BWRAP_BASE, *extra, "--ro-bind", "/", "/", "--dev", "/dev", "--proc",
             "/proc", "--tmpfs", "/tmp", "true"], stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=20, check=False)
    except subprocess.TimeoutExpired:
        return SandboxProbe(False, exe, "bwrap did not finish within 20 s", "check the host's "
                            "load and bwrap installation")
    except (OSError, subprocess.SubprocessError) as exc:
        return SandboxProbe(False, exe, f"bwrap could not be started ({exc})",
                            "reinstall bubblewrap")
    if run.returncode == 0:
        return SandboxProbe(True, exe)
    cause, fix = classify_bwrap_failure(run.stderr.decode("utf-8", "replace"))
    return SandboxProbe(False, exe, cause, fix)


@functools.lru_cache(maxsize=1)
def bwrap_available() -> str | None:
    """The path of a bwrap that works here (probed once), else None."""
    probe = probe_sandbox()
    return probe.bwrap if probe.ok else None


_BWRAP_BASE = ("--unshare-all", "--die-with-parent", "--new-session")


def choose_containment(job: Job) -> str | None:
    """BWRAP_CONTAINMENT, FALLBACK_CONTAINMENT, or None when the job requires a sandbox
    that is not there."""
    forced = os.environ.get("CAKEGOV_CONTAINMENT", "").strip().lower() or job.containment
    have = forced != "fallback" and bwrap_available() is not None
    if have:
        return BWRAP_CONTAINMENT
    return None if job.require_sandbox or forced == "bwrap" else FALLBACK_CONTAINMENT


def containment_for(require_sandbox: bool = False) -> str:
    """The containment a job would get here (for reports of runs served from the cache)."""
    return choose_containment(Job(side="", mode="check", rules=Path(), workloads=Path(),
                                  root=Path(), require_sandbox=require_sandbox)) or \
        "none: a sandbox is required but bwrap is missing"


# ---- processes: hard limits and reaping ----------------------------------------------

_PROCS = threading.Lock()  # held while starting a worker and while reaping orphans
_WORKERS: set[int] = set()  # pids of workers this process started and has not reaped


def _uid_processes() -> int:
    uid, count = os.getuid(), 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                count += entry.stat().st_uid == uid
    return count


def _limits(job: Job, n_files: int) -> list[tuple[int, int]]:
    """Hard limits of a worker (soft = hard, so the plugin cannot raise them)."""
    limit = job.step_limit_s if job.step_limit_s is not None else job.time_limit_s
    cpu = int(LOAD_LIMIT_S + (n_files + 1) * (limit + GRACE_S) * 2) + 60
    out = [(resource.RLIMIT_CORE, 0), (resource.RLIMIT_FSIZE, FILE_SIZE_LIMIT),
           (resource.RLIMIT_CPU, cpu)]
    if job.mode != "evidence":  # CUDA maps far more address space than it uses
        if job.memory_limit_mb > 0:
            out.append((resource.RLIMIT_AS, job.memory_limit_mb << 20))
        out.append((resource.RLIMIT_NPROC, _uid_processes() + NPROC_MARGIN))
    return out


# Capabilities a root worker loses (from its bounding set, so also after exec): raising
# hard limits and escaping RLIMIT_NPROC (SYS_RESOURCE, SYS_ADMIN), ptrace, raw I/O,
# modules, reboot, network administration, device nodes.
DROP_CAPS = (24, 21, 19, 17, 16, 22, 12, 27)
_LIBC: Any = None


def _libc() -> Any:
    global _LIBC
    if _LIBC is None:
        _LIBC = ctypes.CDLL(None, use_errno=True)
    return _LIBC


def _preexec(limits: list[tuple[int, int]], drop_caps: bool) -> Any:
    libc = _libc() if drop_caps else None

    def apply() -> None:  # runs in the child between fork and exec: no imports, no locks
        if libc is not None:
            for cap in DROP_CAPS:
                libc.prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP
            libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
        for which, value in limits:
            _, hard = resource.getrlimit(which)
            if hard != resource.RLIM_INFINITY:
                value = min(value, hard)
            resource.setrlimit(which, (value, value))
    return apply


@functools.lru_cache(maxsize=1)
def become_subreaper() -> bool:
    """Make this process a child subreaper (Linux): orphans of workers come back here."""
    try:
        return _libc().prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def _orphans() -> list[int]:
    """Processes re-parented to this one that are not its own children: re-parented
    orphans (this is a subreaper) in another session than ours and not a worker."""
    me, sid, out = os.getpid(), os.getsid(0), []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        ppid = re.search(r"^PPid:\s*(\d+)", status, re.MULTILINE)
        if ppid is None or int(ppid.group(1)) != me or pid in _WORKERS:
            continue
        with contextlib.suppress(OSError):
            if os.getsid(pid) == sid:
                continue  # a child this process started itself (git, a compiler, ...)
        out.append(pid)
    return out


def reap_orphans() -> int:
    """Kill and reap every orphaned descendant of the workers; returns how many."""
    killed = 0
    with _PROCS:
        for _ in range(1000):
            found = _orphans()
            if not found:
                break
            for pid in found:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
                with contextlib.suppress(ChildProcessError, OSError):
                    os.waitpid(pid, 0)
                killed += 1
    return killed


# ---- bounded reading of a worker's output -------------------------------------------

def _put(sink: queue.Queue, item: Any, stop: threading.Event) -> bool:
    while not stop.is_set():
        try:
            sink.put(item, timeout=0.2)
            return True
        except queue.Full:
            continue
    return False


def _lines(stream: Any, sink: queue.Queue, stop: threading.Event) -> None:
    """Progress lines, each at most LINE_CAP bytes; a longer one becomes an overflow."""
    while not stop.is_set():
        line = stream.readline(LINE_CAP + 1)
        if not line:
            break
        if len(line) > LINE_CAP:
            while True:  # discard the rest of the line without holding it
                rest = stream.readline(LINE_CAP)
                if not rest or rest.endswith(b"\n"):
                    break
            _put(sink, ("overflow", f"a progress line exceeded {LINE_CAP} bytes"), stop)
            break
        if not _put(sink, line, stop):
            break
    _put(sink, None, stop)


class _Stderr:
    """Reads a worker's standard error, keeping only its tail and counting the bytes."""

    def __init__(self, stream: Any, sink: queue.Queue, stop: threading.Event):
        self.tail = b""
        self.total = 0
        self.mark = 0  # `total` when the current schedule began
        self.sink, self.stop = sink, stop
        self.closed = threading.Event()
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: Any) -> None:
        told = False
        try:
            while True:
                chunk = stream.read1(65536)
                if not chunk:
                    break
                self.total += len(chunk)
                self.tail = (self.tail + chunk)[-STDERR_TAIL * 4:]
                if not told and self.total - self.mark > FILE_OUTPUT_CAP:
                    told = True
                    _put(self.sink, ("overflow", f"output exceeded {FILE_OUTPUT_CAP} bytes "
                                     "on one schedule"), self.stop)
        finally:
            self.closed.set()

    def text(self) -> str:
        self.closed.wait(5)
        return self.tail.decode("utf-8", "replace")[-STDERR_TAIL:].strip()


# ---- workers -----------------------------------------------------------------------

def _describe_exit(code: int | None) -> str:
    if code is None:
        return "did not exit"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        extra = " (the kernel's out-of-memory killer, or a kill)" if -code == 9 else ""
        return f"was killed by {name}{extra}"
    return f"exited with status {code}"


def _copy_inputs(job: Job, files: list[tuple[str, str]], into: Path
                 ) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """Fallback: copies of what the worker reads, so its writes cannot reach the checkout."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    rules, workloads = into / "rules", into / "workloads"
    shutil.copytree(job.rules, rules, ignore=ignore)
    if Path(job.workloads).is_dir():
        shutil.copytree(job.workloads, workloads, ignore=ignore)
    copied = []
    for i, (rel, path) in enumerate(files):
        dst = into / "files" / str(i) / Path(path).name
        dst.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            shutil.copyfile(path, dst)
        copied.append((rel, str(dst)))
    return {"rules": str(rules), "workloads": str(workloads), "root": str(into)}, copied


# What the worker's file system holds besides its own inputs: the system's programs and
# libraries (the interpreter's shared libraries, a compiler for evidence jobs) and the
# files of /etc that the dynamic loader and the C library read; nothing else of the host.
_SYSTEM_DIRS = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/opt")
_ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
              "/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/alternatives")


def _system() -> list[str]:
    """Read-only binds (or the same symlinks, on merged-/usr systems) of _SYSTEM_DIRS and
    _ETC_FILES that exist here."""
    out: list[str] = []
    for raw in (*_SYSTEM_DIRS, *_ETC_FILES):
        path = Path(raw)
        if path.is_symlink():
            out += ["--symlink", os.readlink(path), raw]
        elif path.exists():
            out += ["--ro-bind", raw, raw]
    return out


def _allowed(paths: list[str]) -> list[str]:
    """`--ro-bind P P` for each path that exists, outermost first, each once."""
    out: list[str] = []
    chosen: list[Path] = []
    for raw in sorted({str(Path(p).resolve()) for p in paths if p}, key=len):
        path = Path(raw)
        if not path.exists() or any(path.is_relative_to(c) for c in chosen):
            continue
        chosen.append(path)
        out += ["--ro-bind", raw, raw]
    return out


def _bwrap_command(exe: str, job: Job, files: list[tuple[str, str]], spec: Path,
                   env: dict[str, str]) -> list[str]:
    dev = ["--dev-bind", "/dev", "/dev"] if job.mode == "evidence" and job.gpu.get("run") \
        else ["--dev", "/dev"]
    needed = [str(job.rules), str(job.workloads), str(spec.parent),
              sys.prefix, sys.base_prefix, sys.exec_prefix,
              str(Path(_package_parent()) / "cakegov"),  # the engine, not its repository
              *(str(Path(p).parent) for _, p in files)]
    cmd = [exe, *_BWRAP_BASE, *_system(), "--tmpfs", "/tmp", *dev, "--proc", "/proc",
           *_allowed(needed), "--chdir", "/tmp", "--clearenv"]
    for key, value in env.items():
        cmd += ["--setenv", key, value]
    return [*cmd, "--", sys.executable, "-m", "cakegov.govern.worker", str(spec)]


def _worker_args(channel: int, key_fd: int) -> list[str]:
    return ["--channel", str(channel), "--key-fd", str(key_fd)]


class _Attempt:
    """One worker process and the state of its progress."""

    def __init__(self, job: Job, files: list[tuple[str, str]], skip: list[str], tmp: Path,
                 containment: str):
        self.bwrap = containment == BWRAP_CONTAINMENT
        self.known = {rel for rel, _ in files}
        work = tmp / f"attempt-{time.monotonic_ns()}"
        work.mkdir()
        if self.bwrap:
            spec_files, paths = files, None
            env = _env("/tmp", job.mode)
            spec_path = work / "job.json"
            cwd = str(work)
        else:
            inputs = work / "in"
            inputs.mkdir()
            paths, spec_files = _copy_inputs(job, files, inputs)
            home = work / "home"
            home.mkdir()
            env = _env(str(home), job.mode)
            spec_path = work / "job.json"
            cwd = str(inputs)
        spec_path.write_text(json.dumps(_spec(job, spec_files, skip, paths)),
                             encoding="utf-8")
        if self.bwrap:
            cmd = _bwrap_command(bwrap_available() or "bwrap", job, files, spec_path, env)
        else:
            become_subreaper()
            cmd = [sys.executable, "-m", "cakegov.govern.worker", str(spec_path)]
        # the result channel and the key that authenticates its frames (worker.Protocol)
        self.key = secrets.token_hex(32).encode("ascii")
        self.seq = 0
        key_r, key_w = os.pipe()
        os.write(key_w, self.key)
        os.close(key_w)
        chan_r, chan_w = os.pipe()
        cmd += _worker_args(chan_w, key_r)
        self.stop = threading.Event()
        self.lines: queue.Queue = queue.Queue(maxsize=4)
        limits = _preexec(_limits(job, len(files)), not self.bwrap and os.getuid() == 0)
        try:
            with _PROCS:
                self.proc = subprocess.Popen(
                    cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                    stdin=subprocess.DEVNULL, env=env, start_new_session=True, cwd=cwd,
                    preexec_fn=limits, pass_fds=(chan_w, key_r))
                _WORKERS.add(self.proc.pid)
        finally:
            os.close(chan_w)
            os.close(key_r)
        self.channel = os.fdopen(chan_r, "rb")
        threading.Thread(target=_lines, args=(self.channel, self.lines, self.stop),
                         daemon=True).start()
        self.stderr = _Stderr(self.proc.stderr, self.lines, self.stop)
        self.file: str | None = None
        self.rule: str | None = None
        self.step: str | None = None
        self.loaded = False
        self.done = False
        self.overflow: str | None = None
        self.file_bytes = 0

    def events(self, limit_s: float, load_limit_s: float) -> Iterator[dict[str, Any] | str]:
        """Progress events; finally the string "timeout", "overflow", "forged" or "exit"."""
        while True:
            wait = limit_s if self.loaded else load_limit_s
            try:
                line = self.lines.get(timeout=wait)
            except queue.Empty:
                yield "timeout"
                return
            if line is None:
                yield "exit"
                return
            if isinstance(line, tuple):
                self.overflow = line[1]
                yield "overflow"
                return
            self.file_bytes += len(line)
            if self.file_bytes > FILE_OUTPUT_CAP:
                self.overflow = f"output exceeded {FILE_OUTPUT_CAP} bytes on one schedule"
                yield "overflow"
                return
            body = self._authentic(line)
            if body is None:
                self.overflow = (f"frame {self.seq} on the worker's result channel does not "
                                 "carry this run's authenticator: code in the worker other "
                                 "than the engine wrote on the channel")
                yield "forged"
                return
            try:
                event = _clean(json.loads(body))
            except ValueError:
                continue
            if isinstance(event, dict):
                if event.get("ev") == "file":
                    self.file_bytes = 0
                    self.stderr.mark = self.stderr.total
                yield event

    def _authentic(self, line: bytes) -> str | None:
        """The JSON of `line` when it is the next frame the worker's Protocol wrote."""
        from cakegov.govern.worker import frame_mac

        mac, _, raw = line.rstrip(b"\n").partition(b" ")
        body = raw.decode("utf-8", "replace")
        if not hmac.compare_digest(mac, frame_mac(self.key, self.seq, body).encode()):
            return None
        self.seq += 1
        return body

    def returncode(self) -> int | None:
        """The worker's status (bwrap reports a signal death as 128 + the signal)."""
        code = self.proc.returncode
        if self.bwrap and code is not None and 128 < code < 128 + 65:
            return -(code - 128)
        return code

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def finish(self, kill: bool) -> None:
        """Wait for (or kill) the worker, then kill whatever it left behind."""
        if kill:
            self.kill()
        else:
            self.proc.wait()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # descendants still in its group
        with _PROCS:
            _WORKERS.discard(self.proc.pid)
        reap_orphans()
        self.stop.set()
        with contextlib.suppress(queue.Empty):
            while True:
                self.lines.get_nowait()
        with contextlib.suppress(OSError):
            self.channel.close()

    def stderr_tail(self) -> str:
        return self.stderr.text()


def run_job(job: Job, on_done: Callable[[int], None] | None = None) -> JobOutput:
    """Run `job` to the end, restarting workers after hard failures.

    `on_done(n)`, when given, is called as results arrive with the number of the job's
    files newly finished (judged, or given up after a hard failure): progress only, it
    changes nothing in what the job does or returns."""
    output = JobOutput()
    finished = 0

    def tick() -> None:
        nonlocal finished
        now = len(job.files) - len(remaining)
        if on_done is not None and now > finished:
            on_done(now - finished)
        finished = max(finished, now)

    containment = choose_containment(job)
    if containment is None:
        output.load_error = ("a sandbox is required (--require-sandbox) but bwrap is not "
                             "available or does not work here; no plugin code was run")
        return output
    output.containment = containment
    remaining = list(job.files)
    skip: list[str] = []
    limit = job.step_limit_s if job.step_limit_s is not None else job.time_limit_s
    hard_limit = limit + max(GRACE_S, limit / 2)
    with tempfile.TemporaryDirectory(prefix="cakegov-job-") as tmp:
        while True:
            attempt = _Attempt(job, remaining, skip, Path(tmp), containment)
            ending = "exit"
            for event in attempt.events(hard_limit, LOAD_LIMIT_S + GRACE_S):
                if isinstance(event, str):
                    ending = event
                    break
                _absorb(event, attempt, output, remaining)
                tick()
            attempt.finish(kill=ending != "exit")
            tail = attempt.stderr_tail()
            if attempt.done and ending == "exit":
                return output
            if not attempt.loaded:
                why = {"timeout": "did not answer", "overflow": f"wrote too much "
                       f"({attempt.overflow})", "forged": f"forged a frame "
                       f"({attempt.overflow})"}.get(ending) or _describe_exit(
                           attempt.returncode())
                output.load_error = output.load_error or (
                    f"the worker {why} while loading the rulebook"
                    + (f": {tail.splitlines()[-1][:300]}" if tail else ""))
                return output
            confirmed = _confirm(job, attempt, Path(tmp), containment)
            _record_hard_failure(job, attempt, ending, tail, output, remaining, skip,
                                 confirmed)
            tick()
            if not remaining:
                return output


def _absorb(event: dict[str, Any], attempt: _Attempt, output: JobOutput,
            remaining: list[tuple[str, str]]) -> None:
    kind = event.get("ev")
    if kind == "loaded":
        attempt.loaded = True
        output.info = event.get("info")
    elif kind == "load_error":
        output.load_error = str(event.get("message"))[:2000]
    elif kind == "file":
        attempt.file, attempt.rule, attempt.step = event.get("file"), None, event.get("step")
    elif kind == "rule":
        attempt.rule = event.get("rule")
    elif kind in ("result", "evidence", "cost") and event.get("file") in attempt.known:
        output.results[event["file"]] = event
        remaining[:] = [f for f in remaining if f[0] != event["file"]]
        attempt.file = attempt.rule = None
    elif kind == "done":
        attempt.done = True


def _plugin_of(rules: Path, code: str) -> Path | None:
    """The check plugin of `rules` whose CODE literal is `code` (read, never imported)."""
    from cakegov.govern.changes import plugin_literal

    for path in sorted((rules / "checks").glob("*.py")):
        if plugin_literal(path, "CODE") == code:
            return path
    return None


def _confirm(job: Job, attempt: _Attempt, tmp: Path, containment: str) -> bool | None:
    """Blame from what this process observes, not from what the worker said: the worker
    that failed named the rule it was running, but a plugin in it can forge that name. So
    the named rule runs alone (the only check plugin in a copy of the rulebook) on the same
    schedule in a fresh worker: True when it fails there too (a kill, a death, a forged
    frame, or a failure it reports for that rule), False when it does not or when no
    plugin file declares that code. None when nothing was named (nothing to confirm)."""
    if job.mode != "check" or attempt.rule is None or attempt.file is None:
        return None
    plugin = _plugin_of(Path(job.rules), attempt.rule)
    found = [f for f in job.files if f[0] == attempt.file]
    if plugin is None or not found:
        return False
    work = tmp / f"confirm-{time.monotonic_ns()}"
    rules = work / "rules"
    shutil.copytree(job.rules, rules, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for other in (rules / "checks").glob("*.py"):
        if other.name != plugin.name:
            other.unlink()
    alone = dataclasses.replace(job, rules=rules, files=found, replay={
        k: v for k, v in job.replay.items() if k in ("excluded_targets",
                                                     "excluded_primitives")})
    limit = job.step_limit_s if job.step_limit_s is not None else job.time_limit_s
    probe = _Attempt(alone, found, [], work, containment)
    ending, result = "exit", None
    for event in probe.events(limit + max(GRACE_S, limit / 2), LOAD_LIMIT_S + GRACE_S):
        if isinstance(event, str):
            ending = event
            break
        if event.get("ev") == "loaded":
            probe.loaded = True
        elif event.get("ev") == "result" and event.get("file") == attempt.file:
            result = event
    probe.finish(kill=ending != "exit")
    if ending != "exit" or result is None:
        return True
    return any(isinstance(f, dict) and f.get("rule") == attempt.rule
               for f in result.get("failures") or [])


def _record_hard_failure(job: Job, attempt: _Attempt, ending: str, tail: str,
                         output: JobOutput, remaining: list[tuple[str, str]],
                         skip: list[str], confirmed: bool | None = None) -> None:
    """The worker was killed or died: blame the (rule, schedule) it was on, when running
    that rule alone confirmed it (`confirmed`); otherwise the schedule, not the rule."""
    if ending == "timeout":
        limit = job.step_limit_s if job.step_limit_s is not None else job.time_limit_s
        kind, message = "hang", (f"gave no sign of life for {limit:g} s plus grace; the "
                                 "worker was killed")
    elif ending == "overflow":
        kind, message = "output", f"{attempt.overflow}; the worker was killed"
        tail = ""
    elif ending == "forged":
        kind, message = "forged-output", f"{attempt.overflow}; the worker was killed"
        tail = ""
    else:
        kind = "crash"
        message = f"the worker {_describe_exit(attempt.returncode())}"
        if "MemoryError" in tail or (attempt.returncode() or 0) == -9:
            kind = "memory" if "MemoryError" in tail else kind
    if tail:
        message += f" (stderr: {tail.splitlines()[-1][:300]})"
    rule = attempt.rule
    if confirmed is False and rule is not None:
        message += (f"; the worker named rule {rule} as running, but {rule} alone did not "
                    "fail on this schedule in a fresh worker, so the blame is not confirmed "
                    "(the name came from the worker, which proposed code can forge); the "
                    "schedule is given up")
        rule = attempt.rule = None
    failure = {"rule": rule, "name": "", "file": attempt.file, "kind": kind,
               "message": message, "where": attempt.step or ""}
    output.failures.append(failure)
    if attempt.rule is not None and attempt.rule not in skip:
        skip.append(attempt.rule)  # the file is retried without the rule that killed it
        output.quarantined.append(attempt.rule)
    elif attempt.file is not None:  # nothing to blame but the file itself: give it up
        remaining[:] = [f for f in remaining if f[0] != attempt.file]
    else:  # died between files: nothing can be attributed; stop instead of looping
        remaining.clear()
