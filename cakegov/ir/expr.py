"""Integer index expressions: static arithmetic over workload sizes, block indices and loop
variables. Expressions are data; `evaluate` and `bounds` interpret them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

# Values outside this range are rejected by the front end: absurd bounds are input errors.
INT_LIMIT = 2**40
COUNTER_LIMIT = 2**31 - 1  # a counter is an `int` of the emitted kernel


class _Expr(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")


class Const(_Expr):
    kind: Literal["const"] = "const"
    value: int


class Size(_Expr):
    """A workload size symbol such as `M` (written `lm.M`)."""

    kind: Literal["size"] = "size"
    name: str


class Block(_Expr):
    """The CTA index along one grid axis (written `lm.block(axis)`)."""

    kind: Literal["block"] = "block"
    axis: int


class Var(_Expr):
    """A loop variable bound by `for v in lm.range(...)`."""

    kind: Literal["var"] = "var"
    name: str


BinaryOp = Literal["+", "-", "*", "//", "%", "cdiv", "min", "max"]
CompareOp = Literal["==", "!=", "<", "<=", ">", ">="]


class Counter(_Expr):
    """A running iteration counter (declared `c = lm.counter()`, advanced by the loops
    written `lm.range(..., counter=c)`): the number of iterations of those loops the
    executing role has finished. Every role has its own copy, starting at 0."""

    kind: Literal["counter"] = "counter"
    name: str


class BinOp(_Expr):
    kind: Literal["bin"] = "bin"
    op: BinaryOp
    lhs: Expr
    rhs: Expr


class Compare(_Expr):
    """A condition; evaluates to 0 or 1."""

    kind: Literal["cmp"] = "cmp"
    op: CompareOp
    lhs: Expr
    rhs: Expr


class StageOf(_Expr):
    """The ring stage that pipeline iteration `iter` uses (written `ring.stage(k)`)."""

    kind: Literal["stage"] = "stage"
    pipeline: str
    iter: Expr


Expr = Annotated[
    Const | Size | Block | Var | Counter | BinOp | Compare | StageOf,
    Field(discriminator="kind"),
]

for _model in (BinOp, Compare, StageOf):
    _model.model_rebuild()


class EvalError(Exception):
    """An expression could not be evaluated in the given environment."""


@dataclass(frozen=True)
class Env:
    """Concrete values for the free symbols of an expression."""

    sizes: Mapping[str, int] = field(default_factory=dict)
    vars: Mapping[str, int] = field(default_factory=dict)
    blocks: Mapping[int, int] = field(default_factory=dict)
    pipeline_stages: Mapping[str, int] = field(default_factory=dict)
    grid: Mapping[int, int] = field(default_factory=dict)  # extents, for `bounds` of blocks


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def apply_op(op: str, a: int, b: int) -> int:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op in ("//", "%", "cdiv") and b == 0:
        raise EvalError("division by zero")
    if op == "//":
        return a // b
    if op == "%":
        return a % b
    if op == "cdiv":
        return _cdiv(a, b)
    if op == "min":
        return min(a, b)
    if op == "max":
        return max(a, b)
    raise EvalError(f"unknown operator {op}")


def compare_op(op: str, a: int, b: int) -> bool:
    return {
        "==": a == b,
        "!=": a != b,
        "<": a < b,
        "<=": a <= b,
        ">": a > b,
        ">=": a >= b,
    }[op]


def evaluate(expr: Expr, env: Env) -> int:
    """The value of `expr` under `env`; raises EvalError for a free symbol without value."""
    match expr:
        case Const(value=v):
            return v
        case Size(name=n):
            if n not in env.sizes:
                raise EvalError(f"workload size {n} has no value")
            return env.sizes[n]
        case Block(axis=a):
            if a not in env.blocks:
                raise EvalError(f"block index {a} has no value")
            return env.blocks[a]
        case Var(name=n):
            if n not in env.vars:
                raise EvalError(f"loop variable {n} has no value")
            return env.vars[n]
        case Counter(name=n):  # the unroller keeps a role's counters with its loop variables
            if n not in env.vars:
                raise EvalError(f"counter {n} has no value")
            return env.vars[n]
        case BinOp(op=op, lhs=lhs, rhs=rhs):
            return apply_op(op, evaluate(lhs, env), evaluate(rhs, env))
        case Compare(op=op, lhs=lhs, rhs=rhs):
            return int(compare_op(op, evaluate(lhs, env), evaluate(rhs, env)))
        case StageOf(pipeline=p, iter=it):
            if p not in env.pipeline_stages:
                raise EvalError(f"pipeline {p} has no stage count")
            return evaluate(it, env) % env.pipeline_stages[p]
    raise EvalError(f"cannot evaluate {expr!r}")


Interval = tuple[int, int]


def bounds(expr: Expr, ranges: Mapping[str, Interval], env: Env) -> Interval:
    """A closed interval containing every value of `expr` when each loop variable in
    `ranges` takes any value in its interval; other symbols come from `env`."""
    match expr:
        case Var(name=n) if n in ranges:
            return ranges[n]
        case Counter(name=n):
            if n in ranges:
                return ranges[n]
            if n in env.vars:
                return env.vars[n], env.vars[n]
            return 0, COUNTER_LIMIT  # a role runs fewer iterations than a 32-bit counter holds
        case Block(axis=a) if a not in env.blocks and a in env.grid:
            return 0, max(env.grid[a] - 1, 0)
        case BinOp(op=op, lhs=lhs, rhs=rhs):
            lo_a, hi_a = bounds(lhs, ranges, env)
            lo_b, hi_b = bounds(rhs, ranges, env)
            if op in ("+", "-", "*", "min", "max"):
                corners = [apply_op(op, a, b) for a in (lo_a, hi_a) for b in (lo_b, hi_b)]
                return min(corners), max(corners)
            if op in ("//", "cdiv") and lo_b > 0:
                corners = [apply_op(op, a, b) for a in (lo_a, hi_a) for b in (lo_b, hi_b)]
                return min(corners), max(corners)
            if op == "%" and lo_b == hi_b and lo_b > 0:
                if hi_a - lo_a + 1 >= lo_b:
                    return 0, lo_b - 1
                lo, hi = lo_a % lo_b, hi_a % lo_b
                return (lo, hi) if lo <= hi else (0, lo_b - 1)
            raise EvalError(f"cannot bound {op} over a non-constant divisor")
        case Compare():
            return 0, 1
        case StageOf(pipeline=p):
            if p not in env.pipeline_stages:
                raise EvalError(f"pipeline {p} has no stage count")
            return 0, env.pipeline_stages[p] - 1
    value = evaluate(expr, env)
    return value, value


def free_symbols(expr: Expr) -> set[str]:
    """Names of the loop variables, sizes (`size:M`) and blocks (`block:0`) in `expr`."""
    match expr:
        case Var(name=n):
            return {n}
        case Counter(name=n):
            return {f"counter:{n}"}
        case Size(name=n):
            return {f"size:{n}"}
        case Block(axis=a):
            return {f"block:{a}"}
        case BinOp(lhs=lhs, rhs=rhs) | Compare(lhs=lhs, rhs=rhs):
            return free_symbols(lhs) | free_symbols(rhs)
        case StageOf(iter=it):
            return free_symbols(it)
    return set()


def render(expr: Expr) -> str:
    """Source-like spelling of `expr`, for messages."""
    match expr:
        case Const(value=v):
            return str(v)
        case Size(name=n):
            return f"lm.{n}"
        case Block(axis=a):
            return f"lm.block({a})"
        case Var(name=n) | Counter(name=n):
            return n
        case BinOp(op=op, lhs=lhs, rhs=rhs) if op in ("cdiv", "min", "max"):
            return f"lm.{op}({render(lhs)}, {render(rhs)})"
        case BinOp(op=op, lhs=lhs, rhs=rhs) | Compare(op=op, lhs=lhs, rhs=rhs):
            return f"({render(lhs)} {op} {render(rhs)})"
        case StageOf(pipeline=p, iter=it):
            return f"{p}.stage({render(it)})"
    return repr(expr)


def step_expr(step: int | Expr) -> Expr:
    """A loop's step as an expression (a static step is an `int` in the IR)."""
    return Const(value=step) if isinstance(step, int) else step


