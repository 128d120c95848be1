"""Semantics-preserving variants of a schedule, to test that a claimed catch generalises.

A rule that recognises a file (its hash, its name, its identifiers, its layout) rather
than the defect fires on the original and on none of its variants. Each kind below is a
pure text -> text rewrite that computes what the original computes, with the same
synchronisation, and returns `None` where it does not apply or cannot be sure:

- `rename`: every bound name respelled consistently (two schemes);
- `reorder`: adjacent independent declarations at the top of the function swapped;
- `stages`: a stage count bound once by a name (`S = 2`) raised by one;
- `tiles`: the K tile (`BK`, the name of `lm.cdiv(lm.K, BK)`) halved, with the buffers it
  shapes, their swizzle and the `divisible=` entry of K;
- `raw-barriers`: a pipeline written out as the two mbarrier arrays and the waits and
  arrives the lowering derives for it (cakegov/lower/derive.py, `pipeline_op`).

A variant carries a line map (original line -> variant line), so the labelled
`(code, line)` of the original can be looked up in the variant's findings. The rewrites
are conservative by design: a construct a rewrite cannot prove it preserves (a stage count
also written as a literal, a tile size used in arithmetic it does not recognise, a
pipeline `commit`) makes it skip the file rather than produce a different schedule. The
test suite checks each kind over the corpus with the base rulebook
(tests/test_variants.py)."""

from __future__ import annotations

import ast
import io
import keyword
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass, field

from cakegov.ir.dtypes import DTYPE_BYTES
from cakegov.ir.nodes import SWIZZLE_BYTES

SCHEMES = ("{}_v", "w{}")  # two unrelated spellings per bound name
KINDS = ("rename", "reorder", "stages", "tiles", "raw-barriers")


@dataclass(frozen=True)
class Variant:
    """One variant of a schedule: its kind, its text, and where each line of the original
    went (every line of the original has an entry)."""

    kind: str
    text: str
    lines: dict[int, int] = field(default_factory=dict)

    def line(self, original: int) -> int:
        return self.lines.get(original, original)


# ---- reading the source --------------------------------------------------------------

class _Source:
    """A schedule's text with its syntax tree, its schedule function and character offsets
    for the tree's (line, UTF-8 byte column) positions."""

    def __init__(self, text: str):
        self.text = text
        self.tree = ast.parse(text)
        self.lines = io.StringIO(text).readlines()  # at "\n" only, as `ast` counts lines
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))
        func = next((n for n in self.tree.body if isinstance(n, ast.FunctionDef)), None)
        if func is None:
            raise ValueError("no schedule function")
        self.func: ast.FunctionDef = func

    def offset(self, line: int, col: int) -> int:
        if line > len(self.lines):
            return len(self.text)
        raw = self.lines[line - 1].encode("utf-8")[:col]
        return self.starts[line - 1] + len(raw.decode("utf-8", errors="replace"))

    def span(self, node: ast.expr | ast.stmt) -> tuple[int, int]:
        end_line = node.end_lineno or node.lineno
        end_col = node.col_offset if node.end_col_offset is None else node.end_col_offset
        return self.offset(node.lineno, node.col_offset), self.offset(end_line, end_col)

    def segment(self, node: ast.expr | ast.stmt) -> str:
        a, b = self.span(node)
        return self.text[a:b]

    def top(self) -> list[ast.stmt]:
        """The statements of the schedule function's body."""
        return list(self.func.body)

    def decorator(self) -> ast.Call | None:
        return next((d for d in self.func.decorator_list if isinstance(d, ast.Call)), None)


def _parse(text: str) -> _Source | None:
    try:
        return _Source(text)
    except (SyntaxError, ValueError):
        return None


def _edit(text: str, edits: list[tuple[int, int, str]]) -> str:
    """`text` with each (start, end, replacement) applied; the edits must not overlap."""
    out = text
    for a, b, new in sorted(edits, reverse=True):
        out = out[:a] + new + out[b:]
    return out


def _same_lines(text: str) -> dict[int, int]:
    return {n: n for n in range(1, text.count("\n") + 2)}


