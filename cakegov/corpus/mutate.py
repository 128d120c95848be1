"""Defect operators over schedule source: each finds its sites in a `.cake` file's Python
syntax tree and rewrites one of them, so that a valid schedule becomes a candidate defect.

A mutant is data: the source it came from, the operator, the index of the site among that
operator's sites in source order, a sentence saying what changed, and the mutated text.
Which mutants are defects is not decided here: cakegov/corpus/oracle.py labels each one by
its dynamic outcome (launch, then the CPU simulator), never by the checker.

Operators (`OPERATORS`, each a function from the parsed source to its sites):

- `drop-wait`, `drop-arrive`, `drop-release`, `drop-fence`, `drop-sync`: one statement
  becomes `pass` (the line count is kept, so nothing else moves);
- `flip-parity`: `parity=E` becomes `parity=(E + 1) % 2`;
- `count-plus-one` / `count-minus-one`: an mbarrier's or pipeline's arrival count +-1;
- `bytes-plus-one` / `bytes-minus-one`: the bytes an `arrive_expect_tx` arms +-1;
- `stage-plus-one`: a buffer or barrier stage index `[E]` becomes `[(E + 1) % S]` (S the
  declared stages), a pipeline's `.stage(E)` / `.full(E)` / `.empty(E)` becomes `E + 1`;
- `bound-plus-one` / `bound-minus-one`: a loop's `lm.range` stop +-1;
- `swap-releases`: two adjacent release statements change order; `hoist-release`: a
  release moves above the statement before it (the stage is freed before its use);
- `alias-buffers`: one use of a buffer names another buffer of the same type and shape;
- `exceed-smem`: an extra shared-memory buffer larger than any target's capacity;
- `exceed-registers`: a role's register budget grows by 64 (at most 256);
- `barrier-id`: a named barrier's id +1; `barrier-threads`: its thread count -32;
- `arm-after-copy`: an `arrive_expect_tx` moves after the copies that complete on it.

Every function is deterministic: the same text gives the same sites in the same order."""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from cakegov.corpus.labels import strip_expectations

HUGE_SMEM_BYTES = 262_144  # above every target's shared memory per CTA (227 KB on sm_90a)
REGS_STEP = 64
REGS_MAX = 256  # setmaxnreg's largest immediate (PTX ISA, setmaxnreg)


class MutateError(Exception):
    """The source is not Python syntax, so no operator can find a site."""


@dataclass(frozen=True)
class Edit:
    start: int  # character offsets into the source text
    end: int
    text: str


@dataclass(frozen=True)
class Site:
    operator: str
    line: int
    what: str
    edits: tuple[Edit, ...]


@dataclass(frozen=True)
class Mutant:
    source: str  # the origin's name (a corpus-relative path)
    operator: str
    site: int  # index among the operator's sites in the origin, in source order
    line: int
    what: str
    text: str

    @property
    def key(self) -> str:
        return f"{self.source}:{self.operator}:{self.site}"

    @property
    def text_sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


class Source:
    """A schedule's text with its syntax tree and offset arithmetic."""

    def __init__(self, text: str):
        self.text = text
        try:
            self.tree = ast.parse(text)
        except SyntaxError as exc:
            raise MutateError(f"not Python syntax: {exc.msg} (line {exc.lineno})") from None
        self.lines = text.splitlines(keepends=True)
        self._starts = [0]
        for line in self.lines:
            self._starts.append(self._starts[-1] + len(line))
        self.schedule = next((n for n in self.tree.body if isinstance(n, ast.FunctionDef)),
                             None)

    def offset(self, line: int, col: int) -> int:
        """Character offset of ast position (line, UTF-8 byte column)."""
        raw = self.lines[line - 1].encode("utf-8")[:col]
        return self._starts[line - 1] + len(raw.decode("utf-8", errors="ignore"))

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (self.offset(node.lineno, node.col_offset),
                self.offset(node.end_lineno or node.lineno,
                            node.end_col_offset or node.col_offset))

    def segment(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.text[start:end]

    def statements(self) -> Iterator[tuple[list[ast.stmt], int]]:
        """Every statement list inside the schedule function, with each index."""
        if self.schedule is None:
            return
        stack: list[list[ast.stmt]] = [self.schedule.body]
        while stack:
            body = stack.pop(0)
            for i, stmt in enumerate(body):
                yield body, i
                for field in ("body", "orelse"):
                    inner = getattr(stmt, field, None)
                    if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                        stack.append(inner)

    def calls(self) -> Iterator[ast.Call]:
        if self.schedule is None:
            return
        for node in ast.walk(self.schedule):
            if isinstance(node, ast.Call):
                yield node

    def declarations(self, kind: str) -> dict[str, ast.Call]:
        """`name = lm.<kind>(...)` assignments of the schedule, by name."""
        out: dict[str, ast.Call] = {}
        for body, i in self.statements():
            stmt = body[i]
            if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                    and isinstance(stmt.targets[0], ast.Name)
                    and isinstance(stmt.value, ast.Call) and _is_lm(stmt.value, kind)):
                out[stmt.targets[0].id] = stmt.value
        return out


