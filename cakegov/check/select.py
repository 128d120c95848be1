"""`--select`: which rules a user asked for, by code or name, and what matched nothing.

A selection that names no rule must fail loudly: a check that runs no rule is not clean."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

LOOKALIKE = str.maketrans("OIL", "011")  # letters typed for digits in a rule code


@dataclass(frozen=True)
class Unknown:
    """One selector that no rule has, with the closest codes and names."""

    selector: str
    suggestions: tuple[str, ...]

    def describe(self) -> str:
        hint = f"; did you mean {', '.join(self.suggestions)}?" if self.suggestions else ""
        return f"--select {self.selector!r}: no rule has this code or name{hint}"


def split_selectors(values: Iterable[str]) -> list[str]:
    """Each repeated `--select` value split at commas, blanks dropped, order kept."""
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def resolve(values: Iterable[str], rules: Sequence[tuple[str, str]]
            ) -> tuple[frozenset[str], list[Unknown]]:
    """The codes of the rules `values` select, and the selectors that match no rule.

    `rules` holds each rule's (code, name). A code matches case-insensitively (`p003` is
    P003); a name matches exactly, as `cakegov rules explain` takes it."""
    by_key: dict[str, str] = {}
    for code, name in rules:
        by_key[code.upper()] = code
        by_key[name] = code
    codes: set[str] = set()
    unknown: list[Unknown] = []
    for selector in split_selectors(values):
        code = by_key.get(selector) or by_key.get(selector.upper())
        if code is not None:
            codes.add(code)
            continue
        candidates = [c for c, _ in rules] + [n for _, n in rules]
        close = difflib.get_close_matches(selector, candidates, n=3, cutoff=0.5)
        if not close:
            close = difflib.get_close_matches(selector.upper(), candidates, n=3, cutoff=0.5)
        # a code typed with a look-alike letter (O for 0, I or l for 1) comes first
        folded = selector.upper().translate(LOOKALIKE)
        exact = [c for c in candidates if c.upper() == folded]
        close = [*exact, *(c for c in close if c not in exact)][:3]
        unknown.append(Unknown(selector, tuple(close)))
    return frozenset(codes), unknown
