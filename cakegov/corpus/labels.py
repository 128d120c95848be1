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