def _lm_call(node: ast.AST | None, *names: str) -> bool:
    """`node` is a call `lm.<name>(...)` for one of `names`."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "lm"
            and node.func.attr in names)


def _kwarg(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _int(node: ast.AST | None) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


def _paren(text: str) -> str:
    simple = text.replace("_", "").isalnum()
    return text if simple else f"({text})"


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _loads(tree: ast.AST, name: str) -> Iterator[ast.Name]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load):
            yield node


def _constants(src: _Source) -> dict[str, ast.Constant]:
    """Names bound once, at the top of the function, to an integer literal (in a plain or a
    tuple assignment), with the literal's node; names bound more than once are left out."""
    out: dict[str, ast.Constant] = {}
    seen: dict[str, int] = {}
    for node in ast.walk(src.func):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            seen[node.id] = seen.get(node.id, 0) + 1
    for stmt in src.top():
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
            continue
        target, value = stmt.targets[0], stmt.value
        pairs: list[tuple[ast.expr, ast.expr]] = [(target, value)]
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and \
                len(target.elts) == len(value.elts):
            pairs = list(zip(target.elts, value.elts, strict=True))
        for t, v in pairs:
            if isinstance(t, ast.Name) and isinstance(v, ast.Constant) and \
                    _int(v) is not None and seen.get(t.id) == 1:
                out[t.id] = v
    return out


# ---- rename --------------------------------------------------------------------------

def _bound_names(text: str) -> set[str]:
    """Names the schedule binds: functions, assignment and loop targets (tuples included)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
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
    left alone. Lines do not move."""
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


def rename(text: str) -> list[Variant]:
    out = []
    for scheme in SCHEMES:
        v = renamed(text, scheme)
        if v is not None:
            out.append(Variant("rename", v, _same_lines(text)))
    return out


# ---- reorder -------------------------------------------------------------------------

# Declaration classes whose relative order carries meaning: shared-memory views are laid
# out in declaration order (alignment padding depends on it), mbarriers and pipelines get
# their barrier offsets in declaration order, roles are numbered in it. Two declarations
# of one of these classes never swap; any other independent pair may.
_ORDERED = frozenset({"smem", "barrier", "role"})
_INDEX_CALLS = ("cdiv", "min", "max", "block", "nbytes")  # values of a let-binding


