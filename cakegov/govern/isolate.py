"""Runs a rulebook in worker processes and turns every way they can fail into data.

The parent starts `python -m cakegov.govern.worker` with a job file and reads its progress
lines. The worker limits itself (time per rule per schedule, address space); the parent is
the backstop: when no progress line arrives for longer than the time limit plus a grace
period it kills the worker's process group, and when the worker dies it reads the last
progress line. Either way the (rule, schedule) that was running becomes a failure record,
that rule is skipped from then on, and a fresh worker carries on with the schedules that
are left. Nothing a plugin does can crash this process."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LOAD_LIMIT_S = 60.0
GRACE_S = 2.0
STDERR_TAIL = 1500


@dataclass
class Job:
    """One worker's work: a rulebook and the schedules (relative name, absolute path)."""

    side: str
    mode: str  # "info", "check" or "evidence"
    rules: Path
    workloads: Path
    root: Path
    files: list[tuple[str, str]] = field(default_factory=list)
    time_limit_s: float = 10.0
    memory_limit_mb: int = 4096
    gpu: dict[str, Any] = field(default_factory=dict)
    step_limit_s: float | None = None  # evidence: seconds per schedule


@dataclass
class JobOutput:
    """What came back: the rulebook description, per-file events, hard failures."""

    info: dict[str, Any] | None = None
    load_error: str | None = None
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    failures: list[dict[str, Any]] = field(default_factory=list)  # kills and deaths
    quarantined: list[str] = field(default_factory=list)


def _spec(job: Job, files: list[tuple[str, str]], skip: list[str]) -> dict[str, Any]:
    return {"mode": job.mode, "side": job.side, "rules": str(job.rules),
            "workloads": str(job.workloads), "root": str(job.root), "files": files,
            "time_limit_s": job.time_limit_s, "memory_limit_mb": job.memory_limit_mb,
            "skip_rules": skip, "gpu": job.gpu, "load_limit_s": LOAD_LIMIT_S}


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # never write __pycache__ into a rulebook
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(var, "1")
    return env


def _lines(stream: Any, sink: queue.Queue) -> None:
    for line in iter(stream.readline, ""):
        sink.put(line)
    sink.put(None)


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


class _Attempt:
    """One worker process and the state of its progress."""

    def __init__(self, job: Job, files: list[tuple[str, str]], skip: list[str], tmp: Path):
        spec_path = tmp / f"job-{job.side}-{time.monotonic_ns()}.json"
        spec_path.write_text(json.dumps(_spec(job, files, skip)), encoding="utf-8")
        self.stderr = tempfile.TemporaryFile(  # noqa: SIM115 - closed in stderr_tail()
            mode="w+", encoding="utf-8", errors="replace")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cakegov.govern.worker", str(spec_path)],
            stdout=subprocess.PIPE, stderr=self.stderr, stdin=subprocess.DEVNULL,
            text=True, encoding="utf-8", errors="replace", env=_env(),
            start_new_session=True, cwd=str(job.root),
        )
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=_lines, args=(self.proc.stdout, self.lines),
                         daemon=True).start()
        self.file: str | None = None
        self.rule: str | None = None
        self.step: str | None = None
        self.loaded = False
        self.done = False

    def events(self, limit_s: float, load_limit_s: float) -> Iterator[dict[str, Any] | str]:
        """Progress events; finally the string "timeout" or "exit"."""
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
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                yield event

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stderr_tail(self) -> str:
        self.stderr.seek(0)
        text = self.stderr.read()
        self.stderr.close()
        return text[-STDERR_TAIL:].strip()


def run_job(job: Job) -> JobOutput:
    """Run `job` to the end, restarting workers after hard failures."""
    output = JobOutput()
    remaining = list(job.files)
    skip: list[str] = []
    limit = job.step_limit_s if job.step_limit_s is not None else job.time_limit_s
    hard_limit = limit + max(GRACE_S, limit / 2)
    with tempfile.TemporaryDirectory(prefix="cakegov-job-") as tmp:
        while True:
            attempt = _Attempt(job, remaining, skip, Path(tmp))
            ending = "exit"
            for event in attempt.events(hard_limit, LOAD_LIMIT_S + GRACE_S):
                if isinstance(event, str):
                    ending = event
                    break
                _absorb(event, attempt, output, remaining)
            if ending == "timeout":
                attempt.kill()
            else:
                attempt.proc.wait()
            tail = attempt.stderr_tail()
            if attempt.done and ending == "exit":
                return output
            if not attempt.loaded:
                why = "did not answer while loading" if ending == "timeout" else \
                    _describe_exit(attempt.proc.returncode)
                output.load_error = output.load_error or (
                    f"the worker {why} while loading the rulebook"
                    + (f": {tail.splitlines()[-1]}" if tail else ""))
                return output
            _record_hard_failure(job, attempt, ending, tail, output, remaining, skip)
            if not remaining:
                return output


def _absorb(event: dict[str, Any], attempt: _Attempt, output: JobOutput,
            remaining: list[tuple[str, str]]) -> None:
    kind = event.get("ev")
    if kind == "loaded":
        attempt.loaded = True
        output.info = event["info"]
    elif kind == "load_error":
        output.load_error = str(event.get("message"))
    elif kind == "file":
        attempt.file, attempt.rule, attempt.step = event["file"], None, event.get("step")
    elif kind == "rule":
        attempt.rule = event["rule"]
    elif kind in ("result", "evidence"):
        output.results[event["file"]] = event
        remaining[:] = [f for f in remaining if f[0] != event["file"]]
        attempt.file = attempt.rule = None
    elif kind == "done":
        attempt.done = True


def _record_hard_failure(job: Job, attempt: _Attempt, ending: str, tail: str,
                         output: JobOutput, remaining: list[tuple[str, str]],
                         skip: list[str]) -> None:
    """The worker was killed or died: blame the (rule, schedule) it was on."""
    if ending == "timeout":
        limit = job.step_limit_s if job.step_limit_s is not None else job.time_limit_s
        kind, message = "hang", (f"gave no sign of life for {limit:g} s plus grace; the "
                                 "worker was killed")
    else:
        kind = "crash"
        message = f"the worker {_describe_exit(attempt.proc.returncode)}"
        if "MemoryError" in tail or (attempt.proc.returncode or 0) == -9:
            kind = "memory" if "MemoryError" in tail else kind
    if tail:
        message += f" (stderr: {tail.splitlines()[-1][:300]})"
    failure = {"rule": attempt.rule, "name": "", "file": attempt.file, "kind": kind,
               "message": message, "where": attempt.step or ""}
    output.failures.append(failure)
    if attempt.rule is not None and attempt.rule not in skip:
        skip.append(attempt.rule)  # the file is retried without the rule that killed it
        output.quarantined.append(attempt.rule)
    elif attempt.file is not None:  # nothing to blame but the file itself: give it up
        remaining[:] = [f for f in remaining if f[0] != attempt.file]
    else:  # died between files: nothing can be attributed; stop instead of looping
        remaining.clear()
