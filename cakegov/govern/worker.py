"""`python -m cakegov.govern.worker JOB.json [--channel FD --key-fd FD]`: runs one
rulebook in its own process.

Proposed plugin code is untrusted, so the parent (cakegov/govern/isolate.py) never imports
it: this worker loads the rulebook, checks schedules with every rule wrapped by a monitor,
and reports progress as authenticated JSON frames on a channel of its own (`Protocol`;
anything a plugin prints goes to standard error instead). Before each rule runs on each
schedule it says so (`{"ev": "rule", ...}`), so when the process dies or stops answering
the parent knows which rule on which schedule did it.

Limits: an address-space limit (`RLIMIT_AS`) turns a memory blow-up into a `MemoryError`;
a `SIGALRM` timer per rule per schedule interrupts a rule that runs too long. Both, and any
exception a rule raises, become failure records; the rule is then skipped for the rest of
this worker's schedules when it hung or blew memory (one failure is proof enough, and
waiting again on every schedule would only cost time). A rule that defeats the timer is
killed by the parent.

Modes: `info` (load and describe the rulebook), `check` (check schedules), `evidence`
(simulate flipped schedules; check, lower, emit, compile and, when allowed, run on a GPU
the clean ones), `cost` (judge changed cost-parameter files over the valid corpus)."""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import os
import signal
import sys
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from time import thread_time
from typing import Any, TextIO


class RuleTimeout(BaseException):
    """Raised by the SIGALRM handler inside a rule that overran its time limit. It derives
    from BaseException so that a rule's `except Exception` does not swallow it."""


def _on_alarm(signum: int, frame: Any) -> None:
    raise RuleTimeout()


class Protocol:
    """Authenticated JSON frames to the parent on the channel it passed (`--channel FD`).

    Each frame is one line, `MAC JSON`, where MAC is the HMAC-SHA256 of the frame's
    sequence number and its JSON under a per-run key that the parent wrote on another pipe
    (`--key-fd FD`); the key is read and that pipe closed before any plugin is imported,
    and the channel is close-on-exec, so a program a plugin starts never holds it. A line
    that a plugin writes on the channel (it can find the descriptor) fails the MAC and the
    parent kills the worker; only frames this class writes are parsed. What a plugin prints
    (stdout too, even from C) goes to standard error, which the parent shows as the
    plugin's output and never parses."""

    def __init__(self, channel: int | None = None, key_fd: int | None = None) -> None:
        key = b""
        if key_fd is not None:
            while len(key) < 64:
                chunk = os.read(key_fd, 64 - len(key))
                if not chunk:
                    break
                key += chunk
            os.close(key_fd)
        self._key = key
        self._seq = 0
        fd = os.dup(1) if channel is None else channel
        os.set_inheritable(fd, False)
        self._out: TextIO = os.fdopen(fd, "w", encoding="utf-8")
        os.dup2(2, 1)  # whatever a plugin prints (even from C) lands on stderr
        sys.stdout = sys.stderr

    def emit(self, event: dict[str, Any]) -> None:
        body = json.dumps(event, sort_keys=True, default=str)
        self._out.write(f"{frame_mac(self._key, self._seq, body)} {body}\n")
        self._seq += 1
        self._out.flush()


def frame_mac(key: bytes, seq: int, body: str) -> str:
    """The authenticator of frame `seq` with JSON `body` under `key` (parent and worker)."""
    return hmac.new(key, f"{seq}\n{body}".encode(), hashlib.sha256).hexdigest()


def _where(exc: BaseException, rules_dir: Path) -> str:
    """`file:line` of the innermost traceback frame inside the rulebook, if any."""
    frames = traceback.extract_tb(exc.__traceback__)
    for frame in reversed(frames):
        try:
            rel = Path(frame.filename).resolve().relative_to(rules_dir)
        except ValueError:
            continue
        return f"rules/{rel.as_posix()}:{frame.lineno}"
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else ""