def _decl_class(stmt: ast.stmt) -> str | None:
    """What a top-level assignment declares (None: not a declaration that may move)."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
        return None
    value = stmt.value
    if _lm_call(value, "smem"):
        return "smem"
    if _lm_call(value, "mbarrier", "pipeline"):
        return "barrier"
    if _lm_call(value, "role"):
        return "role"
    if _lm_call(value, "fragment"):
        return "fragment"
    if _lm_call(value, "named_barrier"):
        return "named_barrier"
    if isinstance(value, ast.Call) and not _lm_call(value, *_INDEX_CALLS):
        return None  # lm.launch and anything unknown stay where they are
    return "let"


def _names(node: ast.AST, ctx: type) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ctx)}


def _independent(a: ast.stmt, b: ast.stmt) -> bool:
    bound_a, bound_b = _names(a, ast.Store), _names(b, ast.Store)
    return not (bound_a & _names(b, ast.Load) or bound_b & _names(a, ast.Load)
                or bound_a & bound_b)


def reorder(text: str) -> Variant | None:
    """Swap adjacent independent declarations at the top of the function body (pairwise,
    left to right). Statements move as whole line blocks; comment lines between them stay
    in place."""
    src = _parse(text)
    if src is None:
        return None
    body = src.top()
    lines_of = {id(s): (s.lineno, s.end_lineno or s.lineno) for s in body}
    rows = [lines_of[id(s)] for s in body]
    shared = {rows[i] for i, (a, b) in enumerate(rows) for j, (c, d) in enumerate(rows)
              if i != j and not (b < c or d < a)}  # statements that share a line
    swaps: list[tuple[ast.stmt, ast.stmt]] = []
    i = 0
    while i + 1 < len(body):
        a, b = body[i], body[i + 1]
        ca, cb = _decl_class(a), _decl_class(b)
        movable = ca is not None and cb is not None and not (ca == cb and ca in _ORDERED)
        if movable and lines_of[id(a)] not in shared and lines_of[id(b)] not in shared \
                and _independent(a, b):
            swaps.append((a, b))
            i += 2
        else:
            i += 1
    if not swaps:
        return None
    order = list(range(1, len(src.lines) + 1))  # variant line i+1 shows original order[i]
    for a, b in swaps:
        (a0, a1), (b0, b1) = lines_of[id(a)], lines_of[id(b)]
        block = list(range(b0, b1 + 1)) + list(range(a1 + 1, b0)) + list(range(a0, a1 + 1))
        order[a0 - 1:b1] = block
    lines = []
    for n in order:
        line = src.lines[n - 1]
        lines.append(line if line.endswith("\n") else line + "\n")
    new = "".join(lines)
    if not text.endswith("\n"):
        new = new[:-1]
    return Variant("reorder", new, {orig: i + 1 for i, orig in enumerate(order)})


# ---- stages --------------------------------------------------------------------------

def _stage_names(src: _Source) -> dict[str, ast.Constant]:
    """Names that hold a stage count and nothing else: bound once to a literal, the value
    of some `stages=`, and otherwise used only as the right operand of `%` or `//` (stage
    and phase arithmetic)."""
    parents = _parents(src.func)

    def as_stages(use: ast.Name) -> bool:
        parent = parents.get(use)
        return isinstance(parent, ast.keyword) and parent.arg == "stages"

    def in_stage_arithmetic(use: ast.Name) -> bool:
        parent = parents.get(use)
        return isinstance(parent, ast.BinOp) and parent.right is use and \
            isinstance(parent.op, ast.Mod | ast.FloorDiv)

    out = {}
    for name, lit in _constants(src).items():
        uses = list(_loads(src.func, name))
        if any(as_stages(u) for u in uses) and \
                all(as_stages(u) or in_stage_arithmetic(u) for u in uses):
            out[name] = lit
    return out


def _hard_coded_stages(src: _Source, values: set[int], staged: set[str]) -> bool:
    """Whether the schedule also spells a stage count as a literal: a literal `stages=`
    other than 1, a literal stage index into a staged resource, a literal right operand of
    `//`, or of a `%` that is not a parity (`(k // S) % 2`), equal to a stage count, or
    such a literal as a loop bound."""
    for node in ast.walk(src.func):
        if isinstance(node, ast.keyword) and node.arg == "stages" and \
                _int(node.value) not in (None, 1):
            return True
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and \
                node.value.id in staged and _int(node.slice) is not None:
            return True
        if isinstance(node, ast.BinOp) and _int(node.right) in values:
            if isinstance(node.op, ast.FloorDiv):
                return True
            parity = _int(node.right) == 2 and any(
                isinstance(n, ast.BinOp) and isinstance(n.op, ast.FloorDiv)
                for n in ast.walk(node.left))
            if isinstance(node.op, ast.Mod) and not parity:
                return True
        if isinstance(node, ast.Call) and _lm_call(node, "range") and \
                any(_int(a) in values for a in node.args):
            return True
    return False


def stages(text: str) -> Variant | None:
    """Raise every stage count bound by a name (`BM, BN, BK, S = 64, 128, 64, 2`) by one,
    where that name is the only spelling of it."""
    src = _parse(text)
    if src is None:
        return None
    names = _stage_names(src)
    if not names:
        return None
    staged = set()
    for stmt in src.top():
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call):
            value = _kwarg(stmt.value, "stages")
            if isinstance(value, ast.Name) and value.id in names:
                staged |= _names(stmt.targets[0], ast.Store)
    values = {_int(lit) or 0 for lit in names.values()}
    if _hard_coded_stages(src, values, staged):
        return None
    edits = [(*src.span(lit), str((_int(lit) or 0) + 1)) for lit in names.values()]
    return Variant("stages", _edit(text, edits), _same_lines(text))


# ---- tiles ---------------------------------------------------------------------------

def _k_tile(src: _Source) -> tuple[str, str, ast.Constant] | None:
    """The name that tiles a reduction dimension D (`lm.cdiv(lm.D, BK)` outside the
    launch), its dimension and its literal, when every use of it is one this rewrite
    understands: an element of a `lm.smem` shape, a factor of a product, or the divisor
    of `lm.cdiv(lm.D, .)` / `lm.D // .`."""
    consts = _constants(src)
    parents = _parents(src.func)
    launch = [n for n in ast.walk(src.func) if _lm_call(n, "launch")]
    in_launch = {id(x) for n in launch for x in ast.walk(n)}

    def dim_of(node: ast.AST) -> str | None:
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                node.value.id == "lm":
            return node.attr
        return None

    for name, lit in consts.items():
        dims: set[str] = set()
        ok = True
        uses = list(_loads(src.func, name))
        for use in uses:
            parent = parents.get(use)
            if id(use) in in_launch:
                ok = False
            elif isinstance(parent, ast.Call) and _lm_call(parent, "cdiv") and \
                    len(parent.args) == 2 and parent.args[1] is use and dim_of(parent.args[0]):
                dims.add(dim_of(parent.args[0]) or "")
            elif isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.FloorDiv) and \
                    parent.right is use and dim_of(parent.left):
                dims.add(dim_of(parent.left) or "")
            else:
                factor = isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.Mult)
                shape = isinstance(parent, ast.Tuple) and _lm_call(parents.get(parent), "smem")
                ok = ok and (factor or shape)
        if ok and len(dims) == 1:
            return name, dims.pop(), lit
    return None


def tiles(text: str) -> Variant | None:
    """Halve the tile of the reduction loop (`BK = 64` -> 32), with what depends on it:
    the `swizzle=` of the buffers whose rows it sets (to the swizzle of the new row width)
    and the `divisible=` entry of its dimension when that equals the tile. Halving, not
    doubling: a larger tile can overflow shared memory or its swizzle width. Skips when
    the halved tile is not a multiple of 16 (the MMA K step), when a buffer it shapes has
    an explicit `align=`, a swizzle other than its row width, or is swizzled along another
    axis, when any byte count is not `lm.nbytes(...)` (one computed by hand would go
    stale), and when a view reuses another's storage (`alias=`: the halved root would no
    longer hold it)."""
    src = _parse(text)
    if src is None:
        return None
    found = _k_tile(src)
    if found is None:
        return None
    name, dim, lit = found
    old = _int(lit) or 0
    if old % 32:
        return None
    new = old // 2
    edits = [(*src.span(lit), str(new))]
    for node in ast.walk(src.func):
        if isinstance(node, ast.keyword) and node.arg == "alias":
            return None  # the root would shrink under a view that reuses its storage
        if isinstance(node, ast.keyword) and node.arg == "bytes" and \
                not _lm_call(node.value, "nbytes"):
            return None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr == "arrive_expect_tx" and node.args:
            return None  # a positional byte count
        if not (isinstance(node, ast.Call) and _lm_call(node, "smem")):
            continue
        call = node
        shape = call.args[1] if len(call.args) > 1 else _kwarg(call, "shape")
        dtype = call.args[0] if call.args else _kwarg(call, "dtype")
        elts = shape.elts if isinstance(shape, ast.Tuple) else []
        if not any(isinstance(e, ast.Name) and e.id == name for e in elts):
            continue
        if _kwarg(call, "align") is not None:
            return None
        swizzle = _kwarg(call, "swizzle")
        if swizzle is None or (isinstance(swizzle, ast.Constant) and swizzle.value == "none"):
            continue
        last = elts[-1]
        size = DTYPE_BYTES.get(dtype.value) if isinstance(dtype, ast.Constant) else None
        width = SWIZZLE_BYTES.get(swizzle.value) if isinstance(swizzle, ast.Constant) else None
        if not (isinstance(last, ast.Name) and last.id == name) or size is None or \
                width != old * size:
            return None
        narrow = next((k for k, w in SWIZZLE_BYTES.items() if w and w == new * size), None)
        if narrow is None:
            return None
        edits.append((*src.span(swizzle), f'"{narrow}"'))
    deco = src.decorator()
    divisible = _kwarg(deco, "divisible") if deco is not None else None
    if isinstance(divisible, ast.Dict):
        for key, value in zip(divisible.keys, divisible.values, strict=True):
            if isinstance(key, ast.Constant) and key.value == dim and _int(value) == old:
                edits.append((*src.span(value), str(new)))
    return Variant("tiles", _edit(text, edits), _same_lines(text))


# ---- raw barriers --------------------------------------------------------------------

_RING_METHODS = ("acquire", "commit", "wait", "release", "stage", "full", "empty")


class _Skip(Exception):
    """The rewrite cannot be sure it preserves this construct."""


@dataclass
class _Ring:
    name: str
    decl: ast.Assign
    stages: str  # the text of `stages=`
    full: str  # the names of the two mbarrier arrays that replace it
    empty: str
    consumer_warps: str  # the empty barrier's count: one arrive per consumer warp
    tx: list[str]  # the buffers its full barrier's loads fill, in first-load order


def _role_warps(src: _Source, role: str) -> str:
    for stmt in src.top():
        if isinstance(stmt, ast.Assign) and _names(stmt.targets[0], ast.Store) == {role} \
                and isinstance(stmt.value, ast.Call) and _lm_call(stmt.value, "role"):
            warps = _kwarg(stmt.value, "warps")
            if isinstance(warps, ast.Call) and warps.args and len(warps.args) <= 2 and \
                    not warps.keywords:
                start, stop = (None, warps.args[0]) if len(warps.args) == 1 else warps.args
                a = 0 if start is None else _int(start)
                b = _int(stop)
                if a is not None and b is not None:
                    return str(b - a)
                first = "0" if start is None else src.segment(start)
                return f"{_paren(src.segment(stop))} - {_paren(first)}"
    raise _Skip(f"role {role} has no warp range the rewrite can read")


def _stage_count(src: _Source, node: ast.AST | None, consts: dict[str, ast.Constant]
                 ) -> int | str:
    """A `stages=` value: its integer when it is a literal or a name bound to one, else
    its text."""
    if node is None:
        return 1
    if isinstance(node, ast.Name) and node.id in consts:
        return _int(consts[node.id]) or 0
    value = _int(node)
    return value if value is not None else src.segment(node)


def _rings(src: _Source, taken: set[str]) -> dict[str, _Ring]:
    """The pipelines, each with what its raw form needs. A pipeline whose declaration
    states more than raw barriers can (explicit `full_count=`/`empty_count=`, buffers
    with another stage count than the ring's) is not rewritten: the pipeline rules judge
    that declaration against its uses, and in the raw form there is no declaration left
    to contradict, only the consequence elsewhere."""
    consts = _constants(src)
    smem: dict[str, ast.Call] = {}
    out: dict[str, _Ring] = {}
    for stmt in src.top():
        if not (isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call)):
            continue
        call = stmt.value
        if isinstance(stmt.targets[0], ast.Name) and _lm_call(call, "smem"):
            smem[stmt.targets[0].id] = call
        if not _lm_call(call, "pipeline"):
            continue
        [target] = stmt.targets
        args = {k.arg: k.value for k in call.keywords}
        if not isinstance(target, ast.Name) or call.args or None in args or \
                set(args) != {"stages", "buffers", "producer", "consumer"}:
            raise _Skip("a pipeline declaration with more than stages, buffers and roles")
        consumer, buffers = args["consumer"], args["buffers"]
        if not isinstance(consumer, ast.Name) or not isinstance(buffers, ast.List | ast.Tuple):
            raise _Skip("a pipeline declaration the rewrite cannot read")
        ring_stages = _stage_count(src, args["stages"], consts)
        for buf in buffers.elts:
            decl = smem.get(buf.id) if isinstance(buf, ast.Name) else None
            if decl is None:
                raise _Skip("a pipeline buffer that is not a declared view")
            staged = decl.args[2] if len(decl.args) > 2 else _kwarg(decl, "stages")
            if _stage_count(src, staged, consts) != ring_stages:
                raise _Skip("a pipeline over buffers with another stage count")
        full, empty = _fresh(f"{target.id}_full", taken), _fresh(f"{target.id}_empty", taken)
        out[target.id] = _Ring(name=target.id, decl=stmt, stages=src.segment(args["stages"]),
                               full=full, empty=empty,
                               consumer_warps=_role_warps(src, consumer.id), tx=[])
    return out


def _uses_every_call(src: _Source, rings: dict[str, _Ring]) -> None:
    """Each ring is acquired, waited on and released somewhere: a ring missing one of its
    calls is reported by the pipeline rules as that missing call, which the raw form
    cannot show (an `acquire` that is missing also takes the arming of the full barrier
    with it)."""
    seen: dict[str, set[str]] = {name: set() for name in rings}
    for node in ast.walk(src.func):
        hit = _ring_call(node, rings)
        if hit is not None:
            seen[hit[0].name].add(hit[1])
    for name, methods in seen.items():
        if not {"acquire", "wait", "release"} <= methods:
            raise _Skip(f"pipeline {name} is not acquired, waited on and released")


def _fresh(name: str, taken: set[str]) -> str:
    out, n = name, 1
    while out in taken:
        n += 1
        out = f"{name}{n}"
    taken.add(out)
    return out


def _ring_call(node: ast.AST, rings: dict[str, _Ring]) -> tuple[_Ring, str, ast.expr] | None:
    """(ring, method, iteration) of a call `ring.method(k)`."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            isinstance(node.func.value, ast.Name) and node.func.value.id in rings:
        if node.func.attr not in _RING_METHODS or len(node.args) != 1 or node.keywords:
            raise _Skip(f"`{node.func.value.id}.{node.func.attr}` with unexpected arguments")
        return rings[node.func.value.id], node.func.attr, node.args[0]
    return None


class _Rewriter:
    """Rewrites the expressions and statements that use pipelines into raw-barrier text."""

    def __init__(self, src: _Source, rings: dict[str, _Ring]):
        self.src, self.rings = src, rings

    def expr(self, node: ast.AST) -> str:
        """The text of `node` with every `ring.stage/full/empty(k)` in it written out."""
        hit = _ring_call(node, self.rings)
        if hit is not None:
            ring, method, it = hit
            stage = f"{_paren(self.expr(it))} % {_paren(ring.stages)}"
            if method == "stage":
                return stage
            if method in ("full", "empty"):
                return f"{ring.full if method == 'full' else ring.empty}[{stage}]"
            raise _Skip(f"`{ring.name}.{method}` used as a value")
        a, _ = self.src.span(node)
        edits = [(*(x - a for x in self.src.span(sub)), self.expr(sub))
                 for sub in self._outermost(node)]
        return _edit(self.src.segment(node), edits)

    def _outermost(self, node: ast.AST) -> list[ast.AST]:
        out: list[ast.AST] = []
        for child in ast.iter_child_nodes(node):
            if _ring_call(child, self.rings) is not None:
                out.append(child)
            else:
                out += self._outermost(child)
        return out

    def statement(self, stmt: ast.stmt) -> str | None:
        """The raw form of `ring.acquire/wait/release(k)` (None for other statements).
        Several statements share the original's line (`;`), as the lowered operations of
        one pipeline call share its source span."""
        if not isinstance(stmt, ast.Expr):
            return None
        hit = _ring_call(stmt.value, self.rings)
        if hit is None:
            return None
        ring, method, it = hit
        k, s = _paren(self.expr(it)), _paren(ring.stages)
        stage = f"{k} % {s}"
        if method == "acquire":
            out = f"{ring.empty}[{stage}].wait(parity=({k} // {s} + 1) % 2)"
            if ring.tx:
                out += (f"; {ring.full}[{stage}].arrive_expect_tx("
                        f"bytes=lm.nbytes({', '.join(ring.tx)}))")
            return out
        if method == "wait":
            return f"{ring.full}[{stage}].wait(parity=({k} // {s}) % 2)"
        if method == "release":
            return f"lm.syncwarp(); {ring.empty}[{stage}].arrive()"
        # `commit` synchronises the whole producer role first, on a named barrier the
        # lowering reserves; no raw spelling gives the same synchronisation.
        raise _Skip(f"`{ring.name}.{method}` as a statement")


def _tx_buffers(src: _Source, rings: dict[str, _Ring]) -> None:
    """The buffers each ring's full barrier receives loads into, as the lowering counts
    them (`_pipeline_tx_bytes`: one stage of each buffer loaded through `ring.full(k)`)."""
    for node in ast.walk(src.func):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "load"):
            continue
        bar = _kwarg(node, "barrier")
        hit = _ring_call(bar, rings) if bar is not None else None
        if hit is None or hit[1] != "full":
            continue
        dst = node.func.value
        buf = dst.value if isinstance(dst, ast.Subscript) else dst
        if not isinstance(buf, ast.Name):
            raise _Skip("a load into a buffer the rewrite cannot name")
        if buf.id not in hit[0].tx:
            hit[0].tx.append(buf.id)


