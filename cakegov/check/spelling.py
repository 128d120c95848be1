"""The schedule's own spelling of an expression, for the prose of findings.

The IR evaluates what it can (`S` bound to 2 becomes the constant 2), so a message built
from IR expressions names `(k // 2)` where the source says `(k // S)`. The engine keeps
the source; rules ask for the text of one argument (`CheckContext.spelling`) and get the
expression re-printed from the source's syntax tree: the author's own text of a one-line
expression, else `ast.unparse` of it (a multi-line expression can hold comments, and
comments are labels a rule must not read)."""

from __future__ import annotations

import ast
from functools import cached_property

from cakegov.check.repair import source_lines_keepends
from cakegov.ir.nodes import Span


class Spelling:
    """Expressions of one source text, found by their spans."""

    def __init__(self, source: str):
        self.source = source
        self.lines = source_lines_keepends(source)

    @cached_property
    def _tree(self) -> ast.Module | None:
        try:
            return ast.parse(self.source)
        except (SyntaxError, ValueError):
            return None

    def _col(self, line: int, byte_offset: int) -> int:
        raw = self.lines[line - 1].encode("utf-8")[:byte_offset]
        return len(raw.decode("utf-8", errors="replace")) + 1

    def _span(self, node: ast.AST) -> Span:
        end = node.end_lineno or node.lineno
        return Span(line=node.lineno, col=self._col(node.lineno, node.col_offset),
                    end_line=end, end_col=self._col(end, node.end_col_offset or 0))

    @cached_property
    def _by_span(self) -> dict[tuple[int, int, int, int], ast.expr]:
        out: dict[tuple[int, int, int, int], ast.expr] = {}
        for node in ast.walk(self._tree) if self._tree is not None else ():
            if isinstance(node, ast.expr):
                s = self._span(node)
                out.setdefault((s.line, s.col, s.end_line, s.end_col), node)
        return out

    @cached_property
    def _calls_by_line(self) -> dict[int, ast.Call]:
        out: dict[int, ast.Call] = {}
        for node in ast.walk(self._tree) if self._tree is not None else ():
            if isinstance(node, ast.stmt):
                value = getattr(node, "value", None)
                if isinstance(value, ast.Call):
                    out.setdefault(node.lineno, value)
        return out

    def text(self, node: ast.expr) -> str:
        if node.lineno == node.end_lineno:
            segment = ast.get_source_segment(self.source, node)
            if segment is not None:
                return segment
        return ast.unparse(node)

    def of_span(self, span: Span) -> str | None:
        """The expression that spans exactly `span`; None when there is none."""
        node = self._by_span.get((span.line, span.col, span.end_line, span.end_col))
        return self.text(node) if node is not None else None

    def of_arg(self, line: int, arg: str) -> str | None:
        """Keyword argument `arg` of the call the statement on `line` makes."""
        call = self._calls_by_line.get(line)
        if call is None:
            return None
        value = next((k.value for k in call.keywords if k.arg == arg), None)
        return self.text(value) if value is not None else None
