"""Semantics-preserving variants of a schedule, to test that a claimed catch generalises.

A rule that recognises a file (its hash, its name, its identifiers) rather than the defect
fires on the original and on none of its variants. The variants rename every name the
schedule binds (the function, its locals, loop variables) consistently, token by token, so
lines and columns stay comparable with the labels of the original."""

from __future__ import annotations

import ast
import io
import keyword
import tokenize

SCHEMES = ("{}_v", "w{}")  # two unrelated spellings per bound name


def _bound_names(text: str) -> set[str]:
    """Names the schedule binds: functions, assignment and loop targets (tuples included)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return set()
    names: set[str] = set()

    def targets(node: ast.AST) -> None:
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Tuple | ast.List):
            for elt in node.elts:
                targets(elt)

    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                targets(t)
        elif isinstance(node, ast.For):
            targets(node.target)
    return {n for n in names if not keyword.iskeyword(n) and n not in ("lm", "cake")}


def renamed(text: str, scheme: str) -> str | None:
    """`text` with every bound name respelled by `scheme`; None when it does not tokenize.
    Attribute names (after `.`) and keyword-argument names (`name=` inside a call) are
    left alone."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return None
    names = _bound_names(text)
    mapping = {n: scheme.format(n) for n in names}
    lines = io.StringIO(text).readlines()
    depth = 0
    edits: list[tuple[int, int, int, str]] = []
    for i, tok in enumerate(tokens):
        if tok.string in "([{" and tok.type == tokenize.OP:
            depth += 1
        elif tok.string in ")]}" and tok.type == tokenize.OP:
            depth -= 1
        if tok.type != tokenize.NAME or tok.string not in mapping:
            continue
        prev = tokens[i - 1] if i > 0 else None
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        if prev is not None and prev.string == ".":
            continue
        if depth > 0 and nxt is not None and nxt.string == "=" and prev is not None and \
                prev.string in ("(", ","):
            continue  # a keyword argument
        (row, col), (_, end) = tok.start, tok.end
        edits.append((row, col, end, mapping[tok.string]))
    for row, col, end, new in sorted(edits, reverse=True):
        line = lines[row - 1]
        lines[row - 1] = line[:col] + new + line[end:]
    return "".join(lines)


def variants(text: str) -> list[str]:
    """The variants of `text` that differ from it (possibly none)."""
    out = []
    for scheme in SCHEMES:
        v = renamed(text, scheme)
        if v is not None and v != text and v not in out:
            out.append(v)
    return out
