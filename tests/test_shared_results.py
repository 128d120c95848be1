"""The test session's shared results (tests/shared.py): a value is computed once, by one
process, under a key of its content; entries another process holds are taken last."""

from __future__ import annotations

import fcntl
import os
import threading

from .shared import SharedStore, content_key


def test_a_value_is_computed_once_and_read_back_by_another_store(tmp_path):
    calls: list[str] = []
    one = SharedStore(tmp_path)
    assert one.get("k", lambda: calls.append("one") or {"v": 1}) == {"v": 1}
    assert one.get("k", lambda: calls.append("again") or {"v": 2}) == {"v": 1}
    other = SharedStore(tmp_path)  # another worker: a new process, the same directory
    assert other.get("k", lambda: calls.append("other") or {"v": 3}) == {"v": 1}
    assert calls == ["one"] and other.read == 1 and other.computed == 0


def test_keys_follow_the_content():
    assert content_key("check", "a", 1) == content_key("check", "a", 1)
    assert content_key("check", "a", 1) != content_key("check", "b", 1)
    assert content_key("check", "a", 1) != content_key("check", "a", 2)


def test_map_leaves_an_entry_another_process_computes_for_last(tmp_path):
    """The held entry is neither computed here nor waited for before the others; once
    its holder stores it, it is read back."""
    store, holder = SharedStore(tmp_path), SharedStore(tmp_path)
    fd = os.open(tmp_path / "b.lock", os.O_CREAT | os.O_RDWR, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    last_done = threading.Event()
    order: list[str] = []

    def other_process() -> None:
        last_done.wait()
        holder._store("b", "B from the other")
        os.close(fd)  # releases the lock

    thread = threading.Thread(target=other_process)
    thread.start()

    def compute(item: str) -> str:
        order.append(item)
        if item == "c":
            last_done.set()
        return item.upper()

    got = store.map(["a", "b", "c"], key=lambda item: item, compute=compute)
    thread.join()
    assert got == ["A", "B from the other", "C"]
    assert order == ["a", "c"]


def test_the_shared_checker_keys_on_the_documentation_base(checker, monkeypatch):
    """Findings carry their rule's documentation URL, which CAKEGOV_DOC_BASE sets: a
    result checked under another base is not served."""
    from .conftest import CORPUS

    path = CORPUS / "invalid" / "gemm" / "smem_over_capacity.cake"
    default = checker.check_path(path).findings[0].doc_url
    monkeypatch.setenv("CAKEGOV_DOC_BASE", "https://example.org/cakegov/docs/")
    moved = checker.check_path(path).findings[0].doc_url
    assert moved.startswith("https://example.org/cakegov/docs/") and moved != default
