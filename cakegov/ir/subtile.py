"""Fragment sub-tiles (`acc[:, j * 32:(j + 1) * 32]`, docs/language.md "Slices of a
fragment"): the arithmetic the front end needs to accept a slice, its extent as a
constant difference of two index expressions."""

from __future__ import annotations

from cakegov.ir.expr import BinOp, Const, Expr


def slice_text(lower: Expr, size: int) -> str:
    """A slice for messages: `16:48`, or `..:.. + 32` when its origin moves."""
    if isinstance(lower, Const):
        return f"{lower.value}:{lower.value + size}"
    return f"..:.. + {size}"


def _affine(expr: Expr) -> dict[str, int] | None:
    """`expr` as integer coefficients of its linear terms (key "" for the constant), or
    None when it is not affine in its free symbols."""
    if isinstance(expr, Const):
        return {"": expr.value}
    if isinstance(expr, BinOp) and expr.op in ("+", "-"):
        a, b = _affine(expr.lhs), _affine(expr.rhs)
        if a is None or b is None:
            return None
        sign = 1 if expr.op == "+" else -1
        out = dict(a)
        for k, v in b.items():
            out[k] = out.get(k, 0) + sign * v
        return out
    if isinstance(expr, BinOp) and expr.op == "*":
        a, b = _affine(expr.lhs), _affine(expr.rhs)
        if a is None or b is None:
            return None
        for const, other in ((a, b), (b, a)):
            if set(const) <= {""}:
                factor = const.get("", 0)
                return {k: v * factor for k, v in other.items()}
        return None
    return {expr.model_dump_json(): 1}  # an opaque term (a symbol or a non-linear part)


def static_difference(upper: Expr, lower: Expr) -> int | None:
    """`upper - lower` when it is the same constant for every value of the symbols
    (`(j + 1) * 32 - j * 32` is 32), else None."""
    a, b = _affine(upper), _affine(lower)
    if a is None or b is None:
        return None
    diff = {k: a.get(k, 0) - b.get(k, 0) for k in set(a) | set(b)}
    if any(v for k, v in diff.items() if k):
        return None
    return diff.get("", 0)
