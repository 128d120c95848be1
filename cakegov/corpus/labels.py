"""Inline corpus expectations.

A valid schedule carries `# expect: clean` on a line of its own. An invalid one carries
`# expect: CODE` (or `# expect: CODE1, CODE2`) as a trailing comment on each line where a
finding must point. Comments are found with `tokenize`, so `#` inside strings is safe."""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

_EXPECT = re.compile(r"#\s*expect:\s*(.+?)\s*$")
_CODE = re.compile(r"^[A-Z]{1,3}[0-9]{3}$")


class LabelError(Exception):
    pass


@dataclass(frozen=True)
class Labels:
    clean: bool
    expected: frozenset[tuple[str, int]]  # (code, line)

    @property
    def codes(self) -> frozenset[str]:
        return frozenset(code for code, _ in self.expected)


def read_labels(text: str, where: str = "<schedule>") -> Labels:
    clean = False
    expected: set[tuple[str, int]] = set()
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError) as exc:
        raise LabelError(f"{where}: cannot tokenize: {exc}") from None
    for tok in tokens:
        if tok.type != tokenize.COMMENT:
            continue
        m = _EXPECT.match(tok.string)
        if not m:
            continue
        body = m.group(1)
        if body == "clean":
            clean = True
            continue
        for code in (c.strip() for c in body.split(",")):
            if not _CODE.match(code):
                raise LabelError(f"{where}:{tok.start[0]}: bad expectation {code!r}")
            expected.add((code, tok.start[0]))
    if clean and expected:
        raise LabelError(f"{where}: labelled both clean and with findings")
    if not clean and not expected:
        raise LabelError(f"{where}: no `# expect:` label")
    return Labels(clean=clean, expected=frozenset(expected))


def read_label_file(path: Path) -> Labels:
    return read_labels(path.read_text(encoding="utf-8"), str(path))


def blind(text: str) -> str:
    """`text` with every comment and the content of every docstring-like string statement
    blanked to spaces, newlines kept: what plugin code sees of a corpus case. Lines and
    columns do not move, so findings still point where they would in the original, but no
    `# expect:` label, comment or prose description of the defect reaches a rule. Text that
    does not tokenize has its comments removed line by line (its parse error is then the
    same as the original's)."""
    lines = io.StringIO(text).readlines()  # split at "\n" only, as tokenize does
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return "".join(re.sub(r"#[^\r\n]*", lambda m: " " * len(m.group(0)), line)
                       for line in lines)
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
    return "".join("".join(row) for row in out)