class Monitor:
    """Wraps every rule's `check`: progress, time limit, failures, per-rule time."""

    def __init__(self, emit: Callable[[dict[str, Any]], None], limit_s: float,
                 rules_dir: Path, skip: set[str], record: frozenset[str] = frozenset()):
        self.emit = emit
        self.record = record  # codes whose every call's findings are reported (trusted.py)
        self.limit_s = limit_s
        self.rules_dir = rules_dir
        self.quarantined = set(skip)
        self.current: str | None = None
        self.reset()

    def reset(self) -> None:
        self.failures: list[dict[str, Any]] = []
        self.skipped: list[str] = []
        self.rule_seconds: dict[str, float] = {}
        self.calls: dict[str, list[list[dict[str, Any]]]] = {}
        self.counts: dict[str, int] = {}  # how many times the engine called each rule

    def wrap(self, rule: Any) -> Any:
        inner = rule.check
        monitor = self

        def check(ctx: Any) -> Iterator[Any]:
            yield from monitor.run(rule, ctx, inner)

        return dataclasses.replace(rule, check=check)

    def fail(self, rule: Any, file: str, kind: str, message: str, where: str = "") -> None:
        self.failures.append({"rule": rule.code, "name": rule.name, "file": file,
                              "kind": kind, "message": message, "where": where})

    def run(self, rule: Any, ctx: Any, inner: Callable[[Any], Iterator[Any]]) -> list[Any]:
        file = ctx._base.file  # engine side: the rule API does not expose it
        out = self._run(rule, ctx, inner, file)
        self.counts[rule.code] = self.counts.get(rule.code, 0) + 1
        if rule.code in self.record or "*" in self.record:
            self.calls.setdefault(rule.code, []).append(
                [f.model_dump(mode="json") for f in out])
        return out

    def _run(self, rule: Any, ctx: Any, inner: Callable[[Any], Iterator[Any]], file: str
             ) -> list[Any]:
        from cakegov.check.findings import Finding

        if rule.code in self.quarantined:
            self.skipped.append(rule.code)
            return []
        self.current = rule.code
        self.emit({"ev": "rule", "file": file, "rule": rule.code})
        # processor time of this thread, not the wall clock: load from other processes
        # does not count, so it cannot turn the verifier-cost blocker on
        start = thread_time()
        out: list[Any] = []
        try:
            signal.setitimer(signal.ITIMER_REAL, self.limit_s)
            try:
                out = list(inner(ctx))
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        except RuleTimeout:
            self.quarantined.add(rule.code)
            self.fail(rule, file, "hang", f"did not finish within the time limit of "
                      f"{self.limit_s:g} s")
        except MemoryError as exc:
            self.quarantined.add(rule.code)
            self.fail(rule, file, "memory", "exceeded the memory limit (MemoryError)",
                      _where(exc, self.rules_dir))
        except Exception as exc:
            last = traceback.format_exception_only(type(exc), exc)[-1].strip()
            self.fail(rule, file, "crash", f"raised {last}", _where(exc, self.rules_dir))
        bad = [type(f).__name__ for f in out if not isinstance(f, Finding)]
        if bad:
            self.fail(rule, file, "crash", f"yielded {bad[0]} instead of a Finding")
            out = []
        foreign = sorted({f"{f.code}/{f.rule}" for f in out
                          if (f.code, f.rule) != (rule.code, rule.name)})
        if foreign:  # a rule speaks only in its own name (the parent checks codes again)
            self.fail(rule, file, "crash", f"yielded a finding in another rule's name "
                      f"({', '.join(foreign[:3])}); dropped")
            out = [f for f in out if (f.code, f.rule) == (rule.code, rule.name)]
        self.rule_seconds[rule.code] = self.rule_seconds.get(rule.code, 0.0) + (
            thread_time() - start)
        self.current = None
        return out


def _rule_info(rule: Any) -> dict[str, Any]:
    return {"code": rule.code, "name": rule.name, "version": rule.version,
            "severity": rule.severity, "authority": rule.authority,
            "category": rule.category, "status": rule.status, "phase": rule.phase,
            "relpath": rule.relpath, "sha256": rule.sha256,
            "motivated_by": list(rule.motivated_by), "summary": rule.summary,
            "doc": rule.doc}


def describe(book: Any) -> dict[str, Any]:
    """What the parent needs to know about a rulebook without importing it."""
    from cakegov import __version__

    return {
        "digest": book.digest(),
        "engine_version": __version__,
        "entries": [dataclasses.asdict(e) for e in book.entries()],
        "rules": [_rule_info(r) for r in book.rules],
    }