def _is_lm(call: ast.Call, name: str) -> bool:
    f = call.func
    return (isinstance(f, ast.Attribute) and f.attr == name and isinstance(f.value, ast.Name)
            and f.value.id == "lm")


def _method(stmt: ast.stmt) -> tuple[str, ast.Call] | None:
    """(method name, call) of an expression statement `x.m(...)` / `x[i].m(...)`."""
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        f = stmt.value.func
        if isinstance(f, ast.Attribute):
            return f.attr, stmt.value
    return None


def _receiver(call: ast.Call) -> str:
    f = call.func
    base = f.value if isinstance(f, ast.Attribute) else f
    while isinstance(base, ast.Subscript):
        base = base.value
    return base.id if isinstance(base, ast.Name) else ""


def _keyword(call: ast.Call, name: str) -> ast.keyword | None:
    return next((k for k in call.keywords if k.arg == name), None)


def _int(node: ast.AST | None) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


# ---- statement removal ------------------------------------------------------------------

def _drop(src: Source, operator: str, match: Callable[[str, ast.Call, str], bool]
          ) -> Iterator[Site]:
    for body, i in src.statements():
        found = _method(body[i])
        if found is None:
            continue
        name, call = found
        if not match(name, call, _receiver(call)):
            continue
        stmt = body[i]
        start, end = src.span(stmt)
        keep = "\n" * ((stmt.end_lineno or stmt.lineno) - stmt.lineno)
        yield Site(operator, stmt.lineno, f"removes `{src.segment(stmt).strip()}`",
                   (Edit(start, end, "pass" + keep),))


def _kinds(src: Source) -> tuple[set[str], set[str], set[str]]:
    mbarriers = set(src.declarations("mbarrier"))
    named = set(src.declarations("named_barrier"))
    pipelines = set(src.declarations("pipeline"))
    return mbarriers, named, pipelines


def drop_wait(src: Source) -> Iterator[Site]:
    mb, _named, pipes = _kinds(src)
    yield from _drop(src, "drop-wait", lambda n, c, r: (
        (n == "wait" and (r in mb or r in pipes)) or (n == "acquire" and r in pipes)
        or (r == "lm" and n in ("mma_wait", "store_wait"))))


def drop_arrive(src: Source) -> Iterator[Site]:
    mb, _named, _pipes = _kinds(src)
    yield from _drop(src, "drop-arrive", lambda n, c, r: r in mb and n in (
        "arrive", "arrive_expect_tx"))


def drop_release(src: Source) -> Iterator[Site]:
    _mb, _named, pipes = _kinds(src)
    yield from _drop(src, "drop-release", lambda n, c, r: r in pipes and n in (
        "release", "commit"))


def drop_fence(src: Source) -> Iterator[Site]:
    yield from _drop(src, "drop-fence", lambda n, c, r: r == "lm" and n in (
        "fence_proxy", "fence_barrier_init"))


def drop_sync(src: Source) -> Iterator[Site]:
    _mb, named, _pipes = _kinds(src)
    yield from _drop(src, "drop-sync", lambda n, c, r: (
        (r == "lm" and n in ("sync_cta", "syncwarp")) or (r in named and n in (
            "sync", "arrive"))))


# ---- expression rewrites ----------------------------------------------------------------

def _replace(src: Source, operator: str, node: ast.AST, text: str, what: str) -> Site:
    start, end = src.span(node)
    return Site(operator, node.lineno, what, (Edit(start, end, text),))


def flip_parity(src: Source) -> Iterator[Site]:
    for call in src.calls():
        kw = _keyword(call, "parity")
        if kw is not None:
            old = src.segment(kw.value)
            yield _replace(src, "flip-parity", kw.value, f"({old} + 1) % 2",
                           f"flips `parity={old}` to `parity=({old} + 1) % 2`")


