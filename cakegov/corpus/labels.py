"""Inline corpus expectations.

A valid schedule carries `# expect: clean` on a line of its own. An invalid one carries
`# expect: CODE` (or `# expect: CODE1, CODE2`) as a trailing comment on each line where a
finding must point. A known gap, a finding the checker should give but does not yet, is
`# todo-expect: CODE` on its line: `cakegov corpus run` reports it and does not fail on it
(and fails when the finding appears, so the label is promoted). Comments are found with
`tokenize`, so `#` inside strings is safe.

Provenance (`# origin: ...` on a line of its own, at most once): `hand-written` (the
default when absent), `transcription <public source>`, `agent <candidate or run id>`, or
`mutant <origin> <operator> <site>`; the manifest records it for every case."""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

_EXPECT = re.compile(r"#\s*expect:\s*(.+?)\s*$")
_TODO = re.compile(r"#\s*todo-expect:\s*(.+?)\s*$")
_ORIGIN = re.compile(r"#\s*origin:\s*(.+?)\s*$")
ORIGIN_KINDS = ("hand-written", "transcription", "agent", "mutant")
_CODE = re.compile(r"^[A-Z]{1,3}[0-9]{3}$")


class LabelError(Exception):
    pass


@dataclass(frozen=True)
class Labels:
    clean: bool
    expected: frozenset[tuple[str, int]]  # (code, line)
    todo: frozenset[tuple[str, int]] = frozenset()  # known gaps: (code, line)
    origin: str = "hand-written"

    @property
    def codes(self) -> frozenset[str]:
        return frozenset(code for code, _ in self.expected)


def _codes(body: str, where: str, line: int) -> list[str]:
    codes = [c.strip() for c in body.split(",")]
    for code in codes:
        if not _CODE.match(code):
            raise LabelError(f"{where}:{line}: bad expectation {code!r}")
    return codes


def read_labels(text: str, where: str = "<schedule>") -> Labels:
    clean = False
    expected: set[tuple[str, int]] = set()
    todo: set[tuple[str, int]] = set()
    origin: str | None = None
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError) as exc:
        raise LabelError(f"{where}: cannot tokenize: {exc}") from None
    for tok in tokens:
        if tok.type != tokenize.COMMENT:
            continue
        line = tok.start[0]
        m = _ORIGIN.match(tok.string)
        if m:
            if origin is not None:
                raise LabelError(f"{where}:{line}: a second `# origin:`")
            origin = m.group(1)
            if origin.split()[0] not in ORIGIN_KINDS:
                raise LabelError(f"{where}:{line}: origin {origin!r} is none of "
                                 f"{', '.join(ORIGIN_KINDS)}")
            continue
        m = _TODO.match(tok.string)
        if m:
            todo.update((code, line) for code in _codes(m.group(1), where, line))
            continue
        m = _EXPECT.match(tok.string)
        if not m:
            continue
        body = m.group(1)
        if body == "clean":
            clean = True
            continue
        expected.update((code, line) for code in _codes(body, where, line))
    if clean and expected:
        raise LabelError(f"{where}: labelled both clean and with findings")
    if not clean and not expected and not todo:
        raise LabelError(f"{where}: no `# expect:` label")
    return Labels(clean=clean, expected=frozenset(expected), todo=frozenset(todo),
                  origin=origin or "hand-written")


