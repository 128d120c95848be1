"""Front end: `.cake` source -> typed `Schedule`.

The source is parsed with `ast` and walked; nothing is imported or executed. Only the
vocabulary documented in docs/language.md is accepted: anything else is an `InputError`
with a location. Names that do not resolve are recorded as `Unresolved` nodes (the
`unknown-name` rule reports them with suggestions) and the statement that used them is
dropped, so one typo does not cascade into unrelated findings."""

from __future__ import annotations

import ast
import difflib
import re
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from cakegov.ir import errors
from cakegov.ir.cluster import axis_rank, linear_rank
from cakegov.ir.dtypes import DTYPE_BYTES
from cakegov.ir.errors import InputError
from cakegov.ir.expr import (
    INT_LIMIT,
    BinOp,
    Block,
    Compare,
    Const,
    Counter,
    Expr,
    Size,
    StageOf,
    Var,
    apply_op,
    compare_op,
    free_symbols,
)
from cakegov.ir.nodes import (
    SWIZZLE_BYTES,
    BarrierRef,
    BoolValue,
    Call,
    CoordValue,
    Decl,
    ExprValue,
    FloatValue,
    For,
    FragmentDecl,
    FragmentRef,
    Launch,
    MBarrierDecl,
    NamedBarrierDecl,
    NamedBarrierRef,
    PipelineDecl,
    PipelineRef,
    RoleDecl,
    Schedule,
    SmemDecl,
    SmemRef,
    Span,
    Stmt,
    StrValue,
    SubTile,
    TensorRef,
    Unresolved,
    Value,
    Warps,
)
from cakegov.ir.persistent import bad_step, counters_in, grid_extent, is_counter
from cakegov.ir.subtile import slice_text, static_difference
from cakegov.plugin import Arg

MAX_SOURCE_BYTES = 1_000_000
MAX_AST_DEPTH = 64
MAX_STATEMENTS = 5_000


@dataclass(frozen=True)
class PrimitiveSig:
    """How a primitive is spelled and what arguments it takes (from its plugin file)."""

    name: str
    spelling: str  # "lm.mma" for a function, "<kind>.<method>" for a method
    args: tuple[Arg, ...]
    receiver: str | None = None


@dataclass(frozen=True)
class TensorSig:
    name: str
    dtype: str
    dims: tuple[str, ...]


@dataclass(frozen=True)
class WorkloadSig:
    """What the front end needs to know of a workload: its size symbols and tensors."""

    name: str
    sizes: tuple[str, ...]
    tensors: tuple[TensorSig, ...]


@dataclass(frozen=True)
class Vocabulary:
    primitives: Mapping[str, PrimitiveSig] = field(default_factory=dict)
    workloads: Mapping[str, WorkloadSig] = field(default_factory=dict)


class _Unresolved(Exception):
    def __init__(self, name: str, what: str, span: Span, candidates: list[str]):
        super().__init__(name)
        self.name = name
        self.what = what
        self.span = span
        self.suggestions = tuple(difflib.get_close_matches(name, sorted(set(candidates)), n=3))


class _Dropped(Exception):
    """A statement refers to a declaration that was itself dropped: already reported."""


# Bindings of names in the schedule function.
@dataclass(frozen=True)
class _Resource:
    kind: str  # smem | fragment | mbarrier | named_barrier | pipeline | role | tensor
    name: str


@dataclass(frozen=True)
class _Poisoned:
    name: str


_Binding = Expr | _Resource | _Poisoned | Var

_RESOURCE_WORDS = {
    "smem": "a shared-memory view",
    "fragment": "a register fragment",
    "mbarrier": "an mbarrier",
    "named_barrier": "a named barrier",
    "pipeline": "a pipeline",
    "role": "a role",
    "tensor": "a global tensor",
}
_DECLARATIONS = ("smem", "fragment", "mbarrier", "named_barrier", "pipeline", "role",
                 "counter")
_EXPR_FUNCS = ("cdiv", "min", "max", "block", "nbytes", "cluster_rank", "grid")

_FORBIDDEN_STMT = {
    ast.Import: "imports are not part of the schedule language",
    ast.ImportFrom: "imports are not part of the schedule language",
    ast.While: "while loops are not allowed: use `for v in lm.range(start, stop)` with "
    "static bounds",
    ast.If: "conditionals are not part of the schedule language: peel the iteration into "
    "its own loop, or pass a condition such as `init=(k == 0)`",
    ast.FunctionDef: "nested functions are not allowed",
    ast.AsyncFunctionDef: "async functions are not allowed",
    ast.ClassDef: "classes are not allowed",
    ast.Try: "try blocks are not allowed",
    ast.Return: "return is not allowed: a schedule body ends at its last statement",
    ast.Delete: "del is not allowed",
    ast.Global: "global is not allowed",
    ast.Nonlocal: "nonlocal is not allowed",
    ast.AugAssign: "augmented assignment is not allowed: names are bound once",
    ast.AnnAssign: "annotated assignment is not allowed",
    ast.Raise: "raise is not allowed",
    ast.Assert: "assert is not allowed",
}


def _describe(node: ast.AST) -> str:
    kinds = {
        ast.Lambda: "lambda expressions are not allowed",
        ast.ListComp: "comprehensions are not allowed",
        ast.SetComp: "comprehensions are not allowed",
        ast.DictComp: "comprehensions are not allowed",
        ast.GeneratorExp: "generator expressions are not allowed",
        ast.Await: "await is not allowed",
        ast.Yield: "yield is not allowed",
        ast.YieldFrom: "yield is not allowed",
        ast.NamedExpr: "assignment expressions are not allowed",
        ast.IfExp: "conditional expressions are not allowed",
        ast.JoinedStr: "f-strings are not allowed",
        ast.Starred: "starred arguments are not allowed",
    }
    for kind, text in kinds.items():
        if isinstance(node, kind):
            return text
    return f"`{type(node).__name__}` is not part of the schedule language"


_NEWLINE = re.compile(r"\r\n|\r|\n")