def _limit_memory(megabytes: int) -> None:
    if megabytes <= 0:
        return
    import resource

    limit = megabytes * 1024 * 1024
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def check_files(job: dict[str, Any], book: Any, workloads: Any, proto: Protocol) -> None:
    from cakegov.check.rulebook import PHASES
    from cakegov.check.runner import Checker
    from cakegov.govern.trusted import Replayer

    rules_dir = Path(job["rules"]).resolve()
    monitor = Monitor(proto.emit, float(job["time_limit_s"]), rules_dir,
                      set(job.get("skip_rules", ())), frozenset(job.get("record", ())))
    replayer = Replayer(job.get("stubs", []), job.get("replay", {}))
    rules = sorted([*book.rules, *replayer.rules],  # the order Rulebook.load gives
                   key=lambda r: (PHASES.index(r.phase), r.category == "protocol", r.code))
    wrapped = dataclasses.replace(book, rules=tuple(monitor.wrap(r) for r in rules))
    checker = Checker(wrapped, workloads, preview=True)
    excluded = set(job.get("excluded_targets", ()))
    primitives = bool(job.get("excluded_primitives"))
    for rel, path in job["files"]:
        monitor.reset()
        replayer.begin(rel)
        proto.emit({"ev": "file", "file": rel})
        data = Path(path).read_bytes()
        start = thread_time()
        uses = _uses_excluded(checker, data, excluded, primitives)
        if uses:
            proto.emit({"ev": "result", "file": rel, "result": None, "uses_proposed": uses})
            continue
        try:
            result = checker.check_bytes(data, rel)
        except RuleTimeout:  # the alarm fired between a rule's end and its disarm
            monitor.failures.append({"rule": monitor.current or "?", "name": "",
                                     "file": rel, "kind": "hang",
                                     "message": "time limit reached", "where": ""})
            result = None
        seconds = thread_time() - start
        proto.emit({
            "ev": "result", "file": rel,
            "result": result.model_dump(mode="json") if result is not None else None,
            "seconds": seconds, "rule_seconds": monitor.rule_seconds,
            "failures": monitor.failures, "skipped": sorted(set(monitor.skipped)),
            "calls": monitor.calls, "counts": monitor.counts,
            "divergence": replayer.finish(rel),
        })


def _uses_excluded(checker: Any, data: bytes, targets: set[str], primitives: bool) -> str:
    """Why a schedule needs a plugin the trusted run lacks: its target's file is proposed,
    or (when the proposal changes or adds a primitive) it calls a primitive or method the
    trusted rulebook does not have. "" when the trusted run can check it."""
    if not targets and not primitives:
        return ""
    from cakegov.ir.errors import InputError
    from cakegov.ir.parse import parse_bytes

    try:
        schedule = parse_bytes(data, checker.vocabulary)
    except InputError:
        return ""
    if schedule.target in targets:
        return f"its target {schedule.target} is proposed"
    missing = sorted({u.name for u in schedule.unresolved
                      if u.what == "primitive" or u.what.startswith("method of")})
    if primitives and missing:
        return f"it calls {', '.join(missing[:3])}, which only a proposed primitive defines"
    return ""


def _compile(rel: str, data: bytes, book: Any, workloads: Any) -> dict[str, Any]:
    from cakegov.check.runner import Checker
    from cakegov.gpu.compile import CompilerUnavailable
    from cakegov.gpu.run import CompileFailed, compile_artifact
    from cakegov.ir.parse import parse_bytes
    from cakegov.lower.build import Prepared, lower_checked

    checker = Checker(book, workloads, preview=True)
    result = checker.check_bytes(data, rel)
    if result.verdict != "clean":
        return {"status": "not compiled", "detail": f"{result.verdict} under this rulebook"}
    schedule = parse_bytes(data, checker.vocabulary)
    try:
        kernel = lower_checked(schedule, book, workloads[schedule.workload], rel)
        artifact = compile_artifact(Prepared(result, schedule, kernel), book)
    except CompilerUnavailable as exc:
        return {"status": "not available", "detail": str(exc)}
    except CompileFailed as exc:
        return {"status": "compile error", "detail": str(exc)}
    except Exception as exc:  # lowering or emission refused the schedule
        return {"status": "compile error",
                "detail": traceback.format_exception_only(type(exc), exc)[-1].strip()}
    d = artifact.details
    return {"status": "compiled",
            "detail": f"{artifact.compiler}: {d.get('registers')} registers/thread (launch "
                      f"allows {d.get('launch_registers')}), spills "
                      f"{d.get('spill_stores')} B stored / {d.get('spill_loads')} B loaded"}


def _gpu_run(path: Path, book: Any, workloads: Any, root: Path, gpu: dict[str, Any]
             ) -> tuple[dict[str, Any], bool]:
    from cakegov.gpu.run import RunOptions, run_file

    options = RunOptions(record=False, repeat=int(gpu.get("repeat", 20)),
                         timeout_s=float(gpu.get("timeout_s", 30.0)))
    outcome = run_file(path, options, book, workloads, root=root)
    detail = "; ".join(line.strip() for line in outcome.lines[1:] if line.strip())[:2000]
    status = {0: "correct", 1: "wrong or rejected", 2: "not measured",
              3: "not measured"}.get(outcome.exit_code, "error")
    if outcome.hung:
        status = "hung"
    return {"status": status, "detail": detail or "; ".join(outcome.lines)[:2000]}, outcome.hung