def raw_barriers(text: str) -> Variant | None:
    """Every pipeline written out as raw barriers with the semantics the lowering gives it
    (cakegov/lower/derive.py): `ring = lm.pipeline(stages=S, ...)` becomes
    `ring_full = lm.mbarrier(count=1, stages=S)` and
    `ring_empty = lm.mbarrier(count=<consumer warps>, stages=S)` (the lowering's default
    counts; a pipeline that overrides them is not rewritten, see `_rings`);
    `ring.stage(k)` becomes `k % S`, `ring.full(k)` `ring_full[k % S]`;
    `ring.acquire(k)` waits on the empty barrier with parity `(k // S + 1) % 2` and, when
    loads complete on the ring, arms the full barrier once with the bytes of one stage of
    each buffer they fill; `ring.wait(k)` waits on the full barrier with parity
    `(k // S) % 2`; `ring.release(k)` is `lm.syncwarp()` and an arrive per warp on the
    empty barrier. Lines do not move: a multi-line pipeline declaration becomes one line
    followed by blank ones."""
    src = _parse(text)
    if src is None:
        return None
    try:
        return _raw_barriers(src)
    except _Skip:
        return None


def _raw_barriers(src: _Source) -> Variant | None:
    taken = {n.id for n in ast.walk(src.tree) if isinstance(n, ast.Name)}
    taken |= {a.arg for a in ast.walk(src.tree) if isinstance(a, ast.arg)}
    rings = _rings(src, taken)
    if not rings:
        return None
    _uses_every_call(src, rings)
    _tx_buffers(src, rings)
    rewriter = _Rewriter(src, rings)
    decls = {id(r.decl): r for r in rings.values()}
    edits: list[tuple[int, int, str]] = []
    for stmt in ast.walk(src.func):
        if not isinstance(stmt, ast.stmt) or isinstance(stmt, ast.FunctionDef | ast.For |
                                                        ast.With):
            continue
        ring = decls.get(id(stmt))
        if ring is not None:
            a, b = src.span(stmt)
            blank = "\n" * ((stmt.end_lineno or stmt.lineno) - stmt.lineno)
            edits.append((a, b, f"{ring.full} = lm.mbarrier(count=1, stages={ring.stages}); "
                                f"{ring.empty} = lm.mbarrier(count={ring.consumer_warps}, "
                                f"stages={ring.stages})" + blank))
            continue
        raw = rewriter.statement(stmt)
        if raw is None:
            raw = rewriter.expr(stmt)
        if raw != src.segment(stmt):
            a, b = src.span(stmt)
            edits.append((a, b, raw))
    for node in ast.walk(src.func):
        if isinstance(node, ast.For | ast.With):
            heads = [i.context_expr for i in node.items] if isinstance(node, ast.With) \
                else [node.iter]
            for part in heads:
                if rewriter.expr(part) != src.segment(part):
                    raise _Skip("a pipeline call in a loop header or `with`")
    new = _edit(src.text, edits)
    used = _parse(new)
    if used is None or any(n.id in rings for n in ast.walk(used.tree)
                           if isinstance(n, ast.Name)):
        raise _Skip("a pipeline used other than through its methods")
    if new.count("\n") != src.text.count("\n"):
        raise _Skip("the rewrite moved lines")
    return Variant("raw-barriers", new, _same_lines(src.text))


# ---- all kinds -----------------------------------------------------------------------

def _all(text: str) -> Iterator[Variant | None]:
    yield from rename(text)
    yield reorder(text)
    yield stages(text)
    yield tiles(text)
    yield raw_barriers(text)


def variants(text: str) -> list[Variant]:
    """The variants of `text` that parse and differ from it and from each other (possibly
    none)."""
    out: list[Variant] = []
    try:
        for v in _all(text):
            if v is None or v.text == text or any(o.text == v.text for o in out):
                continue
            try:
                ast.parse(v.text)
            except (SyntaxError, ValueError):
                continue
            out.append(v)
    except (RecursionError, MemoryError):  # nested too deeply for `ast`: no variants
        return []
    return out
