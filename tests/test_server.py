"""`cakegov server` with a real client: the server runs as its own process and this test
speaks LSP to it over its standard input and output (Content-Length framed JSON-RPC), as
an editor or an agent harness does. A defective corpus schedule gets its labelled code at
its labelled line, the machine fix comes back as a code action whose edit, applied and
sent as a change, leaves no diagnostic; a schedule that does not parse, a huge document
and a storm of changes end in diagnostics, and the server still shuts down cleanly."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from typing import Any

import pytest

from .conftest import CORPUS, ROOT, RULES, WORKLOADS

pytest.importorskip("pygls")

PARITY = CORPUS / "invalid" / "gemm" / "consumer_parity_inverted.cake"


def _bench() -> Any:
    spec = importlib.util.spec_from_file_location("bench_server",
                                                  ROOT / "benchmarks" / "bench_server.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_server", module)
    spec.loader.exec_module(module)
    return module


Client = _bench().Client  # the minimal LSP client the latency benchmark uses too


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
    c = Client(RULES, WORKLOADS)
    c.initialize()
    yield c
    if c.proc.poll() is None:
        c.proc.kill()


def _open(c, uri: str, text: str, version: int = 1) -> None:
    c.open(uri, text, version)


def _change(c, uri: str, text: str, version: int) -> None:
    c.change(uri, text, version)


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
                          capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 2 and "not a rulebook" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_changed_rulebook_is_reloaded_and_a_broken_one_reported(tmp_path):
    """Rule files changed on disk take effect at the next check: with the rule that
    reports P005 deleted, P005 is gone; with a plugin that fails to import added, the
    client is told and the last good rulebook keeps serving."""
    import shutil

    rules = tmp_path / "rules"
    shutil.copytree(RULES, rules)
    c = Client(rules, WORKLOADS)
    try:
        c.initialize()
        uri = PARITY.as_uri()
        text = PARITY.read_text()
        c.open(uri, text)
        assert "P005" in {d["code"] for d in c.diagnostics(uri, 1)}
        (rules / "checks" / "initial-parity.py").unlink()
        c.change(uri, text, 2)
        without = {d["code"] for d in c.diagnostics(uri, 2)}
        assert "P005" not in without and without  # the anomaly is still reported
        (rules / "checks" / "broken.py").write_text("raise RuntimeError('boom')\n")
        c.change(uri, text, 3)
        shown = c.wait(lambda m: m.get("method") == "window/showMessage")
        assert "does not load" in shown["params"]["message"]
        assert {d["code"] for d in c.diagnostics(uri, 3)} == without
        assert c.close() == 0
    finally:
        if c.proc.poll() is None:
            c.proc.kill()


def test_shutdown_and_exit(client):
    assert client.close() == 0


def test_positions_count_utf16_code_units():
    from lsprotocol import types

    from cakegov.ir.nodes import Span
    from cakegov.server import _range

    line = "x = 'é𝄞'  # y\n"
    r = _range(types, Span(line=1, col=10, end_line=1, end_col=11), [line])
    assert (r.start.character, r.end.character) == (10, 11)  # 𝄞 is two UTF-16 units


def test_the_latency_benchmark_prints_its_rows(tmp_path):
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_server.py"),
                           "--changes", "3", "--warmup", "1", "--cold", "1", "--json",
                           str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode in (0, 1), proc.stderr
    assert "didChange -> diagnostics, median" in proc.stdout
    assert "cakegov check --no-cache FILE, median" in proc.stdout
    import json

    data = json.loads(out.read_text())
    assert len(data["latencies_ms"]) == 3 and len(data["cold_check_ms"]) == 1
    assert data["median_ms"] > 0 and data["target_ms"] == 50.0