def _counts(src: Source) -> Iterator[tuple[ast.expr, str]]:
    for call in src.declarations("mbarrier").values():
        kw = _keyword(call, "count")
        if kw is not None:
            yield kw.value, "count"
    for call in src.declarations("pipeline").values():
        for name in ("full_count", "empty_count"):
            kw = _keyword(call, name)
            if kw is not None:
                yield kw.value, name


def _off_by_one(operator: str, delta: int, values: Iterator[tuple[ast.expr, str]],
                src: Source, floor: int = 0) -> Iterator[Site]:
    sign = "+" if delta > 0 else "-"
    for value, what in values:
        old = src.segment(value)
        n = _int(value)
        if n is not None:
            if n + delta < floor:
                continue
            new = str(n + delta)
        else:
            new = f"({old}) {sign} {abs(delta)}"
        yield _replace(src, operator, value, new, f"`{what}={old}` becomes `{new}`")


def count_plus_one(src: Source) -> Iterator[Site]:
    yield from _off_by_one("count-plus-one", 1, _counts(src), src)


def count_minus_one(src: Source) -> Iterator[Site]:
    yield from _off_by_one("count-minus-one", -1, _counts(src), src, floor=1)


def _armed_bytes(src: Source) -> Iterator[tuple[ast.expr, str]]:
    for call in src.calls():
        if isinstance(call.func, ast.Attribute) and call.func.attr == "arrive_expect_tx":
            kw = _keyword(call, "bytes")
            value = kw.value if kw is not None else (call.args[0] if call.args else None)
            if value is not None:
                yield value, "bytes"


def bytes_plus_one(src: Source) -> Iterator[Site]:
    yield from _off_by_one("bytes-plus-one", 1, _armed_bytes(src), src)


def bytes_minus_one(src: Source) -> Iterator[Site]:
    yield from _off_by_one("bytes-minus-one", -1, _armed_bytes(src), src, floor=0)


def stage_plus_one(src: Source) -> Iterator[Site]:
    staged: dict[str, str] = {}
    for kind in ("smem", "mbarrier"):
        for name, call in src.declarations(kind).items():
            kw = _keyword(call, "stages")
            if kw is not None and _int(kw.value) != 1:
                staged[name] = src.segment(kw.value)
    pipes = set(src.declarations("pipeline"))
    for node in ast.walk(src.schedule) if src.schedule else ():
        if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
                and node.value.id in staged):
            old = src.segment(node.slice)
            new = f"({old} + 1) % {staged[node.value.id]}"
            yield _replace(src, "stage-plus-one", node.slice, new,
                           f"`{node.value.id}[{old}]` becomes `{node.value.id}[{new}]`")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("stage", "full", "empty") and node.args
              and _receiver(node) in pipes):
            old = src.segment(node.args[0])
            yield _replace(src, "stage-plus-one", node.args[0], f"{old} + 1",
                           f"`{src.segment(node)}` indexes `{old} + 1`")


def _loop_stops(src: Source) -> Iterator[tuple[ast.expr, str]]:
    if src.schedule is None:
        return
    for node in ast.walk(src.schedule):
        if isinstance(node, ast.For) and isinstance(node.iter, ast.Call) and _is_lm(
                node.iter, "range") and node.iter.args:
            stop = node.iter.args[1] if len(node.iter.args) > 1 else node.iter.args[0]
            yield stop, "stop"


def bound_plus_one(src: Source) -> Iterator[Site]:
    yield from _off_by_one("bound-plus-one", 1, _loop_stops(src), src)


def bound_minus_one(src: Source) -> Iterator[Site]:
    yield from _off_by_one("bound-minus-one", -1, _loop_stops(src), src)


# ---- reordering -------------------------------------------------------------------------

def _is_release(src: Source, stmt: ast.stmt) -> bool:
    mb, _named, pipes = _kinds(src)
    found = _method(stmt)
    if found is None:
        return False
    name, call = found
    r = _receiver(call)
    return (r in pipes and name in ("release", "commit")) or (r in mb and name == "arrive")


def _swap(src: Source, operator: str, a: ast.stmt, b: ast.stmt, what: str) -> Site | None:
    """Exchange the text of two single-line statements of one body (`a` before `b`)."""
    if a.lineno != a.end_lineno or b.lineno != b.end_lineno:
        return None
    (sa, ea), (sb, eb) = src.span(a), src.span(b)
    return Site(operator, a.lineno, what,
                (Edit(sa, ea, src.text[sb:eb]), Edit(sb, eb, src.text[sa:ea])))


