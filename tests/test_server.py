"""`cakegov server` with a real client: the server runs as its own process and this test
speaks LSP to it over its standard input and output (Content-Length framed JSON-RPC), as
an editor or an agent harness does. A defective corpus schedule gets its labelled code at
its labelled line, the machine fix comes back as a code action whose edit, applied and
sent as a change, leaves no diagnostic; a schedule that does not parse, a huge document
and a storm of changes end in diagnostics, and the server still shuts down cleanly."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from typing import Any

import pytest

from .conftest import CORPUS, ROOT, RULES, WORKLOADS

pytest.importorskip("pygls")

PARITY = CORPUS / "invalid" / "gemm" / "consumer_parity_inverted.cake"
TIMEOUT = 120.0  # seconds to wait for one message: a bound on a hang, never a verdict


class Client:
    """A minimal LSP client over a child process's pipes."""

    def __init__(self) -> None:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cakegov", "server", "--rules", str(RULES),
             "--workloads", str(WORKLOADS)],
            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=env)
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
            assert length is not None
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
        assert "error" not in msg, msg
        return msg["result"]

    def wait(self, want) -> dict[str, Any]:
        while True:
            try:
                msg = self.inbox.get(timeout=TIMEOUT)
            except queue.Empty:
                raise AssertionError("the server sent nothing for "
                                     f"{TIMEOUT:g} s") from None
            if msg is None:
                err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                raise AssertionError(f"the server closed its output: {err[-2000:]}")
            if want(msg):
                return msg

    def diagnostics(self, uri: str, version: int | None = None) -> list[dict[str, Any]]:
        msg = self.wait(lambda m: m.get("method") == "textDocument/publishDiagnostics"
                        and m["params"]["uri"] == uri
                        and (version is None or m["params"].get("version") == version))
        return msg["params"]["diagnostics"]

    def close(self) -> int:
        self.request("shutdown", {})
        self.notify("exit", {})
        return self.proc.wait(timeout=TIMEOUT)


def _offset(text: str, line: int, character: int) -> int:
    """A UTF-16 LSP position as an offset into `text` (the corpus is ASCII)."""
    lines = text.splitlines(keepends=True)
    return sum(len(x) for x in lines[:line]) + character


def _apply(text: str, edits: list[dict[str, Any]]) -> str:
    for e in sorted(edits, key=lambda e: (e["range"]["start"]["line"],
                                          e["range"]["start"]["character"]), reverse=True):
        a = _offset(text, e["range"]["start"]["line"], e["range"]["start"]["character"])
        b = _offset(text, e["range"]["end"]["line"], e["range"]["end"]["character"])
        text = text[:a] + e["newText"] + text[b:]
    return text


@pytest.fixture(scope="module")
def client():
    c = Client()
    c.request("initialize", {"processId": os.getpid(), "rootUri": ROOT.as_uri(),
                             "capabilities": {}})
    c.notify("initialized", {})
    yield c
    if c.proc.poll() is None:
        c.proc.kill()


def _open(c: Client, uri: str, text: str, version: int = 1) -> None:
    c.notify("textDocument/didOpen", {"textDocument": {
        "uri": uri, "languageId": "python", "version": version, "text": text}})


def _change(c: Client, uri: str, text: str, version: int) -> None:
    c.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                        "contentChanges": [{"text": text}]})


def test_labelled_finding_then_quick_fix_then_clean(client):
    text = PARITY.read_text()
    [label_line] = [i for i, line in enumerate(text.splitlines(), 1)
                    if "# expect: P005" in line]
    uri = PARITY.as_uri()
    _open(client, uri, text)
    diags = client.diagnostics(uri, 1)
    [d] = [d for d in diags if d["code"] == "P005"]
    assert d["range"]["start"]["line"] == label_line - 1
    assert d["severity"] == 1 and d["source"] == "cakegov"
    assert d["codeDescription"]["href"].startswith("http")
    assert "parity" in d["message"]
    actions = client.request("textDocument/codeAction", {
        "textDocument": {"uri": uri}, "range": d["range"],
        "context": {"diagnostics": [d]}})
    [action] = [a for a in actions if a["title"].startswith("P005")]
    assert action["kind"] == "quickfix"
    fixed = _apply(text, action["edit"]["changes"][uri])
    assert fixed != text and "parity=(k // S) % 2" in fixed
    _change(client, uri, fixed, 2)
    assert client.diagnostics(uri, 2) == []


def test_the_witness_steps_are_related_locations(client):
    path = CORPUS / "invalid" / "gemm" / "acquire_missing.cake"
    uri = path.as_uri()
    _open(client, uri, path.read_text())
    [d] = [d for d in client.diagnostics(uri, 1) if d["code"] == "P008"]
    related = d.get("relatedInformation") or []
    assert related and all(r["location"]["uri"] == uri for r in related)
    assert all(r["message"].startswith("witness: ") for r in related)


def test_malformed_huge_and_a_storm_end_in_diagnostics(client, tmp_path):
    bad = (tmp_path / "bad.cake").as_uri()
    _open(client, bad, "import cakegov.lang as lm\n\n@lm.schedule(\ndef broken(:\n")
    [d] = client.diagnostics(bad, 1)
    assert d["code"].startswith("E") and d["severity"] == 1
    assert d["range"]["start"]["line"] >= 0
    huge = (tmp_path / "huge.cake").as_uri()
    _open(client, huge, "# " + "x" * (5 << 20) + "\n")
    [d] = client.diagnostics(huge, 1)
    assert d["code"] == "E106" and "larger than" in d["message"]
    # a storm of changes, the last one a clean schedule: its diagnostics must come
    storm = (tmp_path / "storm.cake").as_uri()
    text = PARITY.read_text()
    _open(client, storm, text)
    for v in range(2, 42):
        _change(client, storm, text if v % 2 else "def (", v)
    fixed = "".join(line.replace("parity=(k // S + 1) % 2", "parity=(k // S) % 2")
                    if "# expect: P005" in line else line
                    for line in text.splitlines(keepends=True))
    _change(client, storm, fixed, 42)
    assert client.diagnostics(storm, 42) == []
    assert client.request("textDocument/codeAction", {
        "textDocument": {"uri": storm}, "range": {
            "start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
        "context": {"diagnostics": []}}) in ([], None)


def test_a_rulebook_that_does_not_load_is_a_usage_error(tmp_path):
    (tmp_path / "checks").mkdir()
    proc = subprocess.run([sys.executable, "-m", "cakegov", "server", "--rules",
                           str(tmp_path), "--workloads", str(WORKLOADS)], cwd=ROOT,
                          capture_output=True, text=True, timeout=TIMEOUT,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 2 and "not a rulebook" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_shutdown_and_exit(client):
    assert client.close() == 0


def test_positions_count_utf16_code_units():
    from lsprotocol import types

    from cakegov.ir.nodes import Span
    from cakegov.server import _range

    line = "x = 'é𝄞'  # y\n"
    r = _range(types, Span(line=1, col=10, end_line=1, end_col=11), [line])
    assert (r.start.character, r.end.character) == (10, 11)  # 𝄞 is two UTF-16 units