def compile_expr(expr: Expr):
    """`expr` as a Python function of (sizes, vars, blocks) with `evaluate`'s semantics
    (Python's floor division and modulo; an unbound symbol or a zero divisor raises
    EvalError), for loops that evaluate one expression many times. `ring.stage` must be
    resolved first (the lowered kernel has none)."""
    names: dict[str, object] = {"_min": min, "_max": max, "_cdiv": _cdiv}

    def spell(e: Expr) -> str:
        match e:
            case Const(value=v):
                return repr(v)
            case Size(name=n):
                return f"S[{n!r}]"
            case Block(axis=a):
                return f"B[{a}]"
            case Var(name=n) | Counter(name=n):
                return f"V[{n!r}]"
            case BinOp(op=op, lhs=lhs, rhs=rhs) if op in ("min", "max", "cdiv"):
                return f"_{op}({spell(lhs)}, {spell(rhs)})"
            case BinOp(op=op, lhs=lhs, rhs=rhs):
                return f"({spell(lhs)} {op} {spell(rhs)})"
            case Compare(op=op, lhs=lhs, rhs=rhs):
                return f"int({spell(lhs)} {op} {spell(rhs)})"
        raise EvalError(f"cannot compile {e!r}")

    code = compile(f"lambda S, V, B: {spell(expr)}", "<expr>", "eval")
    # the text holds only integer literals, repr()-quoted names and the operators above
    fn = eval(code, names)

    def run(sizes: Mapping[str, int], vars_: Mapping[str, int],
            blocks: Mapping[int, int]) -> int:
        try:
            return fn(sizes, vars_, blocks)
        except ZeroDivisionError:
            raise EvalError("division by zero") from None
        except KeyError:
            return evaluate(expr, Env(sizes=sizes, vars=vars_, blocks=blocks))  # names it

    return run