def strip_expectations(text: str) -> str:
    """`text` with every `# expect:`, `# todo-expect:` and `# origin:` comment blanked to
    spaces (lines and columns kept): a derived schedule (a mutant) must not inherit its
    origin's labels. Text that does not tokenize is returned as it is."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return text
    lines = io.StringIO(text).readlines()
    for tok in tokens:
        if tok.type == tokenize.COMMENT and (_EXPECT.match(tok.string) or _TODO.match(
                tok.string) or _ORIGIN.match(tok.string)):
            (r, c0), (_, c1) = tok.start, tok.end
            row = lines[r - 1]
            lines[r - 1] = row[:c0] + " " * (c1 - c0) + row[c1:]
    return "".join(lines)


def relabel(text: str, found: list[tuple[str, int]]) -> str:
    """`text` with its `# expect:` comments replaced by one `# expect: CODES` trailing
    comment on each line of `found` (code, line): `cakegov corpus accept`."""
    blanked = io.StringIO(text).readlines()
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        raise LabelError("cannot tokenize") from None
    for tok in tokens:
        if tok.type == tokenize.COMMENT and _EXPECT.match(tok.string):
            (r, c0), (_, c1) = tok.start, tok.end
            row = blanked[r - 1]
            blanked[r - 1] = row[:c0] + row[c1:]
    by_line: dict[int, list[str]] = {}
    for code, line in found:
        by_line.setdefault(line, []).append(code)
    out = []
    for n, row in enumerate(blanked, start=1):
        end = row[len(row.rstrip("\r\n")):]
        body = row.rstrip("\r\n").rstrip() if row.strip() or n in by_line else row.rstrip(
            "\r\n")
        if n in by_line:
            body += "  # expect: " + ", ".join(sorted(set(by_line[n])))
        out.append(body + (end or ("\n" if n < len(blanked) else "")))
    return "".join(out)


def read_label_file(path: Path) -> Labels:
    return read_labels(path.read_text(encoding="utf-8"), str(path))


def blind(text: str) -> str:
    """`text` with every comment and the content of every docstring-like string statement
    blanked to spaces and every line's trailing blanks dropped, newlines kept: what plugin
    code sees of a corpus case. Lines and
    columns do not move, so findings still point where they would in the original, but no
    `# expect:` label, comment or prose description of the defect reaches a rule. Text that
    does not tokenize has its comments removed line by line (its parse error is then the
    same as the original's)."""
    lines = io.StringIO(text).readlines()  # split at "\n" only, as tokenize does
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return "".join(_trailing(re.sub(r"#[^\r\n]*", lambda m: " " * len(m.group(0)),
                                        line), line) for line in lines)
    spans: list[tuple[tuple[int, int], tuple[int, int], int, int]] = []
    prev = tokenize.NEWLINE
    for tok in tokens:
        if tok.type == tokenize.COMMENT:
            spans.append((tok.start, tok.end, 0, 0))
        elif tok.type == tokenize.STRING and prev in (tokenize.NEWLINE, tokenize.NL,
                                                       tokenize.INDENT, tokenize.DEDENT):
            body = tok.string.lstrip("rbuRBUfF")
            quote = 3 if body[:3] in ('"""', "'''") else 1
            # a string statement (a docstring): keep its prefix and quotes
            spans.append((tok.start, tok.end, len(tok.string) - len(body) + quote, quote))
        if tok.type not in (tokenize.COMMENT, tokenize.NL):
            prev = tok.type
    out = [list(line) for line in lines]
    for (r0, c0), (r1, c1), head, tail in spans:
        for r in range(r0, r1 + 1):
            row = out[r - 1]
            lo = c0 if r == r0 else 0
            hi = c1 if r == r1 else len(row)
            for c in range(lo, hi):
                if c >= len(row) or row[c] in "\r\n":
                    continue
                if (r, c) < (r0, c0 + head) or (r, c) >= (r1, c1 - tail):
                    continue
                row[c] = " "
    return "".join(_trailing("".join(row), line) for row, line in zip(out, lines,
                                                                      strict=True))


def _trailing(line: str, original: str) -> str:
    """Blanked `line` without the blanks at its end when blanking made them (a comment or
    docstring text was there): they would leave as many spaces as the label had
    characters, and a rule could find the labelled lines by their trailing width. A
    line's own trailing blanks stay."""
    body = line.rstrip("\r\n")
    kept = body.rstrip(" \t")
    if not original[len(kept):len(body)].strip():
        return line  # nothing was blanked at the end
    return kept + line[len(body):]
