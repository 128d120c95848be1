"""Errors in schedule input: always located, never a traceback."""

from __future__ import annotations

from cakegov.ir.nodes import Span


class InputError(Exception):
    """The schedule is not well-formed input (syntax, forbidden construct, wrong type,
    limits). Carries a message, a span and a stable code."""

    def __init__(self, code: str, message: str, span: Span, hint: str | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.span = span
        self.hint = hint


# Stable codes of input errors (rule codes never start with E).
SYNTAX = "E100"
ENCODING = "E101"
FORBIDDEN = "E102"
ARG_TYPE = "E103"
LIMIT = "E104"
STRUCTURE = "E105"
