"""Index expressions (`cakegov.ir.expr`) spelled as C++ for the emitted kernel.

Only spelling happens here: the value of every expression was derived by the lowering.
Python's floor division and modulo are kept exact through runtime helpers
(`cg::floordiv`, `cg::floormod`, `cg::cdiv`); sizes are the kernel's `int` parameters,
loop variables are prefixed `v_` so that they never collide with a parameter."""

from __future__ import annotations

from cakegov.ir.expr import BinOp, Block, Compare, Const, Counter, Expr, Size, StageOf, Var
from cakegov.lower.spellings import GRID_AXES

INT32_MAX = 2**31 - 1

_FUNCS = {"//": "cg::floordiv", "%": "cg::floormod", "cdiv": "cg::cdiv", "min": "cg::imin",
          "max": "cg::imax"}


class ExprSpellingError(Exception):
    """An expression the emitter cannot spell (a construct the lowering should resolve)."""


def loop_var(name: str) -> str:
    return f"v_{name}"


def counter_var(name: str) -> str:
    """A running counter (cakegov/ir/persistent.py): an `int` of each role that uses it."""
    return f"n_{name}"


def cexpr(expr: Expr) -> str:
    """The C++ spelling of `expr` (an `int` or `long long` expression)."""
    match expr:
        case Const(value=v):
            if -INT32_MAX <= v <= INT32_MAX:
                return str(v) if v >= 0 else f"({v})"
            return f"{v}LL" if v >= 0 else f"({v}LL)"
        case Size(name=n):
            return n
        case Block(axis=a):
            return f"(int)blockIdx.{GRID_AXES[a]}"
        case Var(name=n):
            return loop_var(n)
        case Counter(name=n):
            return counter_var(n)
        case BinOp(op=op, lhs=lhs, rhs=rhs) if op in _FUNCS:
            return f"{_FUNCS[op]}({cexpr(lhs)}, {cexpr(rhs)})"
        case BinOp(op=op, lhs=lhs, rhs=rhs):
            return f"({cexpr(lhs)} {op} {cexpr(rhs)})"
        case Compare(op=op, lhs=lhs, rhs=rhs):
            return f"(int)({cexpr(lhs)} {op} {cexpr(rhs)})"
        case StageOf():
            raise ExprSpellingError("ring.stage(...) must be resolved by the lowering")
    raise ExprSpellingError(f"cannot spell {expr!r}")