def swap_releases(src: Source) -> Iterator[Site]:
    for body, i in src.statements():
        if i + 1 < len(body) and _is_release(src, body[i]) and _is_release(src, body[i + 1]):
            a, b = body[i], body[i + 1]
            site = _swap(src, "swap-releases", a, b, f"swaps `{src.segment(a)}` and "
                         f"`{src.segment(b)}`")
            if site is not None and src.segment(a) != src.segment(b):
                yield site


def hoist_release(src: Source) -> Iterator[Site]:
    for body, i in src.statements():
        if i > 0 and _is_release(src, body[i]) and not _is_release(src, body[i - 1]) \
                and isinstance(body[i - 1], ast.Expr):
            site = _swap(src, "hoist-release", body[i - 1], body[i],
                         f"moves `{src.segment(body[i])}` above "
                         f"`{src.segment(body[i - 1])}`")
            if site is not None:
                yield site


def arm_after_copy(src: Source) -> Iterator[Site]:
    for body, i in src.statements():
        found = _method(body[i])
        if found is None or found[0] != "arrive_expect_tx":
            continue
        barrier = src.segment(found[1].func.value)  # type: ignore[attr-defined]
        last = i
        for j in range(i + 1, len(body)):
            nxt = _method(body[j])
            kw = _keyword(nxt[1], "barrier") if nxt is not None else None
            if kw is None or src.segment(kw.value) != barrier:
                break
            last = j
        if last == i or any(s.lineno != s.end_lineno for s in body[i:last + 1]):
            continue
        arm, after = body[i], body[last]
        (sa, _), (_, eb) = src.span(arm), src.span(after)
        # the arm's line goes after the last copy; the copies move up one line each
        lines = [src.segment(s) for s in body[i + 1:last + 1]] + [src.segment(arm)]
        indent = " " * arm.col_offset
        text = ("\n" + indent).join(lines)
        yield Site("arm-after-copy", arm.lineno,
                   f"moves `{src.segment(arm)}` after the {last - i} copies it arms",
                   (Edit(sa, eb, text),))


# ---- resources and identities -----------------------------------------------------------

def alias_buffers(src: Source) -> Iterator[Site]:
    smem = src.declarations("smem")
    by_type: dict[str, list[str]] = {}
    for name, call in smem.items():
        by_type.setdefault(src.segment(call), []).append(name)
    for names in by_type.values():
        if len(names) < 2:
            continue
        first, others = names[0], names[1:]
        for node in ast.walk(src.schedule) if src.schedule else ():
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) \
                    and node.value.id in others:
                yield _replace(src, "alias-buffers", node.value, first,
                               f"`{node.value.id}` at line {node.lineno} becomes `{first}` "
                               "(the same storage)")


def exceed_smem(src: Source) -> Iterator[Site]:
    for body, i in src.statements():
        stmt = body[i]
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and _is_lm(
                stmt.value, "launch"):
            end = src.offset(stmt.end_lineno or stmt.lineno, stmt.end_col_offset or 0)
            indent = " " * stmt.col_offset
            text = f'\n{indent}_huge = lm.smem("u8", ({HUGE_SMEM_BYTES},))'
            yield Site("exceed-smem", stmt.lineno, f"adds a {HUGE_SMEM_BYTES}-byte shared "
                       "buffer", (Edit(end, end, text),))


def exceed_registers(src: Source) -> Iterator[Site]:
    for name, call in src.declarations("role").items():
        kw = _keyword(call, "regs")
        n = _int(kw.value) if kw is not None else None
        if kw is None or n is None or n >= REGS_MAX:
            continue
        new = min(n + REGS_STEP, REGS_MAX)
        yield _replace(src, "exceed-registers", kw.value, str(new),
                       f"role `{name}` asks for {new} registers instead of {n}")


def barrier_id(src: Source) -> Iterator[Site]:
    for name, call in src.declarations("named_barrier").items():
        kw = _keyword(call, "id")
        n = _int(kw.value) if kw is not None else None
        if kw is not None and n is not None:
            yield _replace(src, "barrier-id", kw.value, str(n + 1),
                           f"named barrier `{name}` takes id {n + 1} instead of {n}")