def _simulate(rel: str, data: bytes, book: Any, workloads: Any) -> dict[str, Any]:
    """The simulator's evidence (cakegov/sim/evidence.py), whatever the verdict."""
    from cakegov.sim.evidence import simulate_evidence

    try:
        sim = simulate_evidence(data, rel, book, workloads)
    except Exception as exc:  # a simulator failure is an error entry, never a verdict
        last = traceback.format_exception_only(type(exc), exc)[-1].strip()
        return {"status": "error", "detail": f"the simulator raised {last}"[:2000]}
    return {"status": sim["status"], "detail": sim["detail"]}


def evidence_files(job: dict[str, Any], book: Any, workloads: Any, proto: Protocol) -> None:
    root = Path(job["root"])
    gpu = job.get("gpu") or {}
    compile_these = set(gpu.get("compile", ()))
    for rel, path in job["files"]:
        data = Path(path).read_bytes()
        proto.emit({"ev": "file", "file": rel, "step": "simulate"})
        event: dict[str, Any] = {"ev": "evidence", "file": rel,
                                 "simulator": _simulate(rel, data, book, workloads)}
        hung = False
        if rel in compile_these:
            proto.emit({"ev": "file", "file": rel, "step": "compile"})
            compiled = _compile(rel, data, book, workloads)
            run: dict[str, Any] = {"status": "not measured", "detail": gpu.get("why", "")}
            if gpu.get("run") and compiled["status"] == "compiled":
                proto.emit({"ev": "file", "file": rel, "step": "gpu"})
                run, hung = _gpu_run(Path(path), book, workloads, root, gpu)
            elif gpu.get("run"):
                run = {"status": "not measured", "detail": "not compiled"}
            event |= {"compile": compiled, "gpu": run}
        proto.emit(event)
        if hung:  # the CUDA context is wedged: leave without tearing it down
            proto.emit({"ev": "done"})
            os._exit(0)


def cost_judgement(job: dict[str, Any], proto: Protocol) -> None:
    """The gate's judgement of changed cost-parameter files (cakegov/cost/gate.py): it
    lowers the valid corpus with the base rulebook and the workloads, so it runs here."""
    from cakegov.cost.gate import judge

    c = job["cost"]
    first = job["files"][0][0]
    proto.emit({"ev": "file", "file": first, "step": "cost"})
    j = judge(Path(job["rules"]), Path(c["candidate"]), c["changed"],
              [Path(v) for v in c["valid"]], Path(job["workloads"]),
              Path(c["measurements"]), Path(c["root"]))
    proto.emit({"ev": "cost", "file": first, "notes": j.notes,
                "blockers": [list(b) for b in j.blockers], "metrics": j.metrics})


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    fds = {k: int(v) for k, v in zip(args[1::2], args[2::2], strict=False)
           if k in ("--channel", "--key-fd")}
    proto = Protocol(fds.get("--channel"), fds.get("--key-fd"))  # before any plugin loads
    job = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    signal.signal(signal.SIGALRM, _on_alarm)
    if job["mode"] != "evidence":  # CUDA maps far more address space than it uses
        _limit_memory(int(job.get("memory_limit_mb", 0)))
    if job["mode"] == "cost":  # loads its rulebook and workloads itself
        proto.emit({"ev": "loaded", "info": None})  # a failure from here on is the judgement's
        cost_judgement(job, proto)
        proto.emit({"ev": "done"})
        return 0
    from cakegov.check.rulebook import PluginError, Rulebook
    from cakegov.corpus.workloads import WorkloadError, load_workloads

    signal.setitimer(signal.ITIMER_REAL, float(job.get("load_limit_s", 60.0)))
    try:
        book = Rulebook.load(job["rules"])
        workloads = load_workloads(job["workloads"]) if job["mode"] != "info" else {}
    except RuleTimeout:
        proto.emit({"ev": "load_error", "message": "loading did not finish within "
                    f"{job.get('load_limit_s', 60.0)} s"})
        return 0
    except (PluginError, WorkloadError) as exc:
        proto.emit({"ev": "load_error", "message": str(exc)})
        return 0
    except (Exception, MemoryError) as exc:
        last = traceback.format_exception_only(type(exc), exc)[-1].strip()
        proto.emit({"ev": "load_error", "message": f"loading raised {last}"})
        return 0
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    proto.emit({"ev": "loaded", "info": describe(book)})
    if job["mode"] == "check":
        check_files(job, book, workloads, proto)
    elif job["mode"] == "evidence":
        evidence_files(job, book, workloads, proto)
    proto.emit({"ev": "done"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
