"""`cakegov server`: the checker as a Language Server (LSP over stdio, pygls).

The process keeps the rulebook, the workloads and the engine's imports warm. On
`didOpen`, `didChange` and `didSave` of a schedule it publishes the findings `cakegov
check` reports for the same text: the same codes, spans, severities, messages and doc links;
the witness's steps become related locations; each machine fix (`applicability: machine`,
the fixes `cakegov check --fix` applies) is offered as a quick-fix code action with the
same edits. A schedule that does not parse gets its parse error as a diagnostic (the
checker's E-codes, with file, line and column). A rule, primitive, target or workload
file changed on disk is noticed before the next check (a listing of sizes and
modification times, never a timer) and the rulebook is loaded again; one that no longer
loads is reported to the client and the last good rulebook keeps serving. An internal
failure on one document becomes a diagnostic on that document, never a server exit.

Positions: cakegov counts columns in characters (1-based, end exclusive); LSP counts
UTF-16 code units from 0 (the protocol's default encoding). `_utf16` converts on the
document's own line text."""

from __future__ import annotations

import threading
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from cakegov import __version__

SOURCE = "cakegov"
MAX_DOCUMENT_BYTES = 4 << 20  # a larger document gets one diagnostic, not a check


@dataclass
class Loaded:
    """The warm state: a checker over one rulebook and one set of workloads, and the
    fingerprint of the files it was loaded from."""

    checker: Any
    fingerprint: tuple
    error: str = ""  # why the latest reload failed ("" when it did not)


def _fingerprint(rules: Path, workloads: Path) -> tuple:
    """(relative path, size, mtime) of every plugin and workload file: what a reload
    depends on (cakegov.govern.cache.PLUGIN_GLOBS, workloads/*.py)."""
    from cakegov.govern.cache import PLUGIN_GLOBS

    out = []
    for root, globs in ((rules, PLUGIN_GLOBS), (workloads, ("*.py",))):
        for pattern in globs:
            for path in sorted(root.glob(pattern)):
                try:
                    st = path.stat()
                except OSError:
                    continue
                out.append((str(path), st.st_size, st.st_mtime_ns))
    return tuple(out)


@dataclass
class Engine:
    """Loads and, when its files change, reloads the checker."""

    rules: Path
    workloads: Path
    preview: bool = False
    loaded: Loaded | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def checker(self) -> tuple[Any, str]:
        """The checker to use now, and a message when a reload failed ("" otherwise)."""
        with self.lock:
            fp = _fingerprint(self.rules, self.workloads)
            if self.loaded is not None and self.loaded.fingerprint == fp:
                return self.loaded.checker, self.loaded.error
            try:
                checker = self._load()
            except Exception as exc:  # a plugin that no longer loads: keep the last good
                why = traceback.format_exception_only(type(exc), exc)[-1].strip()
                if self.loaded is None:
                    raise
                self.loaded = Loaded(self.loaded.checker, fp, f"the rulebook at {self.rules} "
                                     f"does not load ({why}); still checking with the "
                                     "rulebook loaded before")
                return self.loaded.checker, self.loaded.error
            self.loaded = Loaded(checker, fp)
            return checker, ""

    def _load(self) -> Any:
        from cakegov.check.rulebook import Rulebook
        from cakegov.check.runner import Checker
        from cakegov.corpus.workloads import load_workloads

        book = Rulebook.load(self.rules)
        if not book.rules and not book.targets:
            raise ValueError(f"{self.rules} has no rules (checks/*.py) and no targets")
        return Checker(book, load_workloads(self.workloads), preview=self.preview)


def uri_path(uri: str) -> str:
    """The file name a document's URI names (its path for file: URIs, else the URI)."""
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else uri


def _utf16(line_text: str, col: int) -> int:
    """UTF-16 code units before the 1-based character column `col` of `line_text`."""
    head = line_text[:max(0, col - 1)]
    return len(head.encode("utf-16-le")) // 2


def _range(types: Any, span: Any, lines: list[str]) -> Any:
    def pos(line: int, col: int) -> Any:
        text = lines[line - 1] if 0 < line <= len(lines) else ""
        return types.Position(line=max(0, line - 1), character=_utf16(text, col))

    if span is None:
        return types.Range(start=types.Position(line=0, character=0),
                           end=types.Position(line=0, character=0))
    return types.Range(start=pos(span.line, span.col), end=pos(span.end_line, span.end_col))


SEVERITY = {"blocking": 1, "report": 2, "hint": 4}  # Error, Warning, Hint