def barrier_threads(src: Source) -> Iterator[Site]:
    for name, call in src.declarations("named_barrier").items():
        kw = _keyword(call, "threads")
        n = _int(kw.value) if kw is not None else None
        if kw is not None and n is not None and n > 32:
            yield _replace(src, "barrier-threads", kw.value, str(n - 32),
                           f"named barrier `{name}` counts {n - 32} threads instead of {n}")


OPERATORS: dict[str, Callable[[Source], Iterator[Site]]] = {
    "drop-wait": drop_wait,
    "drop-arrive": drop_arrive,
    "drop-release": drop_release,
    "drop-fence": drop_fence,
    "drop-sync": drop_sync,
    "flip-parity": flip_parity,
    "count-plus-one": count_plus_one,
    "count-minus-one": count_minus_one,
    "bytes-plus-one": bytes_plus_one,
    "bytes-minus-one": bytes_minus_one,
    "stage-plus-one": stage_plus_one,
    "bound-plus-one": bound_plus_one,
    "bound-minus-one": bound_minus_one,
    "swap-releases": swap_releases,
    "hoist-release": hoist_release,
    "alias-buffers": alias_buffers,
    "exceed-smem": exceed_smem,
    "exceed-registers": exceed_registers,
    "barrier-id": barrier_id,
    "barrier-threads": barrier_threads,
    "arm-after-copy": arm_after_copy,
}


DESCRIPTIONS = {
    "drop-wait": "remove a barrier or pipeline wait, an acquire, or an mma/store wait",
    "drop-arrive": "remove an mbarrier arrive or arrive_expect_tx",
    "drop-release": "remove a pipeline release or commit",
    "drop-fence": "remove a proxy fence or the barrier-init fence",
    "drop-sync": "remove a CTA, warp or named-barrier sync",
    "flip-parity": "wait on the other parity",
    "count-plus-one": "an mbarrier or pipeline arrival count one higher",
    "count-minus-one": "an mbarrier or pipeline arrival count one lower",
    "bytes-plus-one": "arm one byte more than the copies bring",
    "bytes-minus-one": "arm one byte less than the copies bring",
    "stage-plus-one": "index the next stage of a buffer, barrier or pipeline",
    "bound-plus-one": "one more loop iteration",
    "bound-minus-one": "one loop iteration fewer",
    "swap-releases": "swap two adjacent releases",
    "hoist-release": "release a stage before the statement that uses it",
    "alias-buffers": "one use of a buffer names another buffer of the same type",
    "exceed-smem": "add a shared buffer larger than any target's capacity",
    "exceed-registers": "a role asks for 64 more registers",
    "barrier-id": "a named barrier takes the next id",
    "barrier-threads": "a named barrier counts one warp fewer",
    "arm-after-copy": "arm the barrier's bytes after the copies that complete on it",
}


def apply(text: str, site: Site) -> str:
    """`text` with the site's edits made (edits never overlap)."""
    out = text
    for edit in sorted(site.edits, key=lambda e: e.start, reverse=True):
        out = out[:edit.start] + edit.text + out[edit.end:]
    return out


def sites(text: str, operator: str) -> list[Site]:
    """The sites of one operator in `text`, in source order."""
    if operator not in OPERATORS:
        raise KeyError(operator)
    found = list(OPERATORS[operator](Source(text)))
    return sorted(found, key=lambda s: (s.edits[0].start, s.what))


def mutants(text: str, source: str, operators: list[str] | None = None) -> list[Mutant]:
    """Every mutant of `text` by the chosen operators (all by default), label comments
    (`# expect: ...`) removed: a mutant's label is its dynamic outcome, written by
    whoever stores it."""
    out = []
    for op in operators or list(OPERATORS):
        for index, site in enumerate(sites(text, op)):
            mutated = strip_labels(apply(text, site))
            if mutated != strip_labels(text):
                out.append(Mutant(source, op, index, site.line, site.what, mutated))
    return out


def mutant_at(text: str, source: str, operator: str, index: int) -> Mutant | None:
    """The mutant one stored entry names, or None when the origin has no such site."""
    found = sites(text, operator)
    if not 0 <= index < len(found):
        return None
    site = found[index]
    return Mutant(source, operator, index, site.line, site.what,
                  strip_labels(apply(text, site)))


def strip_labels(text: str) -> str:
    """`text` with every `# expect:` comment blanked (lines and columns are kept)."""
    return strip_expectations(text)
