"""Latency of `cakegov server`: from a `textDocument/didChange` to the
`textDocument/publishDiagnostics` for that version, for a corpus GEMM after warm-up,
beside a cold `cakegov check` of the same file (a fresh process each, bytecode caches
allowed, no result cache), measured in one run.

    python benchmarks/bench_server.py                 # 50 changes, 5 cold checks
    python benchmarks/bench_server.py --changes 200 --json bench-server.json

Each change alters the text (a comment's counter), so no layer can answer from a
remembered result. Target (issue 46): median <= 50 ms on the 2-CPU development machine.
`Client` is the minimal LSP client tests/test_server.py drives the server with."""

from __future__ import annotations

import argparse
import json
import os
import queue
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
GEMM = ROOT / "corpus" / "valid" / "gemm" / "ws_pipeline_s4.cake"
TARGET_MS = 50.0
WAIT_S = 120.0  # a bound on a hang while waiting for one message, never a measurement


class Client:
    """A minimal LSP client over a `cakegov server` child process's pipes
    (Content-Length framed JSON-RPC)."""

    def __init__(self, rules: Path | None = None, workloads: Path | None = None,
                 cwd: Path = ROOT) -> None:
        cmd = [sys.executable, "-m", "cakegov", "server"]
        if rules is not None:
            cmd += ["--rules", str(rules)]
        if workloads is not None:
            cmd += ["--workloads", str(workloads)]
        self.proc = subprocess.Popen(cmd, cwd=cwd, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.inbox: queue.Queue = queue.Queue()
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            length = None
            while True:
                line = out.readline()
                if not line:
                    self.inbox.put(None)
                    return
                if line in (b"\r\n", b"\n"):
                    break
                name, _, value = line.decode("ascii").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            if length is None:
                self.inbox.put(None)
                return
            self.inbox.put(json.loads(out.read(length)))

    def send(self, message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode("utf-8")
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"Content-Length: {len(body)}\r\n\r\n".encode("ascii") + body)
        self.proc.stdin.flush()

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self.send({"method": method, "params": params})

    def request(self, method: str, params: dict[str, Any]) -> Any:
        self.next_id += 1
        rid = self.next_id
        self.send({"id": rid, "method": method, "params": params})
        msg = self.wait(lambda m: m.get("id") == rid and "method" not in m)
        if "error" in msg:
            raise RuntimeError(f"{method}: {msg['error']}")
        return msg["result"]

    def wait(self, want) -> dict[str, Any]:
        while True:
            try:
                msg = self.inbox.get(timeout=WAIT_S)
            except queue.Empty:
                raise AssertionError(f"the server sent nothing for {WAIT_S:g} s") from None
            if msg is None:
                err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                raise AssertionError(f"the server closed its output: {err[-2000:]}")
            if want(msg):
                return msg

    def initialize(self, root: Path = ROOT) -> None:
        self.request("initialize", {"processId": os.getpid(), "rootUri": root.as_uri(),
                                    "capabilities": {}})
        self.notify("initialized", {})

    def open(self, uri: str, text: str, version: int = 1) -> None:
        self.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "python", "version": version, "text": text}})

    def change(self, uri: str, text: str, version: int) -> None:
        self.notify("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": version},
            "contentChanges": [{"text": text}]})

    def diagnostics(self, uri: str, version: int | None = None) -> list[dict[str, Any]]:
        msg = self.wait(lambda m: m.get("method") == "textDocument/publishDiagnostics"
                        and m["params"]["uri"] == uri
                        and (version is None or m["params"].get("version") == version))
        return msg["params"]["diagnostics"]

    def close(self) -> int:
        self.request("shutdown", {})
        self.notify("exit", {})
        return self.proc.wait(timeout=WAIT_S)


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=50, help="measured changes")
    parser.add_argument("--warmup", type=int, default=5, help="changes before measuring")
    parser.add_argument("--cold", type=int, default=5, help="cold `cakegov check` runs")
    parser.add_argument("--file", type=Path, default=GEMM)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    text = args.file.read_text(encoding="utf-8")
    uri = args.file.resolve().as_uri()
    client = Client()
    client.initialize()
    client.open(uri, text)
    first = client.diagnostics(uri, 1)
    latencies: list[float] = []
    for v in range(2, 2 + args.warmup + args.changes):
        edited = f"{text}# edit {v}\n"
        start = time.perf_counter()
        client.change(uri, edited, v)
        found = client.diagnostics(uri, v)
        elapsed = time.perf_counter() - start
        if found != first:
            sys.exit(f"change {v}: the diagnostics differ from the first check's")
        if v >= 2 + args.warmup:
            latencies.append(elapsed * 1000)
    client.close()

    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # users have bytecode caches
    cakegov = str(Path(sys.executable).with_name("cakegov"))
    cold: list[float] = []
    for _ in range(args.cold):
        start = time.perf_counter()
        subprocess.run([cakegov, "check", "--no-cache", str(args.file)], cwd=ROOT, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        cold.append((time.perf_counter() - start) * 1000)
    median, p95 = statistics.median(latencies), _quantile(latencies, 0.95)
    cold_median = statistics.median(cold)
    name = args.file.relative_to(ROOT) if args.file.is_relative_to(ROOT) else args.file
    print(f"{name}: {len(first)} finding(s); {args.changes} changes after {args.warmup} "
          f"warm-up; {args.cold} cold checks; {os.cpu_count()} CPUs")
    print(f"{'':40} {'ms':>9}  {'vs cold check':>14}")
    print(f"{'server, didChange -> diagnostics, median':40} {median:9.1f}  "
          f"{median / cold_median:13.3f}x   target <= {TARGET_MS:g} ms "
          f"{'met' if median <= TARGET_MS else 'NOT met'}")
    print(f"{'server, didChange -> diagnostics, p95':40} {p95:9.1f}  "
          f"{p95 / cold_median:13.3f}x")
    print(f"{'cakegov check --no-cache FILE, median':40} {cold_median:9.1f}  {1.0:13.3f}x")
    if args.json:
        args.json.write_text(json.dumps({
            "file": str(name), "latencies_ms": latencies, "cold_check_ms": cold,
            "median_ms": median, "p95_ms": p95, "target_ms": TARGET_MS}, indent=2) + "\n")
    return 0 if median <= TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