def diagnostics(types: Any, uri: str, text: str, result: Any) -> list[Any]:
    """The LSP diagnostics of one check result (cakegov.check.findings.FileResult)."""
    lines = text.splitlines()
    out = []
    for index, f in enumerate(result.findings):
        related = []
        trace = f.evidence.get("witness") if isinstance(f.evidence, dict) else None
        for step in trace if isinstance(trace, list) else []:
            if not isinstance(step, dict) or not isinstance(step.get("line"), int):
                continue
            line = step["line"]
            where = types.Location(uri=uri, range=types.Range(
                start=types.Position(line=max(0, line - 1), character=0),
                end=types.Position(line=max(0, line - 1), character=0)))
            related.append(types.DiagnosticRelatedInformation(
                location=where, message=f"witness: {step.get('text', '')}"))
        message = f.message + (f"\nhelp: {f.hint}" if f.hint else "")
        out.append(types.Diagnostic(
            range=_range(types, f.span, lines), message=message,
            severity=types.DiagnosticSeverity(SEVERITY.get(f.severity, 3)),
            code=f.code, source=SOURCE,
            code_description=types.CodeDescription(href=f.doc_url) if f.doc_url else None,
            related_information=related or None,
            data={"finding": index}))
    return out


def code_actions(types: Any, uri: str, text: str, result: Any, wanted: Any) -> list[Any]:
    """A quick fix per machine fix of the findings whose range meets `wanted`."""
    lines = text.splitlines()
    out = []
    for f in result.findings:
        if not any(fix.applicability == "machine" and fix.edits for fix in f.fixes):
            continue
        where = _range(types, f.span, lines)
        if (where.end.line, where.end.character) < (wanted.start.line,
                                                    wanted.start.character) or \
                (where.start.line, where.start.character) > (wanted.end.line,
                                                             wanted.end.character):
            continue
        for fix in f.fixes:
            if fix.applicability != "machine" or not fix.edits:
                continue
            edits = [types.TextEdit(range=_range(types, e.span, lines), new_text=e.text)
                     for e in fix.edits]
            out.append(types.CodeAction(
                title=f"{f.code}: {fix.description}", kind=types.CodeActionKind.QuickFix,
                is_preferred=True, edit=types.WorkspaceEdit(changes={uri: edits})))
    return out


def build(engine: Engine) -> Any:
    """The pygls server, its handlers bound to `engine`."""
    from lsprotocol import types
    from pygls.lsp.server import LanguageServer

    from cakegov.check.findings import FileResult, Finding

    server = LanguageServer("cakegov", __version__)
    results: dict[str, tuple[str, Any]] = {}  # uri -> (text checked, FileResult)

    def check(uri: str) -> None:
        doc = server.workspace.get_text_document(uri)
        text, name = doc.source, uri_path(uri)
        try:
            if len(text.encode("utf-8", errors="replace")) > MAX_DOCUMENT_BYTES:
                raise _TooLarge()
            checker, warning = engine.checker()
            if warning:
                server.window_show_message(types.ShowMessageParams(
                    type=types.MessageType.Warning, message=warning))
            result = checker.check_bytes(text.encode("utf-8"), name)
        except _TooLarge:
            result = _one(FileResult, Finding, name, "E106", "input", "input",
                          f"the document is larger than {MAX_DOCUMENT_BYTES >> 20} MiB: not "
                          "checked")
        except Exception as exc:  # never a server exit: the document says what happened
            why = traceback.format_exception_only(type(exc), exc)[-1].strip()
            result = _one(FileResult, Finding, name, "P098", "protocol-bounds", "internal",
                          f"internal error while checking: {why}")
        results[uri] = (text, result)
        server.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
            uri=uri, version=doc.version, diagnostics=diagnostics(types, uri, text, result)))

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: Any, params: Any) -> None:
        check(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: Any, params: Any) -> None:
        check(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: Any, params: Any) -> None:
        check(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: Any, params: Any) -> None:
        uri = params.text_document.uri
        results.pop(uri, None)
        server.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
            uri=uri, diagnostics=[]))

    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(
        code_action_kinds=[types.CodeActionKind.QuickFix]))
    def code_action(ls: Any, params: Any) -> list[Any]:
        uri = params.text_document.uri
        if uri not in results:
            return []
        text, result = results[uri]
        doc = server.workspace.get_text_document(uri)
        if doc.source != text:  # the fixes were computed for another text
            return []
        return code_actions(types, uri, text, result, params.range)

    return server


class _TooLarge(Exception):
    pass


def _one(FileResult: Any, Finding: Any, name: str, code: str, rule: str, authority: str,
         message: str) -> Any:
    from cakegov.check.docs_url import rule_url

    return FileResult(file=name, verdict="error", findings=(Finding(
        code=code, rule=rule, severity="blocking", authority=authority, message=message,
        file=name, path="source", doc_url=rule_url(code, rule)),))


def serve(rules: Path, workloads: Path, preview: bool = False) -> None:
    """Load the rulebook (a usage error stops here, before the client is answered) and
    serve over standard input and output until the client exits."""
    engine = Engine(rules=rules, workloads=workloads, preview=preview)
    engine.checker()  # fail now, with a message, rather than on the first document
    build(engine).start_io()