def source_lines(text: str) -> list[str]:
    """Lines as Python's tokenizer counts them (`\n`, `\r\n`, `\r`), unlike
    `str.splitlines`, which also splits at form feeds and Unicode line separators."""
    lines = _NEWLINE.split(text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _short(value: object, limit: int = 40) -> str:
    """`repr` of a literal, cut so that a huge literal does not become a huge message."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 5]}...{text[-1]}"


class _LineIndex:
    """Converts ast byte offsets into 1-based character columns."""

    def __init__(self, text: str):
        self.lines = source_lines(text)

    def col(self, line: int, byte_offset: int) -> int:
        if 1 <= line <= len(self.lines):
            raw = self.lines[line - 1].encode("utf-8")[:byte_offset]
            return len(raw.decode("utf-8", errors="replace")) + 1
        return byte_offset + 1

    def span(self, node: ast.AST) -> Span:
        line = getattr(node, "lineno", 1) or 1
        end_line = getattr(node, "end_lineno", None) or line
        col = self.col(line, getattr(node, "col_offset", 0) or 0)
        end_col = self.col(end_line, getattr(node, "end_col_offset", 0) or 0)
        return Span(line=line, col=col, end_line=end_line, end_col=max(end_col, 1))


# Python operators an index expression does not take: how they are written, and what to
# write instead (the language's integer operators are +, -, *, //, %).
_OTHER_OPERATORS = {
    ast.Div: ("/", ": use // for integer division"),
    ast.Pow: ("**", ": write the power out as a product or a constant"),
    ast.BitAnd: ("&", ": `x & 1` is `x % 2`, and `x & (2**n - 1)` is `x % 2**n`"),
    ast.BitOr: ("|", ""),
    ast.BitXor: ("^", ""),
    ast.LShift: ("<<", ": `x << n` is `x * 2**n`"),
    ast.RShift: (">>", ": `x >> n` is `x // 2**n`"),
    ast.MatMult: ("@", ""),
}


def decode_source(data: bytes) -> str:
    """UTF-8 text of a schedule file, or an InputError at the first undecodable byte. A
    leading byte-order mark (U+FEFF, which some editors write) is dropped, as Python
    drops it from a source file."""
    if len(data) > MAX_SOURCE_BYTES:
        raise InputError(
            errors.LIMIT,
            f"file is larger than {MAX_SOURCE_BYTES:,} bytes, the limit for a schedule",
            Span(line=1, col=1, end_line=1, end_col=2),
        )
    try:
        text = data.decode("utf-8")
        return text[1:] if text.startswith("\ufeff") else text
    except UnicodeDecodeError as exc:
        before = data[: exc.start].decode("utf-8")  # valid up to the bad byte
        lines = _NEWLINE.split(before)
        line, col = len(lines), len(lines[-1]) + 1
        raise InputError(
            errors.ENCODING,
            f"invalid UTF-8 byte 0x{data[exc.start]:02x} at line {line}, column {col}: "
            "schedules are UTF-8 text",
            Span(line=line, col=col, end_line=line, end_col=col + 1),
        ) from None


def _check_depth(tree: ast.AST, index: _LineIndex) -> None:
    stack: list[tuple[ast.AST, int]] = [(tree, 0)]
    count = 0
    while stack:
        node, depth = stack.pop()
        count += 1
        if depth > MAX_AST_DEPTH:
            raise InputError(
                errors.LIMIT,
                f"nesting deeper than {MAX_AST_DEPTH} levels",
                index.span(node),
            )
        if count > 200_000:
            raise InputError(errors.LIMIT, "schedule has too many syntax nodes", index.span(node))
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))


def parse_source(text: str, vocab: Vocabulary) -> Schedule:
    """Parse schedule text into a Schedule; raises InputError on malformed input."""
    index = _LineIndex(text)
    if len(text.encode("utf-8")) > MAX_SOURCE_BYTES:
        raise InputError(
            errors.LIMIT,
            f"file is larger than {MAX_SOURCE_BYTES:,} bytes",
            Span(line=1, col=1, end_line=1, end_col=2),
        )
    if "\x00" in text:
        lines = _NEWLINE.split(text[: text.index("\x00")])
        line, col = len(lines), len(lines[-1]) + 1
        raise InputError(
            errors.ENCODING, "NUL byte in source",
            Span(line=line, col=col, end_line=line, end_col=col + 1),
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarnings are not ours to print
            tree = ast.parse(text, mode="exec")
    except SyntaxError as exc:
        # Clamp into the file: at end of input Python may point one line or column past it.
        line = min(max(exc.lineno or 1, 1), max(len(index.lines), 1))
        width = len(index.lines[line - 1]) if index.lines else 0
        col = min(max(exc.offset or 1, 1), width + 1)
        raise InputError(
            errors.SYNTAX,
            f"syntax error: {exc.msg}",
            Span(line=line, col=col, end_line=line, end_col=col + 1),
        ) from None
    except (RecursionError, MemoryError, ValueError, OverflowError):
        raise InputError(
            errors.LIMIT,
            "source too deeply nested or too large to parse",
            Span(line=1, col=1, end_line=1, end_col=2),
        ) from None
    _check_depth(tree, index)
    return _Parser(index, vocab).module(tree)


def parse_bytes(data: bytes, vocab: Vocabulary) -> Schedule:
    return parse_source(decode_source(data), vocab)


class _Parser:
    def __init__(self, index: _LineIndex, vocab: Vocabulary):
        self.index = index
        self.vocab = vocab
        self.scopes: list[dict[str, _Binding]] = [{}]
        self.resources: list[Decl] = []
        self.roles: dict[str, RoleDecl] = {}
        self.role_order: list[str] = []
        self.role_bodies: set[str] = set()
        self.unresolved: list[Unresolved] = []
        self.workload: WorkloadSig | None = None
        self.fixed_sizes: dict[str, int] = {}
        self.launch: Launch | None = None
        self.statements = 0
        self.role_warps = 0  # warps of the role whose body is being parsed
        self.in_subset = False  # inside `with lm.warps(...)`
        self.counting: list[str] = []  # counters advanced by the enclosing loops

    # ---- helpers ---------------------------------------------------------------------

    def span(self, node: ast.AST) -> Span:
        return self.index.span(node)

    def fail(self, code: str, message: str, node: ast.AST, hint: str | None = None):
        raise InputError(code, message, self.span(node), hint)

    def lookup(self, name: str) -> _Binding | None:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def visible_names(self) -> list[str]:
        names: list[str] = []
        for scope in self.scopes:
            names.extend(k for k, v in scope.items() if not isinstance(v, _Poisoned))
        return names

    def bind(self, name: str, value: _Binding, node: ast.AST) -> None:
        if name in ("lm", "cake", "range"):
            self.fail(errors.STRUCTURE, f"`{name}` is reserved and cannot be rebound", node)
        if self.lookup(name) is not None:
            self.fail(
                errors.STRUCTURE,
                f"`{name}` is already bound: names in a schedule are bound once",
                node,
            )
        self.scopes[-1][name] = value

    def record_unresolved(self, exc: _Unresolved) -> None:
        self.unresolved.append(
            Unresolved(
                path=f"unresolved[{len(self.unresolved)}]",
                span=exc.span,
                name=exc.name,
                what=exc.what,
                suggestions=exc.suggestions,
            )
        )

    def count_statement(self, node: ast.AST) -> None:
        self.statements += 1
        if self.statements > MAX_STATEMENTS:
            self.fail(errors.LIMIT, f"more than {MAX_STATEMENTS} statements", node)

    # ---- module and decorator --------------------------------------------------------

    def module(self, tree: ast.Module) -> Schedule:
        doc = ""
        func: ast.FunctionDef | None = None
        for i, stmt in enumerate(tree.body):
            if (
                i == 0
                and isinstance(stmt, ast.Expr)
                and isinstance(stmt.value, ast.Constant)
                and isinstance(stmt.value.value, str)
            ):
                doc = stmt.value.value.strip()
                continue
            if isinstance(stmt, ast.FunctionDef):
                if func is not None:
                    self.fail(errors.STRUCTURE, "a file holds exactly one schedule", stmt)
                func = stmt
                continue
            self.forbid_stmt(stmt, top_level=True)
        if func is None:
            raise InputError(
                errors.STRUCTURE,
                "no schedule: expected `@cake.schedule(...)` on a `def`",
                Span(line=1, col=1, end_line=1, end_col=2),
            )
        return self.function(func, doc)

    def forbid_stmt(self, stmt: ast.stmt, top_level: bool = False) -> None:
        for kind, text in _FORBIDDEN_STMT.items():
            if isinstance(stmt, kind):
                self.fail(errors.FORBIDDEN, text, stmt)
        if top_level:
            self.fail(
                errors.STRUCTURE,
                "only a docstring and one `@cake.schedule` function may appear at top level",
                stmt,
            )
        self.fail(errors.FORBIDDEN, _describe(stmt), stmt)

    def decorator(self, func: ast.FunctionDef) -> dict[str, ast.expr]:
        def is_schedule(deco: ast.expr) -> bool:
            return (
                isinstance(deco, ast.Call)
                and isinstance(deco.func, ast.Attribute)
                and isinstance(deco.func.value, ast.Name)
                and deco.func.value.id == "cake"
                and deco.func.attr == "schedule"
            )

        for deco in func.decorator_list:
            if not is_schedule(deco):
                self.fail(errors.STRUCTURE, "expected `@cake.schedule(target=..., "
                          "workload=...)`", deco)
        if len(func.decorator_list) != 1:
            extra = func.decorator_list[1:2] or [func]  # point at the surplus decorator
            self.fail(errors.STRUCTURE, "expected exactly one `@cake.schedule(...)`", extra[0])
        deco = func.decorator_list[0]
        assert isinstance(deco, ast.Call)
        if deco.args:
            self.fail(errors.ARG_TYPE, "`@cake.schedule` takes keyword arguments only", deco)
        kw = self.keywords(deco, ("target", "workload", "sizes", "divisible"))
        for required in ("target", "workload"):
            if required not in kw:
                self.fail(errors.ARG_TYPE, f"`@cake.schedule` needs `{required}=`", deco)
        return kw

    def keywords(self, call: ast.Call, allowed: tuple[str, ...]) -> dict[str, ast.expr]:
        out: dict[str, ast.expr] = {}
        for kw in call.keywords:
            if kw.arg is None:
                self.fail(errors.FORBIDDEN, "`**` arguments are not allowed", kw.value)
            if kw.arg not in allowed:
                close = difflib.get_close_matches(kw.arg, allowed, n=1)
                hint = f"did you mean `{close[0]}`?" if close else None
                msg = f"unexpected argument `{kw.arg}`; expected one of: {', '.join(allowed)}"
                if hint:
                    msg += f" ({hint})"
                raise InputError(errors.ARG_TYPE, msg, self.span(kw), hint)
            out[kw.arg] = kw.value
        return out

    def string(self, node: ast.expr, what: str) -> str:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        self.fail(errors.ARG_TYPE, f"{what} must be a string literal", node)
        raise AssertionError  # unreachable

    def size_dict(self, node: ast.expr, what: str) -> dict[str, int]:
        if not isinstance(node, ast.Dict):
            self.fail(errors.ARG_TYPE, f"{what} must be a dict of size name to integer", node)
        out: dict[str, int] = {}
        for key, value in zip(node.keys, node.values, strict=True):
            if key is None:
                self.fail(errors.FORBIDDEN, "`**` in a dict is not allowed", value)
            name = self.string(key, f"a key of {what}")
            if self.workload is not None and name not in self.workload.sizes:
                raise _Unresolved(name, "size", self.span(key), list(self.workload.sizes))
            out[name] = self.static_int(value, f"{what}[{name!r}]", positive=True)
        return out

    def function(self, func: ast.FunctionDef, doc: str) -> Schedule:
        kw = self.decorator(func)
        target = self.string(kw["target"], "`target`")
        workload_name = self.string(kw["workload"], "`workload`")
        self.workload = self.vocab.workloads.get(workload_name)
        if self.workload is None:
            self.record_unresolved(
                _Unresolved(
                    workload_name, "workload", self.span(kw["workload"]),
                    list(self.vocab.workloads),
                )
            )
        sizes: dict[str, int] = {}
        divisible: dict[str, int] = {}
        try:
            if "sizes" in kw:
                sizes = self.size_dict(kw["sizes"], "`sizes`")
            if "divisible" in kw:
                divisible = self.size_dict(kw["divisible"], "`divisible`")
        except _Unresolved as exc:
            self.record_unresolved(exc)
        self.fixed_sizes = sizes
        args = func.args
        if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs or args.defaults:
            self.fail(errors.STRUCTURE, "schedule parameters are `lm` then plain tensor names",
                      func)
        names = [a.arg for a in args.args]
        if not names or names[0] != "lm":
            self.fail(errors.STRUCTURE, "the first parameter of a schedule must be `lm`", func)
        params: list[str] = []
        tensor_names = [t.name for t in self.workload.tensors] if self.workload else []
        for arg in args.args[1:]:
            if self.workload is not None and arg.arg not in tensor_names:
                self.record_unresolved(
                    _Unresolved(arg.arg, "tensor", self.span(arg), tensor_names)
                )
                self.scopes[0][arg.arg] = _Poisoned(arg.arg)
                continue
            self.bind(arg.arg, _Resource("tensor", arg.arg), arg)
            params.append(arg.arg)
        body = list(func.body)
        first = body[0] if body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and \
                isinstance(first.value.value, str):
            doc = doc or first.value.value.strip()
            body = body[1:]
        for stmt in body:
            self.count_statement(stmt)
            try:
                self.top_statement(stmt)
            except _Unresolved as exc:  # e.g. `lm.launch(..., warps=W)` with W unbound
                self.record_unresolved(exc)
            except _Dropped:
                pass
        roles = tuple(self.roles[name] for name in self.role_order)
        return Schedule(
            path="schedule",
            span=self.span(func),
            name=func.name,
            doc=doc,
            target=target,
            target_span=self.span(kw["target"]),
            workload=workload_name,
            workload_span=self.span(kw["workload"]),
            params=tuple(params),
            sizes=sizes,
            divisible=divisible,
            launch=self.launch,
            resources=tuple(self.resources),
            roles=roles,
            unresolved=tuple(self.unresolved),
        )

    # ---- top-level statements --------------------------------------------------------

    def top_statement(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.Pass):
            return
        if isinstance(stmt, ast.Assign):
            self.top_assign(stmt)
            return
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            call = stmt.value
            if self.is_lm_call(call, "launch"):
                self.parse_launch(call, stmt)
                return
            self.fail(
                errors.STRUCTURE,
                "primitive calls belong inside a `with <role>:` body",
                stmt,
            )
        if isinstance(stmt, ast.With):
            self.role_body(stmt)
            return
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            return  # a stray string is a comment
        self.forbid_stmt(stmt)

    @staticmethod
    def is_lm_call(node: ast.expr, name: str | None = None) -> bool:
        return (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "lm"
            and (name is None or node.func.attr == name)
        )

    def top_assign(self, stmt: ast.Assign) -> None:
        if len(stmt.targets) != 1:
            self.fail(errors.STRUCTURE, "chained assignment is not allowed", stmt)
        target = stmt.targets[0]
        value = stmt.value
        if self.is_lm_call(value) and value.func.attr in _DECLARATIONS:  # type: ignore[union-attr]
            if not isinstance(target, ast.Name):
                self.fail(errors.STRUCTURE, "a declaration binds exactly one name", target)
            self.declaration(target.id, value, stmt)  # type: ignore[arg-type]
            return
        self.let(stmt)

    def let(self, stmt: ast.Assign) -> None:
        target = stmt.targets[0]
        pairs: list[tuple[ast.expr, ast.expr]]
        if isinstance(target, ast.Name):
            pairs = [(target, stmt.value)]
        elif isinstance(target, ast.Tuple) and isinstance(stmt.value, ast.Tuple):
            if len(target.elts) != len(stmt.value.elts):
                self.fail(errors.STRUCTURE, "tuple assignment needs as many values as names",
                          stmt)
            pairs = list(zip(target.elts, stmt.value.elts, strict=True))
        else:
            self.fail(errors.STRUCTURE, "assign index expressions to names: `a, b = x, y`",
                      stmt)
            return
        for name_node, value_node in pairs:
            if not isinstance(name_node, ast.Name):
                self.fail(errors.STRUCTURE, "only plain names can be assigned", name_node)
            name = name_node.id  # type: ignore[union-attr]
            try:
                value = self.expr(value_node)
            except _Unresolved as exc:
                self.record_unresolved(exc)
                self.bind(name, _Poisoned(name), name_node)
                continue
            except _Dropped:
                self.bind(name, _Poisoned(name), name_node)
                continue
            self.bind(name, value, name_node)

    def parse_launch(self, call: ast.Call, stmt: ast.stmt) -> None:
        if self.launch is not None:
            self.fail(errors.STRUCTURE, "`lm.launch` may appear only once", stmt)
        if call.args:
            self.fail(errors.ARG_TYPE, "`lm.launch` takes keyword arguments", call)
        kw = self.keywords(call, ("grid", "warps", "cluster", "cluster_nonportable"))
        if "grid" not in kw or "warps" not in kw:
            self.fail(errors.ARG_TYPE, "`lm.launch` needs `grid=` and `warps=`", call)
        grid_node = kw["grid"]
        items = grid_node.elts if isinstance(grid_node, ast.Tuple) else [grid_node]
        if not 1 <= len(items) <= 3:
            self.fail(errors.ARG_TYPE, "`grid` has 1 to 3 dimensions", grid_node)
        try:
            grid = tuple(self.expr(item) for item in items)
        except (_Unresolved, _Dropped) as exc:
            if isinstance(exc, _Unresolved):
                self.record_unresolved(exc)
            return
        for item, expr in zip(items, grid, strict=True):
            bad = {s for s in free_symbols(expr) if not s.startswith("size:")}
            if bad:
                self.fail(errors.ARG_TYPE, "grid extents may use only workload sizes", item)
        warps = self.static_int(kw["warps"], "`warps`", positive=True)
        cluster: tuple[int, ...] = (1, 1, 1)
        if "cluster" in kw:
            node = kw["cluster"]
            elts = node.elts if isinstance(node, ast.Tuple) else [node]
            cluster = tuple(self.static_int(e, "`cluster`", positive=True) for e in elts)
            if not 1 <= len(cluster) <= 3:
                self.fail(errors.ARG_TYPE, "`cluster` has 1 to 3 dimensions", node)
        nonportable = False
        if "cluster_nonportable" in kw:
            node = kw["cluster_nonportable"]
            if not (isinstance(node, ast.Constant) and isinstance(node.value, bool)):
                self.fail(errors.ARG_TYPE, "`cluster_nonportable` must be True or False", node)
            nonportable = bool(node.value)  # type: ignore[attr-defined]
        self.launch = Launch(path="launch", span=self.span(stmt), grid=grid, warps=warps,
                             cluster=cluster, cluster_nonportable=nonportable)

    # ---- declarations ----------------------------------------------------------------

    def declaration(self, name: str, call: ast.Call, stmt: ast.stmt) -> None:
        kind = call.func.attr  # type: ignore[union-attr]
        if kind == "counter":  # cakegov/ir/persistent.py: an index expression, no resource
            if call.args or call.keywords:
                self.fail(errors.ARG_TYPE, "`lm.counter()` takes no argument", call)
            self.bind(name, Counter(name=name), stmt)
            return
        try:
            if kind == "role":
                self.declare_role(name, call, stmt)
                return
            decl = getattr(self, f"declare_{kind}")(name, call, stmt)
        except _Unresolved as exc:
            self.record_unresolved(exc)
            self.bind(name, _Poisoned(name), stmt)
            return
        except _Dropped:
            self.bind(name, _Poisoned(name), stmt)
            return
        self.resources.append(decl)
        self.bind(name, _Resource(kind, name), stmt)

    def call_args(
        self, call: ast.Call, positional: tuple[str, ...], allowed: tuple[str, ...], what: str
    ) -> dict[str, ast.expr]:
        if len(call.args) > len(positional):
            self.fail(errors.ARG_TYPE, f"{what} takes at most {len(positional)} positional "
                      "arguments", call.args[len(positional)])
        out = dict(zip(positional, call.args, strict=False))
        for key, node in self.keywords(call, allowed).items():
            if key in out:
                self.fail(errors.ARG_TYPE, f"argument `{key}` given twice", node)
            out[key] = node
        return out

    def dtype(self, node: ast.expr) -> str:
        value = self.string(node, "a dtype")
        if value not in DTYPE_BYTES:
            close = difflib.get_close_matches(value, list(DTYPE_BYTES), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            self.fail(errors.ARG_TYPE, f"unknown dtype {_short(value)}{hint}; known: "
                      f"{', '.join(DTYPE_BYTES)}", node)
        return value

    def shape(self, node: ast.expr) -> tuple[int, ...]:
        elts = node.elts if isinstance(node, ast.Tuple) else [node]
        if not 1 <= len(elts) <= 5:
            self.fail(errors.ARG_TYPE, "a shape has 1 to 5 dimensions", node)
        return tuple(self.static_int(e, "a shape extent", positive=True) for e in elts)

    def role_name(self, node: ast.expr) -> str:
        if isinstance(node, ast.Name):
            binding = self.lookup(node.id)
            if isinstance(binding, _Resource) and binding.kind == "role":
                return node.id
            if isinstance(binding, _Poisoned):
                raise _Dropped
            if binding is None:
                raise _Unresolved(node.id, "role", self.span(node), self.names_of("role"))
        self.fail(errors.ARG_TYPE, "expected a role name", node)
        raise AssertionError

    def names_of(self, kind: str) -> list[str]:
        return [
            n for s in self.scopes for n, b in s.items()
            if isinstance(b, _Resource) and b.kind == kind
        ]

    def declare_smem(self, name: str, call: ast.Call, stmt: ast.stmt) -> SmemDecl:
        a = self.call_args(call, ("dtype", "shape"),
                           ("dtype", "shape", "stages", "swizzle", "align", "alias"),
                           "`lm.smem`")
        for req in ("dtype", "shape"):
            if req not in a:
                self.fail(errors.ARG_TYPE, f"`lm.smem` needs `{req}`", call)
        swizzle = "none"
        if "swizzle" in a:
            swizzle = self.string(a["swizzle"], "`swizzle`")
            if swizzle not in SWIZZLE_BYTES:
                self.fail(errors.ARG_TYPE, f"`swizzle` is one of {', '.join(SWIZZLE_BYTES)}",
                          a["swizzle"])
        align = self.static_int(a["align"], "`align`", positive=True) if "align" in a else 16
        if align & (align - 1):
            self.fail(errors.ARG_TYPE, "`align` must be a power of two", a["align"])
        return SmemDecl(
            path=f"resources.{name}", span=self.span(stmt), name=name,
            dtype=self.dtype(a["dtype"]), shape=self.shape(a["shape"]),
            stages=self.static_int(a["stages"], "`stages`", positive=True)
            if "stages" in a else 1,
            swizzle=swizzle, align=align,  # type: ignore[arg-type]
            alias=self.alias_root(a["alias"]) if "alias" in a else None,
        )

    def alias_root(self, node: ast.expr) -> str:
        """The view whose storage `alias=` reuses, followed to the view that owns storage
        (an alias of an alias shares the same bytes)."""
        name = self.resource_ref(node, "smem")
        for decl in self.resources:
            if isinstance(decl, SmemDecl) and decl.name == name and decl.alias:
                return decl.alias
        return name

    def declare_fragment(self, name: str, call: ast.Call, stmt: ast.stmt) -> FragmentDecl:
        a = self.call_args(call, ("dtype", "shape"), ("dtype", "shape", "role"),
                           "`lm.fragment`")
        for req in ("dtype", "shape", "role"):
            if req not in a:
                self.fail(errors.ARG_TYPE, f"`lm.fragment` needs `{req}`", call)
        return FragmentDecl(
            path=f"resources.{name}", span=self.span(stmt), name=name,
            dtype=self.dtype(a["dtype"]), shape=self.shape(a["shape"]),
            role=self.role_name(a["role"]),
        )

    def declare_mbarrier(self, name: str, call: ast.Call, stmt: ast.stmt) -> MBarrierDecl:
        a = self.call_args(call, (), ("count", "stages", "init"), "`lm.mbarrier`")
        if "count" not in a:
            self.fail(errors.ARG_TYPE, "`lm.mbarrier` needs `count=`", call)
        init = self.string(a["init"], "`init`") if "init" in a else "auto"
        if init not in ("auto", "manual"):
            self.fail(errors.ARG_TYPE, '`init` is "auto" or "manual"', a["init"])
        return MBarrierDecl(
            path=f"resources.{name}", span=self.span(stmt), name=name,
            count=self.static_int(a["count"], "`count`"),
            stages=self.static_int(a["stages"], "`stages`", positive=True)
            if "stages" in a else 1,
            init=init,  # type: ignore[arg-type]
        )

    def declare_named_barrier(self, name: str, call: ast.Call, stmt: ast.stmt):
        a = self.call_args(call, (), ("id", "threads"), "`lm.named_barrier`")
        for req in ("id", "threads"):
            if req not in a:
                self.fail(errors.ARG_TYPE, f"`lm.named_barrier` needs `{req}=`", call)
        return NamedBarrierDecl(
            path=f"resources.{name}", span=self.span(stmt), name=name,
            id=self.static_int(a["id"], "`id`"),
            threads=self.static_int(a["threads"], "`threads`"),
        )

    def declare_pipeline(self, name: str, call: ast.Call, stmt: ast.stmt) -> PipelineDecl:
        a = self.call_args(
            call, (),
            ("stages", "buffers", "producer", "consumer", "full_count", "empty_count"),
            "`lm.pipeline`",
        )
        for req in ("stages", "buffers", "producer", "consumer"):
            if req not in a:
                self.fail(errors.ARG_TYPE, f"`lm.pipeline` needs `{req}=`", call)
        buf_node = a["buffers"]
        if not isinstance(buf_node, ast.List | ast.Tuple) or not buf_node.elts:
            self.fail(errors.ARG_TYPE, "`buffers` is a non-empty list of smem views", buf_node)
        buffers: list[str] = []
        for elt in buf_node.elts:  # type: ignore[union-attr]
            ref = self.resource_ref(elt, "smem")
            buffers.append(ref)
        counts = {
            k: self.static_int(a[k], f"`{k}`") for k in ("full_count", "empty_count") if k in a
        }
        return PipelineDecl(
            path=f"resources.{name}", span=self.span(stmt), name=name,
            stages=self.static_int(a["stages"], "`stages`", positive=True),
            buffers=tuple(buffers), producer=self.role_name(a["producer"]),
            consumer=self.role_name(a["consumer"]), **counts,
        )

    def declare_role(self, name: str, call: ast.Call, stmt: ast.stmt) -> None:
        a = self.call_args(call, (), ("warps", "regs"), "`lm.role`")
        if "warps" not in a:
            self.fail(errors.ARG_TYPE, "`lm.role` needs `warps=range(start, stop)`", call)
        node = a["warps"]
        if not (
            isinstance(node, ast.Call)
            and (
                (isinstance(node.func, ast.Name) and node.func.id == "range")
                or self.is_lm_call(node, "range")
            )
            and 1 <= len(node.args) <= 2
            and not node.keywords
        ):
            self.fail(errors.ARG_TYPE, "`warps` must be `range(start, stop)`", node)
        bounds = [self.static_int(x, "a warp index") for x in node.args]  # type: ignore[union-attr]
        start, stop = (0, bounds[0]) if len(bounds) == 1 else (bounds[0], bounds[1])
        regs = self.static_int(a["regs"], "`regs`") if "regs" in a else None
        self.roles[name] = RoleDecl(
            path=f"roles.{name}", span=self.span(stmt), name=name,
            warp_start=start, warp_stop=stop, regs=regs,
        )
        self.role_order.append(name)
        self.bind(name, _Resource("role", name), stmt)

    def resource_ref(self, node: ast.expr, kind: str) -> str:
        if not isinstance(node, ast.Name):
            self.fail(errors.ARG_TYPE, f"expected {_RESOURCE_WORDS[kind]} name", node)
        binding = self.lookup(node.id)  # type: ignore[union-attr]
        if isinstance(binding, _Poisoned):
            raise _Dropped
        if binding is None:
            raise _Unresolved(node.id, kind, self.span(node),  # type: ignore[union-attr]
                              self.visible_names())
        if not (isinstance(binding, _Resource) and binding.kind == kind):
            self.fail(errors.ARG_TYPE, f"`{node.id}` is {self.what_is(binding)}, expected "  # type: ignore[union-attr]
                      f"{_RESOURCE_WORDS[kind]}", node)
        return node.id  # type: ignore[union-attr]

    @staticmethod
    def what_is(binding: _Binding | None) -> str:
        if isinstance(binding, _Resource):
            return _RESOURCE_WORDS[binding.kind]
        if isinstance(binding, Var):
            return "a loop variable"
        return "an index expression"

    # ---- role bodies -----------------------------------------------------------------

    def role_body(self, stmt: ast.With) -> None:
        if len(stmt.items) != 1 or stmt.items[0].optional_vars is not None:
            self.fail(errors.STRUCTURE, "use `with <role>:` with a single role", stmt)
        node = stmt.items[0].context_expr
        if self.is_lm_call(node, "warps"):
            self.fail(errors.STRUCTURE, "`with lm.warps(...)` selects warps of a role: it "
                      "belongs inside a `with <role>:` body", stmt)
        try:
            name = self.role_name(node)
        except _Unresolved as exc:
            self.record_unresolved(exc)
            return
        except _Dropped:
            return
        if name in self.role_bodies:
            self.fail(errors.STRUCTURE, f"role `{name}` already has a body", stmt)
        self.role_bodies.add(name)
        role = self.roles[name]
        self.role_warps = role.warp_stop - role.warp_start
        body = self.block(stmt.body, f"roles.{name}.body")
        self.roles[name] = self.roles[name].model_copy(update={"body": body})

    def block(self, stmts: list[ast.stmt], path: str) -> tuple[Stmt, ...]:
        self.scopes.append({})
        out: list[Stmt] = []
        try:
            for stmt in stmts:
                self.count_statement(stmt)
                node_path = f"{path}[{len(out)}]"
                try:
                    node = self.body_statement(stmt, node_path)
                except _Unresolved as exc:
                    self.record_unresolved(exc)
                    continue
                except _Dropped:
                    continue
                if node is not None:
                    out.append(node)
        finally:
            self.scopes.pop()
        return tuple(out)

    def body_statement(self, stmt: ast.stmt, path: str) -> Stmt | None:
        if isinstance(stmt, ast.Pass):
            return None
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            return None
        if isinstance(stmt, ast.For):
            return self.for_loop(stmt, path)
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            return self.primitive_call(stmt.value, stmt, path)
        if isinstance(stmt, ast.Assign):
            if self.is_lm_call(stmt.value) and stmt.value.func.attr in _DECLARATIONS:  # type: ignore[union-attr]
                self.fail(errors.STRUCTURE, "declarations belong at the top of the schedule, "
                          "outside role bodies", stmt)
            if len(stmt.targets) != 1:
                self.fail(errors.STRUCTURE, "chained assignment is not allowed", stmt)
            self.let(stmt)
            return None
        if isinstance(stmt, ast.With):
            if len(stmt.items) == 1 and stmt.items[0].optional_vars is None and \
                    self.is_lm_call(stmt.items[0].context_expr, "warps"):
                return self.warp_subset(stmt, path)
            self.fail(errors.STRUCTURE, "role bodies cannot nest (inside a role, `with` "
                      "takes `lm.warps(start, stop)`)", stmt)
        self.forbid_stmt(stmt)
        return None

    def warp_subset(self, stmt: ast.With, path: str) -> Warps | None:
        """`with lm.warps(start, stop[, step]):` (docs/language.md, "Part of a role")."""
        call = stmt.items[0].context_expr
        assert isinstance(call, ast.Call)
        if self.in_subset:
            self.fail(errors.STRUCTURE, "`with lm.warps(...)` blocks cannot nest: write the "
                      "innermost set of warps", stmt)
        if call.keywords or not 2 <= len(call.args) <= 3:
            self.fail(errors.ARG_TYPE, "`lm.warps` takes 2 or 3 positional static integers: "
                      "`lm.warps(start, stop[, step])`, warp indices within the role", call)
        start = self.static_int(call.args[0], "the first warp of `lm.warps`")
        stop = self.static_int(call.args[1], "the stop of `lm.warps`")
        step = self.static_int(call.args[2], "the step of `lm.warps`", positive=True) \
            if len(call.args) == 3 else 1
        if not 0 <= start < stop <= self.role_warps:
            self.fail(errors.ARG_TYPE, f"`lm.warps({start}, {stop})` must name warps inside "
                      f"the role: 0 <= start < stop <= {self.role_warps} (indices count from "
                      "the role's first warp)", call)
        self.in_subset = True
        try:
            body = self.block(stmt.body, f"{path}.body")
        finally:
            self.in_subset = False
        if not body:
            return None
        return Warps(path=path, span=self.span(stmt), start=start, stop=stop, step=step,
                     body=body)

    def for_loop(self, stmt: ast.For, path: str) -> For:
        if stmt.orelse:
            self.fail(errors.FORBIDDEN, "`for ... else` is not allowed", stmt)
        if not isinstance(stmt.target, ast.Name):
            self.fail(errors.STRUCTURE, "a loop binds one variable", stmt.target)
        it = stmt.iter
        if not self.is_lm_call(it, "range"):
            self.fail(errors.FORBIDDEN, "loops iterate over `lm.range(start, stop[, step])`", it)
        assert isinstance(it, ast.Call)
        if not 1 <= len(it.args) <= 3:
            self.fail(errors.ARG_TYPE, "`lm.range` takes 1 to 3 positional arguments and "
                      "optionally `counter=`", it)
        counter = self.loop_counter(it)
        exprs = [self.expr(a) for a in it.args]
        start, stop = (Const(value=0), exprs[0]) if len(exprs) == 1 else (exprs[0], exprs[1])
        step: int | Expr = 1
        if len(exprs) == 3:
            why = bad_step(exprs[2])
            if why is not None:
                self.fail(errors.ARG_TYPE, why, it.args[2])
            step = exprs[2].value if isinstance(exprs[2], Const) else exprs[2]
        for node, expr in zip(it.args, exprs, strict=False):
            if counters_in(expr):
                self.fail(errors.ARG_TYPE, "a counter cannot bound a loop (a loop's trip "
                          "count is known when it starts)", node)
        var = stmt.target.id
        self.scopes.append({})
        self.counting.append(counter or "")
        try:
            self.bind(var, Var(name=var), stmt.target)
            body = self.block(stmt.body, f"{path}.body")
        finally:
            self.scopes.pop()
            self.counting.pop()
        return For(path=path, span=self.span(stmt), var=var, start=start, stop=stop, step=step,
                   body=body, counter=counter)

    def loop_counter(self, it: ast.Call) -> str | None:
        """The counter named by `lm.range(..., counter=c)`, or None."""
        if not it.keywords:
            return None
        kw = self.keywords(it, ("counter",))
        node = kw["counter"]
        if not isinstance(node, ast.Name):
            self.fail(errors.ARG_TYPE, "`counter=` names a counter declared with "
                      "`lm.counter()`", node)
        binding = self.lookup(node.id)  # type: ignore[union-attr]
        if binding is None:
            raise _Unresolved(node.id, "counter", self.span(node),  # type: ignore[union-attr]
                              [n for s in self.scopes for n, b in s.items() if is_counter(b)])
        if isinstance(binding, _Poisoned):
            raise _Dropped
        if not is_counter(binding):
            self.fail(errors.ARG_TYPE, f"`{node.id}` is not a counter: declare it with "  # type: ignore[union-attr]
                      "`lm.counter()`", node)
        name = node.id  # type: ignore[union-attr]
        if name in self.counting:
            self.fail(errors.STRUCTURE, f"counter `{name}` is already advanced by an "
                      "enclosing loop", node)
        return name

    def primitive_call(self, call: ast.Call, stmt: ast.stmt, path: str) -> Call:
        func = call.func
        if not isinstance(func, ast.Attribute):
            self.fail(errors.FORBIDDEN, "only `lm.<primitive>(...)` and `<resource>.<method>"
                      "(...)` calls are allowed", call)
        assert isinstance(func, ast.Attribute)
        receiver: Value | None = None
        method = func.attr
        recv = func.value
        if isinstance(recv, ast.Name) and recv.id == "lm":
            spelling = f"lm.{method}"
            kind = "lm"
        else:
            base = recv.value if isinstance(recv, ast.Subscript) else recv
            if not isinstance(base, ast.Name):
                self.fail(errors.FORBIDDEN, "method calls are allowed on declared resources "
                          "only", recv)
            binding = self.lookup(base.id)  # type: ignore[union-attr]
            if isinstance(binding, _Poisoned):
                raise _Dropped
            if binding is None:
                methods = {s.split(".", 1)[1] for s in self.vocab.primitives
                           if not s.startswith("lm.")}
                if method not in methods:  # `os.system(...)`: not a misspelt resource
                    self.fail(errors.FORBIDDEN, f"`{base.id}.{method}(...)` is not part of "  # type: ignore[union-attr]
                              "the schedule language: only `lm.<primitive>(...)` and "
                              "`<resource>.<method>(...)` calls are allowed", call)
                raise _Unresolved(base.id, "name", self.span(base),  # type: ignore[union-attr]
                                  self.visible_names())
            if not isinstance(binding, _Resource):
                self.fail(errors.FORBIDDEN, f"`{base.id}` is {self.what_is(binding)} and has "  # type: ignore[union-attr]
                          "no methods", recv)
            kind = binding.kind  # type: ignore[union-attr]
            spelling = f"{kind}.{method}"
            receiver = self.value_of_kind(recv, kind, f"`{spelling}`", "receiver")
        sig = self.vocab.primitives.get(spelling)
        if sig is None:
            prefix = f"{kind}."
            candidates = [s[len(prefix):] for s in self.vocab.primitives if s.startswith(prefix)]
            if kind == "lm":
                candidates += [*_EXPR_FUNCS, "range", "launch", *_DECLARATIONS]
            raise _Unresolved(method, "primitive" if kind == "lm" else f"method of {kind}",
                              self.span(func), candidates)
        params = [a for a in sig.args if a.name != sig.receiver]
        if any(isinstance(a, ast.Starred) for a in call.args):
            self.fail(errors.FORBIDDEN, "starred arguments are not allowed", call)
        if len(call.args) > len(params):
            self.fail(errors.ARG_TYPE, f"`{spelling}` takes at most {len(params)} positional "
                      "arguments", call.args[len(params)])
        given: dict[str, ast.expr] = {p.name: n for p, n in zip(params, call.args, strict=False)}
        names = tuple(p.name for p in params)
        for key, node in self.keywords(call, names).items():
            if key in given:
                self.fail(errors.ARG_TYPE, f"argument `{key}` given twice", node)
            given[key] = node
        values: dict[str, Value] = {}
        spans: dict[str, Span] = {}
        if sig.receiver is not None:
            if receiver is None:
                self.fail(errors.STRUCTURE, f"`{spelling}` is called on a resource", call)
            values[sig.receiver] = receiver  # type: ignore[assignment]
            spans[sig.receiver] = self.span(recv)
        for p in params:
            if p.name not in given:
                if p.required:
                    self.fail(errors.ARG_TYPE, f"`{spelling}` needs argument `{p.name}`", call)
                default = self.default_value(p, self.span(call))
                if default is not None:
                    values[p.name] = default  # written or not, a default means the same
                continue
            node = given[p.name]
            values[p.name] = self.argument(node, p, spelling)
            spans[p.name] = self.span(node)
        return Call(path=path, span=self.span(stmt), primitive=sig.name, args=values,
                    arg_spans=spans)

    # ---- argument values ------------------------------------------------------------

    def argument(self, node: ast.expr, arg: Arg, spelling: str) -> Value:
        span = self.span(node)
        what = f"argument `{arg.name}` of `{spelling}`"
        if arg.kind in ("smem", "fragment", "operand", "tensor", "mbarrier", "named_barrier",
                        "pipeline"):
            return self.value_of_kind(node, arg.kind, f"`{spelling}`", arg.name,
                                      sliceable=arg.sliceable)
        if arg.kind == "index":
            return ExprValue(span=span, expr=self.expr(node))
        if arg.kind == "coord":
            elts = node.elts if isinstance(node, ast.Tuple) else [node]
            return CoordValue(span=span, items=tuple(self.expr(e) for e in elts))
        if arg.kind == "int":
            return ExprValue(span=span, expr=Const(value=self.static_int(node, what)))
        if arg.kind == "float":
            return FloatValue(span=span, value=self.number(node, what))
        if arg.kind == "bool":
            if isinstance(node, ast.Constant) and isinstance(node.value, bool):
                return BoolValue(span=span, value=node.value)
            expr = self.expr(node)
            if not isinstance(expr, Compare | Const):
                self.fail(errors.ARG_TYPE, f"{what} is True, False or a comparison", node)
            return ExprValue(span=span, expr=expr)
        if arg.kind == "enum":
            value = self.string(node, what)
            if value not in arg.choices:
                self.fail(errors.ARG_TYPE, f"{what} is one of {', '.join(arg.choices)}", node)
            return StrValue(span=span, value=value)
        raise AssertionError(f"unknown argument kind {arg.kind}")

    @staticmethod
    def default_value(arg: Arg, span: Span) -> Value | None:
        """The IR value of an omitted optional argument, so that spelling out a default
        does not change the schedule's identity."""
        if arg.default is None:
            return None
        if arg.kind == "bool" and isinstance(arg.default, bool):
            return BoolValue(span=span, value=arg.default)
        if arg.kind == "enum" and isinstance(arg.default, str):
            return StrValue(span=span, value=arg.default)
        if arg.kind == "float" and isinstance(arg.default, int | float):
            return FloatValue(span=span, value=float(arg.default))
        if arg.kind in ("int", "index") and isinstance(arg.default, int):
            return ExprValue(span=span, expr=Const(value=arg.default))
        return None

    def number(self, node: ast.expr, what: str) -> float:
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -self.number(node.operand, what)
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not \
                isinstance(node.value, bool):
            try:
                value = float(node.value)
            except OverflowError:
                value = float("inf")
            if value != value or abs(value) > 1e30:
                self.fail(errors.LIMIT, f"{what} is out of range", node)
            return value
        expr = self.expr(node)
        if isinstance(expr, Const):
            return float(expr.value)
        self.fail(errors.ARG_TYPE, f"{what} must be a number", node)
        raise AssertionError

    def value_of_kind(self, node: ast.expr, kind: str, spelling: str, arg: str,
                      sliceable: bool = False) -> Value:
        span = self.span(node)
        if kind == "operand":
            for option in ("smem", "fragment"):
                base = node.value if isinstance(node, ast.Subscript) else node
                if isinstance(base, ast.Name):
                    b = self.lookup(base.id)
                    if isinstance(b, _Resource) and b.kind == option:
                        return self.value_of_kind(node, option, spelling, arg, sliceable)
            kind = "smem"  # the error below names what was expected
            expected = "a shared-memory view or a register fragment"
        else:
            expected = _RESOURCE_WORDS.get(kind, kind)
        # pipeline barriers: ring.full(k) / ring.empty(k)
        if kind == "mbarrier" and isinstance(node, ast.Call):
            func = node.func
            if (
                isinstance(func, ast.Attribute)
                and func.attr in ("full", "empty")
                and isinstance(func.value, ast.Name)
            ):
                pipe = self.resource_ref(func.value, "pipeline")
                if len(node.args) != 1 or node.keywords:
                    self.fail(errors.ARG_TYPE, f"`{pipe}.{func.attr}` takes the iteration",
                              node)
                return BarrierRef(span=span, name=pipe, index=self.expr(node.args[0]),
                                  pipeline_side=func.attr)  # type: ignore[arg-type]
        index: Expr | None = None
        base = node
        if isinstance(node, ast.Subscript) and kind == "fragment":
            name = self.resource_ref(node.value, "fragment")
            if not sliceable:
                self.fail(errors.ARG_TYPE, f"argument `{arg}` of {spelling} takes a whole "
                          "fragment: a sub-tile (`acc[:, a:b]`) is accepted by `lm.store`, "
                          "`lm.elementwise` and `lm.fill` only", node)
            return FragmentRef(span=span, name=name, tile=self.sub_tile(node, name))
        if isinstance(node, ast.Subscript):
            base = node.value
            if kind not in ("smem", "mbarrier"):
                self.fail(errors.ARG_TYPE, f"{expected} cannot be indexed", node)
            index = self.expr(node.slice)
        if not isinstance(base, ast.Name):
            self.fail(errors.ARG_TYPE, f"argument `{arg}` of {spelling} expects {expected}",
                      node)
        assert isinstance(base, ast.Name)
        binding = self.lookup(base.id)
        if isinstance(binding, _Poisoned):
            raise _Dropped
        if binding is None:
            raise _Unresolved(base.id, "name", self.span(base), self.visible_names())
        if not (isinstance(binding, _Resource) and binding.kind == kind):
            self.fail(
                errors.ARG_TYPE,
                f"argument `{arg}` of {spelling} expects {expected}; `{base.id}` is "
                f"{self.what_is(binding)}",
                node,
            )
        name = base.id
        if kind == "smem":
            return SmemRef(span=span, name=name, stage=index)
        if kind == "fragment":
            return FragmentRef(span=span, name=name)
        if kind == "tensor":
            return TensorRef(span=span, name=name)
        if kind == "mbarrier":
            return BarrierRef(span=span, name=name, index=index)
        if kind == "named_barrier":
            return NamedBarrierRef(span=span, name=name)
        return PipelineRef(span=span, name=name)

    def sub_tile(self, node: ast.Subscript, name: str) -> SubTile:
        """`acc[r0:r1, c0:c1]` (or `acc[r0:r1]`): a window of the fragment's 2-D view with
        static extents `r1 - r0` and `c1 - c0` (docs/language.md, "Slices of a
        fragment")."""
        decl = next(d for d in self.resources if d.name == name)
        assert isinstance(decl, FragmentDecl)
        if len(decl.shape) > 2:
            self.fail(errors.ARG_TYPE, f"only fragments of rank 1 or 2 can be sliced; `{name}` "
                      f"has rank {len(decl.shape)}", node)
        parts = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
        if len(parts) > len(decl.shape):
            self.fail(errors.ARG_TYPE, f"`{name}` has rank {len(decl.shape)}: at most "
                      f"{len(decl.shape)} slices", node.slice)
        extents = (*decl.shape, 1) if len(decl.shape) == 1 else decl.shape
        windows: list[tuple[Expr, int]] = []
        for axis, extent in enumerate(extents):
            part = parts[axis] if axis < len(parts) else None
            if part is None:
                windows.append((Const(value=0), extent))
                continue
            if not isinstance(part, ast.Slice):
                self.fail(errors.ARG_TYPE, "index a fragment with slices `a:b` (a sub-tile "
                          "keeps its rank)", part)
            assert isinstance(part, ast.Slice)
            if part.step is not None:
                self.fail(errors.ARG_TYPE, "a fragment slice has no step", part.step)
            lower = self.expr(part.lower) if part.lower is not None else Const(value=0)
            upper = self.expr(part.upper) if part.upper is not None else Const(value=extent)
            size = static_difference(upper, lower)
            if size is None or size <= 0:
                self.fail(errors.ARG_TYPE, "a fragment slice needs a static, positive extent: "
                          "write `a:a + 32` or `j * 32:(j + 1) * 32`", part)
            assert size is not None
            if size > extent or (isinstance(lower, Const) and not
                                 0 <= lower.value <= extent - size):
                self.fail(errors.ARG_TYPE, f"slice `{slice_text(lower, size)}` is outside "
                          f"axis {axis} of `{name}` (extent {extent})", part)
            windows.append((lower, size))
        (row0, rows), (col0, cols) = windows
        return SubTile(row0=row0, rows=rows, col0=col0, cols=cols)

    # ---- index expressions ----------------------------------------------------------

    def static_int(self, node: ast.expr, what: str, positive: bool = False) -> int:
        if isinstance(node, ast.Constant) and (
            isinstance(node.value, bool) or not isinstance(node.value, int)
        ):
            self.fail(errors.ARG_TYPE, f"{what} must be an integer, got {_short(node.value)}",
                      node)
        expr = self.expr(node)
        if not isinstance(expr, Const):
            self.fail(errors.ARG_TYPE, f"{what} must be a static integer", node)
        value = expr.value  # type: ignore[union-attr]
        if positive and value <= 0:
            self.fail(errors.ARG_TYPE, f"{what} must be positive, got {value}", node)
        return value

    def expr(self, node: ast.expr) -> Expr:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, int):
                self.fail(errors.ARG_TYPE, f"expected an integer, got {_short(node.value)}",
                          node)
            return self.const(node.value, node)
        if isinstance(node, ast.Name):
            binding = self.lookup(node.id)
            if binding is None:
                raise _Unresolved(node.id, "name", self.span(node), self.visible_names())
            if isinstance(binding, _Poisoned):
                raise _Dropped
            if isinstance(binding, _Resource):
                self.fail(errors.ARG_TYPE, f"`{node.id}` is {_RESOURCE_WORDS[binding.kind]}, "
                          "not an integer", node)
            return binding  # type: ignore[return-value]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return self.binop("-", Const(value=0), self.expr(node.operand), node)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.UAdd):
            return self.expr(node.operand)
        if isinstance(node, ast.BinOp):
            ops = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%"}
            op = ops.get(type(node.op))
            if op is None:
                spelled, hint = _OTHER_OPERATORS.get(type(node.op),
                                                     (type(node.op).__name__, ""))
                self.fail(errors.FORBIDDEN, f"operator `{spelled}` is not allowed in index "
                          f"expressions (they use +, -, *, // and %){hint}", node)
            return self.binop(op, self.expr(node.left), self.expr(node.right), node)  # type: ignore[arg-type]
        if isinstance(node, ast.Compare):
            if len(node.ops) != 1:
                self.fail(errors.FORBIDDEN, "chained comparisons are not allowed", node)
            ops = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">",
                   ast.GtE: ">="}
            cop = ops.get(type(node.ops[0]))
            if cop is None:
                self.fail(errors.FORBIDDEN, "only ==, !=, <, <=, >, >= compare indices", node)
            lhs, rhs = self.expr(node.left), self.expr(node.comparators[0])
            if isinstance(lhs, Const) and isinstance(rhs, Const):
                return Const(value=int(compare_op(cop, lhs.value, rhs.value)))  # type: ignore[arg-type]
            return Compare(op=cop, lhs=lhs, rhs=rhs)  # type: ignore[arg-type]
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id == "lm":
                return self.size(node)
            self.fail(errors.FORBIDDEN, "attribute access is limited to workload sizes "
                      "(`lm.M`)", node)
        if isinstance(node, ast.Call):
            return self.expr_call(node)
        self.fail(errors.FORBIDDEN, _describe(node), node)
        raise AssertionError

    def const(self, value: int, node: ast.AST) -> Const:
        if abs(value) >= INT_LIMIT:
            self.fail(errors.LIMIT, f"integer {value} is out of range (|v| < 2**40)", node)
        return Const(value=value)

    def binop(self, op: str, lhs: Expr, rhs: Expr, node: ast.AST) -> Expr:
        if isinstance(lhs, Const) and isinstance(rhs, Const):
            if op in ("//", "%", "cdiv") and rhs.value == 0:
                self.fail(errors.ARG_TYPE, "division by zero", node)
            return self.const(apply_op(op, lhs.value, rhs.value), node)
        if op in ("//", "%", "cdiv") and isinstance(rhs, Const) and rhs.value <= 0:
            self.fail(errors.ARG_TYPE, "divisors in index expressions must be positive", node)
        return BinOp(op=op, lhs=lhs, rhs=rhs)  # type: ignore[arg-type]

    def size(self, node: ast.Attribute) -> Expr:
        name = node.attr
        if name in self.fixed_sizes:
            return Const(value=self.fixed_sizes[name])
        if self.workload is not None and name not in self.workload.sizes:
            raise _Unresolved(name, "size", self.span(node), list(self.workload.sizes))
        if self.workload is None and not name[:1].isupper():
            raise _Unresolved(name, "size", self.span(node), [])
        return Size(name=name)

    def expr_call(self, node: ast.Call) -> Expr:
        func = node.func
        if node.keywords:
            self.fail(errors.ARG_TYPE, "index functions take positional arguments", node)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            if func.value.id == "lm":
                name = func.attr
                if name in ("cdiv", "min", "max"):
                    if len(node.args) != 2:
                        self.fail(errors.ARG_TYPE, f"`lm.{name}` takes two arguments", node)
                    return self.binop(name, self.expr(node.args[0]), self.expr(node.args[1]),
                                      node)
                if name == "block":
                    if len(node.args) != 1:
                        self.fail(errors.ARG_TYPE, "`lm.block` takes the grid axis", node)
                    axis = self.static_int(node.args[0], "the grid axis")
                    if not 0 <= axis <= 2:
                        self.fail(errors.ARG_TYPE, "the grid axis is 0, 1 or 2", node.args[0])
                    return Block(axis=axis)
                if name == "grid":  # cakegov/ir/persistent.py
                    if self.launch is None:
                        self.fail(errors.STRUCTURE, "`lm.grid` needs the launch: write "
                                  "`lm.launch(...)` first", node)
                    assert self.launch is not None
                    if len(node.args) != 1:
                        self.fail(errors.ARG_TYPE, "`lm.grid` takes the grid axis", node)
                    axis = self.static_int(node.args[0], "the grid axis")
                    if not 0 <= axis <= 2:
                        self.fail(errors.ARG_TYPE, "the grid axis is 0, 1 or 2", node.args[0])
                    return grid_extent(self.launch.grid, axis)
                if name == "cluster_rank":  # cakegov/ir/cluster.py
                    if self.launch is None:
                        self.fail(errors.STRUCTURE, "`lm.cluster_rank` needs the cluster "
                                  "shape: write `lm.launch(...)` first", node)
                    assert self.launch is not None
                    if not node.args:
                        return linear_rank(self.launch.cluster)
                    if len(node.args) != 1:
                        self.fail(errors.ARG_TYPE, "`lm.cluster_rank` takes no argument "
                                  "(the linear rank) or the cluster axis", node)
                    axis = self.static_int(node.args[0], "the cluster axis")
                    if not 0 <= axis <= 2:
                        self.fail(errors.ARG_TYPE, "the cluster axis is 0, 1 or 2",
                                  node.args[0])
                    return axis_rank(axis, self.launch.cluster)
                if name == "nbytes":
                    total = 0
                    for arg in node.args:
                        buf = self.resource_ref(arg, "smem")
                        decl = next(d for d in self.resources if d.name == buf)
                        total += decl.stage_bytes  # type: ignore[union-attr]
                    return self.const(total, node)
                raise _Unresolved(name, "index function", self.span(func), list(_EXPR_FUNCS))
            binding = self.lookup(func.value.id)
            if isinstance(binding, _Poisoned):
                raise _Dropped
            if isinstance(binding, _Resource) and binding.kind == "pipeline" and \
                    func.attr == "stage":
                if len(node.args) != 1:
                    self.fail(errors.ARG_TYPE, "`stage` takes the iteration", node)
                return StageOf(pipeline=func.value.id, iter=self.expr(node.args[0]))
            if binding is None:
                raise _Unresolved(func.value.id, "name", self.span(func.value),
                                  self.visible_names())
        self.fail(errors.FORBIDDEN, "only `lm.cdiv`, `lm.min`, `lm.max`, `lm.block`, "
                  "`lm.grid`, `lm.cluster_rank`, `lm.nbytes` and `<pipeline>.stage` may be "
                  "called in an "
                  "index expression",
                  node)
        raise AssertionError


def walk_statements(body: tuple[Stmt, ...]) -> Iterator[tuple[Stmt, tuple[For, ...]]]:
    """Every statement of a body in program order, with its enclosing loops; the
    statements of a `with lm.warps(...)` block follow the block itself."""
    out: list[tuple[Stmt, tuple[For, ...]]] = []

    def visit(stmts: tuple[Stmt, ...], loops: tuple[For, ...]) -> None:
        for s in stmts:
            out.append((s, loops))
            if isinstance(s, For):
                visit(s.body, (*loops, s))
            elif isinstance(s, Warps):
                visit(s.body, loops)

    visit(body, ())
    yield from out
