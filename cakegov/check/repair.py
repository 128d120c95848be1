"""Applying a rule's proposed repair (cakegov.plugin.Repair) to a schedule's source.

This is trusted engine code: rules never see the source. A repair becomes a list of text
edits (span + replacement) written in the schedule's own spelling: a parity fix reuses
the text of the wait's own barrier index (`(k // S) % 2` where the source says
`full[k % S]`), an inserted wait reuses the barrier expression another statement already
names. The edits are what a finding offers as its machine-applicable fix; the check
context applies them, re-analyses the result and keeps the fix only when the anomaly is
gone (cakegov/check/context.py, `attempt`)."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from itertools import pairwise
from typing import Literal

from pydantic import BaseModel, ConfigDict

from cakegov.ir.nodes import Call, For, Node, Schedule, Span
from cakegov.ir.parse import _NEWLINE, walk_statements
from cakegov.plugin import Repair


class Edit(BaseModel):
    """Replace the text of `span` (1-based lines and columns, end exclusive) by `text`;
    an empty span (start == end) inserts."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")
    span: Span
    text: str


class Fix(BaseModel):
    """A change that removes the defect a finding reports. `machine`: re-checked, safe to
    apply as is; `maybe`: removes the anomaly but may change what the kernel computes;
    `none`: advice only."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")
    description: str
    applicability: Literal["machine", "maybe", "none"] = "machine"
    edits: tuple[Edit, ...] = ()


class RepairError(Exception):
    """The repair does not apply to this schedule (no such statement, argument, form)."""


@dataclass
class _Stmt:
    node: Node
    ast_node: ast.stmt
    loops: tuple[For, ...]


class SourceEditor:
    """Turns repairs into edits of one schedule's source."""

    def __init__(self, source: str, schedule: Schedule):
        self.source = source
        self.lines = source_lines_keepends(source)
        self.schedule = schedule
        self.tree = ast.parse(source)
        self._by_line: dict[int, ast.stmt] = {}
        self._by_pos: dict[tuple[int, int], ast.stmt] = {}  # `a(); b()` share a line
        for node in ast.walk(self.tree):
            if isinstance(node, ast.stmt):
                self._by_line.setdefault(node.lineno, node)
                self._by_pos.setdefault(
                    (node.lineno, self._col(node.lineno, node.col_offset)), node)
        self._stmts: dict[str, _Stmt] = {}
        for decl in schedule.resources:
            self._add(decl, ())
        for role in schedule.roles:
            for stmt, loops in walk_statements(role.body):
                self._add(stmt, loops)

    def _add(self, node: Node, loops: tuple[For, ...]) -> None:
        tree_node = self._by_pos.get((node.span.line, node.span.col)) or \
            self._by_line.get(node.span.line)
        if tree_node is not None:
            self._stmts[node.path] = _Stmt(node, tree_node, loops)

    # ---- positions ------------------------------------------------------------------

    def _col(self, line: int, byte_offset: int) -> int:
        raw = self.lines[line - 1].encode("utf-8")[:byte_offset]
        return len(raw.decode("utf-8", errors="replace")) + 1

    def _span(self, node: ast.AST) -> Span:
        return Span(line=node.lineno, col=self._col(node.lineno, node.col_offset),
                    end_line=node.end_lineno or node.lineno,
                    end_col=self._col(node.end_lineno or node.lineno, node.end_col_offset or 0))

    def text(self, node: ast.AST) -> str:
        """The source text of `node`: ast.get_source_segment's (unpadded), from the lines
        split once (that function splits the whole source again on every call: 8 s of a
        corpus check went there)."""
        end_line, end_col = getattr(node, "end_lineno", None), getattr(node, "end_col_offset",
                                                                      None)
        if end_line is None or end_col is None:
            return ""
        first, last = node.lineno - 1, end_line - 1  # type: ignore[attr-defined]
        col = node.col_offset  # type: ignore[attr-defined]
        if first == last:
            return self.lines[first].encode("utf-8")[col:end_col].decode("utf-8")
        head = self.lines[first].encode("utf-8")[col:].decode("utf-8")
        tail = self.lines[last].encode("utf-8")[:end_col].decode("utf-8")
        return "".join([head, *self.lines[first + 1:last], tail])

    def stmt(self, path: str) -> _Stmt:
        if path not in self._stmts:
            raise RepairError(f"no statement at {path}")
        return self._stmts[path]

    @staticmethod
    def _call(node: ast.stmt) -> ast.Call:
        value = getattr(node, "value", None)
        if isinstance(value, ast.Call):
            return value
        raise RepairError("the statement is not a call")

    def indent(self, line: int) -> str:
        text = self.lines[line - 1]
        return text[:len(text) - len(text.lstrip())]

    def _line_start(self, line: int) -> Span:
        return Span(line=line, col=1, end_line=line, end_col=1)

    def _after_line(self, line: int) -> Span:
        if line >= len(self.lines):
            end = len(self.lines[-1]) + 1
            return Span(line=len(self.lines), col=end, end_line=len(self.lines), end_col=end)
        return self._line_start(line + 1)

    # ---- repairs --------------------------------------------------------------------

    def edits(self, repair: Repair) -> list[Edit]:
        kind = repair.kind
        if kind == "set_arg":
            if repair.form == "binding":
                return [self._set_binding(repair.path, repair.arg, repair.text)]
            return [self._set_arg(repair.path, repair.arg, repair.text)]
        if kind == "set_parity":
            st = self.stmt(repair.path)
            call = self._call(st.ast_node)
            parity = next((k.value for k in call.keywords if k.arg == "parity"), None)
            if parity is None and call.args:
                parity = call.args[0]
            if parity is None:
                raise RepairError("the wait has no parity")
            return [Edit(span=self._span(parity), text=self.parity_text(st, call, parity,
                                                                         repair.form))]
        if kind == "insert":
            return [self._insert(repair.path, repair.text, repair.after)]
        if kind == "delete":
            return [self._delete(repair.path)]
        if kind == "move_after":
            if repair.arg:  # a run of statements, from `arg` through `path`
                return self._move_run(repair.arg, repair.path, repair.other)
            st = self.stmt(repair.path)
            code = self.text(st.ast_node)
            return [self._delete(repair.path), self._insert(repair.other, code, True)]
        if kind == "declare":
            return [self._declare(repair.text)]
        if kind == "copy_bound":
            return [self._copy_bound(repair.path, repair.other)]
        if kind == "carry_phase":
            return self._carry_phase(repair.path, repair.text)
        if kind == "insert_wait_like":
            return [self._insert(repair.path, self._wait_like(repair.other, repair.form),
                                 repair.after)]
        if kind == "insert_pipeline_op":
            ring, op = repair.text, repair.form
            if op == "release_last":  # after loop `path`: release the last iteration
                return [self._release_last(repair.arg or repair.path, ring, repair.other,
                                           repair.path)]
            source = self.stmt(repair.other or repair.path).ast_node
            iteration = self._ring_iteration(source, ring)
            return [self._insert(repair.path, f"{ring}.{op}({iteration})", repair.after)]
        if kind == "like_loop":
            return [self._like_loop(repair.path, repair.other, repair.form)]
        if kind == "reindex_last":
            return [self._reindex_last(repair.path, repair.other, repair.form)]
        if kind == "restage":
            return [self._restage(repair.path, repair.arg, repair.other, repair.form)]
        raise RepairError(f"unknown repair {kind}")

    def _index_node(self, call: ast.Call, selector: str) -> ast.expr:
        """The ring position a call names at `selector`: `recv` the receiver's index
        (`bar[E].wait(...)`) or a pipeline operation's iteration (`ring.wait(E)`),
        `barrier` the index of `barrier=bar[E]` or the iteration of `barrier=ring.full(E)`,
        `view:<buffer>` the stage of the one view of `buffer` (`a_s[E]`, or E of
        `a_s[ring.stage(E)]`)."""
        node: ast.AST | None = None
        if selector == "recv":
            func = call.func
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Subscript):
                node = func.value.slice
            elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and \
                    len(call.args) == 1:
                node = call.args[0]
        elif selector == "barrier":
            node = next((k.value for k in call.keywords if k.arg == "barrier"), None)
            if isinstance(node, ast.Subscript):
                node = node.slice
            elif isinstance(node, ast.Call) and len(node.args) == 1:
                node = node.args[0]
            else:
                node = None
        elif selector.startswith("view:"):
            views = [n for n in ast.walk(call) if isinstance(n, ast.Subscript)
                     and isinstance(n.value, ast.Name) and n.value.id == selector[5:]]
            if len(views) == 1:
                node = views[0].slice
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                        node.func.attr == "stage" and len(node.args) == 1:
                    node = node.args[0]
        if not isinstance(node, ast.expr):
            raise RepairError(f"the statement names no ring position at {selector}")
        return node

    def _restage(self, path: str, selector: str, other: str, other_selector: str) -> Edit:
        mine = self._index_node(self._call(self.stmt(path).ast_node), selector)
        theirs = self._index_node(self._call(self.stmt(other).ast_node), other_selector)
        text = self.text(theirs)
        if self.text(mine) == text:
            raise RepairError("the statement already names that position")
        return Edit(span=self._span(mine), text=text)

    @staticmethod
    def _barrier_index(call: ast.Call) -> tuple[str, ast.expr] | None:
        """`bar[index].op(...)`: the barrier's name and its index expression."""
        func = call.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Subscript) and \
                isinstance(func.value.value, ast.Name):
            return func.value.value.id, func.value.slice
        return None

    @staticmethod
    def _receiver(call: ast.Call) -> tuple[str, str] | None:
        """`bar[i].op(...)` or `ring.op(...)`: (receiver name, method)."""
        func = call.func
        if not isinstance(func, ast.Attribute):
            return None
        base = func.value.value if isinstance(func.value, ast.Subscript) else func.value
        return (base.id, func.attr) if isinstance(base, ast.Name) else None

    def _loop_stop(self, loop: ast.AST) -> tuple[str, str]:
        if not (isinstance(loop, ast.For) and isinstance(loop.iter, ast.Call)
                and loop.iter.args and isinstance(loop.target, ast.Name)):
            raise RepairError("the loop is not a loop over lm.range(...)")
        args = loop.iter.args
        if len(args) > 2:
            raise RepairError("the loop does not have step 1")
        return loop.target.id, _paren(self.text(args[1] if len(args) > 1 else args[0]))

    @staticmethod
    def _substitute(node: ast.AST, var: str, value: str) -> str:
        class Swap(ast.NodeTransformer):
            def visit_Name(self, name: ast.Name) -> ast.AST:
                if name.id == var:
                    return ast.parse(f"({value})", mode="eval").body
                return name

        return ast.unparse(Swap().visit(ast.parse(ast.unparse(node), mode="eval").body))

    def _like_loop(self, path: str, loop_path: str, form: str) -> Edit:
        call = self._call(self.stmt(path).ast_node)
        mine = self._receiver(call)
        loop = self.stmt(loop_path).ast_node
        var, stop = self._loop_stop(loop)
        twins = sorted((n for n in ast.walk(loop) if isinstance(n, ast.Call)
                        and self._receiver(n) == mine), key=lambda n: (n.lineno, n.col_offset))
        if mine is None or not twins:
            raise RepairError("the loop makes no such call")
        text = self._substitute(twins[0], var, stop if form == "next" else f"{stop} - 1")
        if text == ast.unparse(call):
            raise RepairError("the call already names that position")
        return Edit(span=self._span(call), text=text)

    def _reindex_last(self, path: str, loop_path: str, form: str) -> Edit:
        call = self._call(self.stmt(path).ast_node)
        mine = self._barrier_index(call)
        loop = self.stmt(loop_path).ast_node
        if mine is None or not (isinstance(loop, ast.For) and isinstance(loop.iter, ast.Call)
                                and loop.iter.args and isinstance(loop.target, ast.Name)):
            raise RepairError("reindex_last needs `bar[i].arrive()` after an lm.range loop")
        args = loop.iter.args
        if len(args) > 2:
            raise RepairError("reindex_last needs a loop with step 1")
        stop = _paren(self.text(args[1] if len(args) > 1 else args[0]))
        inner = [n for n in ast.walk(loop) if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Attribute) and self._barrier_index(n)]
        inner.sort(key=lambda n: (n.lineno, n.col_offset))
        if form == "release":
            found = [n for n in inner if n.func.attr == "arrive"
                     and self._barrier_index(n)[0] == mine[0]]
            value = stop
        else:
            found = [n for n in inner if n.func.attr == "wait"]
            value = f"{stop} - 1"
        if not found:
            raise RepairError(f"the loop has no {form} to take the index from")
        index = self._barrier_index(found[0])[1]
        var = loop.target.id

        class Swap(ast.NodeTransformer):
            def visit_Name(self, node: ast.Name) -> ast.AST:
                if node.id == var:
                    return ast.parse(f"({value})", mode="eval").body
                return node

        text = ast.unparse(Swap().visit(ast.parse(ast.unparse(index), mode="eval").body))
        if text == ast.unparse(mine[1]):
            raise RepairError("the index is already the last iteration's")
        return Edit(span=self._span(mine[1]), text=text)

    def _set_arg(self, path: str, arg: str, text: str) -> Edit:
        st = self.stmt(path)
        call = self._call(st.ast_node)
        for kw in call.keywords:
            if kw.arg == arg:
                return Edit(span=self._span(kw.value), text=text)
        if isinstance(st.node, Call) and arg in st.node.arg_spans:
            return Edit(span=st.node.arg_spans[arg], text=text)
        end = self._span(call)
        at = Span(line=end.end_line, col=end.end_col - 1, end_line=end.end_line,
                  end_col=end.end_col - 1)
        sep = ", " if call.args or call.keywords else ""
        return Edit(span=at, text=f"{sep}{arg}={text}")

    def _release_last(self, path: str, ring: str, other: str, anchor: str) -> Edit:
        """After statement `anchor`: `ring.release(i)` for the iteration `i` that statement
        `other` of loop `path` names through `ring` at the loop's last value (the loop
        variable itself when `other` is empty)."""
        loop = self.stmt(path).ast_node
        if not (isinstance(loop, ast.For) and isinstance(loop.iter, ast.Call)
                and loop.iter.args and isinstance(loop.target, ast.Name)):
            raise RepairError("release_last needs a loop over lm.range(...)")
        args = loop.iter.args
        if len(args) > 2:
            raise RepairError("release_last needs a loop with step 1")
        stop = self.text(args[1] if len(args) > 1 else args[0])
        last = f"{_paren(stop)} - 1"
        if not other:
            return self._insert(anchor, f"{ring}.release({last})", True)
        iteration = ast.parse(self._ring_iteration(self.stmt(other).ast_node, ring),
                              mode="eval").body
        var = loop.target.id

        class Swap(ast.NodeTransformer):
            def visit_Name(self, node: ast.Name) -> ast.AST:
                if node.id == var:
                    return ast.parse(f"({last})", mode="eval").body
                return node

        text = ast.unparse(Swap().visit(iteration))
        return self._insert(anchor, f"{ring}.release({text})", True)

    def _set_binding(self, path: str, arg: str, text: str) -> Edit:
        """Like set_arg, but when the argument is a name bound at the top of the schedule
        function (`S = 2`, `BM, S = 64, 2`), change the binding, so every use agrees."""
        call = self._call(self.stmt(path).ast_node)
        value = next((k.value for k in call.keywords if k.arg == arg), None)
        if not isinstance(value, ast.Name):
            return self._set_arg(path, arg, text)
        fn = next((n for n in self.tree.body if isinstance(n, ast.FunctionDef)), None)
        for stmt in fn.body if fn is not None else ():
            if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
                continue
            target, rhs = stmt.targets[0], stmt.value
            if isinstance(target, ast.Name) and target.id == value.id:
                return Edit(span=self._span(rhs), text=text)
            if isinstance(target, ast.Tuple) and isinstance(rhs, ast.Tuple):
                for name, item in zip(target.elts, rhs.elts, strict=False):
                    if isinstance(name, ast.Name) and name.id == value.id:
                        return Edit(span=self._span(item), text=text)
        raise RepairError(f"`{value.id}` is not bound at the top of the schedule")

    def _insert(self, path: str, text: str, after: bool) -> Edit:
        st = self.stmt(path)
        node = st.ast_node
        line = node.lineno
        pad = self.indent(line)
        if after:
            end = node.end_lineno or line
            if isinstance(node, ast.For):  # after the loop: at the loop's indentation
                end = max(getattr(n, "end_lineno", end) or end for n in ast.walk(node))
            return Edit(span=self._after_line(end), text=f"{pad}{text}\n")
        return Edit(span=self._line_start(line), text=f"{pad}{text}\n")

    def _move_run(self, first: str, last: str, other: str) -> list[Edit]:
        """Move the consecutive statements `first` .. `last` of one body (which may share
        lines, `a(); b()`) after `other`, as the source spells them."""
        a, b = self.stmt(first).ast_node, self.stmt(last).ast_node
        body = self._parent_body(a)
        if body is None or b not in body or body.index(b) < body.index(a):
            raise RepairError("not a run of statements of one body")
        if len(body) == body.index(b) - body.index(a) + 1:
            raise RepairError("the run is the whole body")
        start, end = a.lineno, b.end_lineno or b.lineno
        lines = self.lines[start - 1:end]
        code = "\n".join(line[len(self.indent(start)):] if line.startswith(self.indent(start))
                         else line.lstrip() for line in lines)
        span = Span(line=start, col=1, end_line=end + 1, end_col=1) if \
            end < len(self.lines) else Span(line=start, col=1, end_line=end,
                                             end_col=len(self.lines[end - 1]) + 1)
        if any(self._overlaps(n, start, end) for n in body if n is not a and n is not b
               and not body.index(a) < body.index(n) < body.index(b)):
            raise RepairError("another statement shares the run's lines")
        return [Edit(span=span, text=""), self._insert(other, code, True)]

    @staticmethod
    def _overlaps(node: ast.stmt, start: int, end: int) -> bool:
        return node.lineno <= end and (node.end_lineno or node.lineno) >= start

    def _delete(self, path: str) -> Edit:
        st = self.stmt(path)
        node = st.ast_node
        first, last = node.lineno, node.end_lineno or node.lineno
        parent = self._parent_body(node)
        if parent is not None and len(parent) == 1:
            span = Span(line=first, col=self._col(first, node.col_offset), end_line=last,
                        end_col=self._col(last, node.end_col_offset or 0))
            return Edit(span=span, text="pass")
        span = Span(line=first, col=1, end_line=last + 1, end_col=1) if \
            last < len(self.lines) else Span(line=first, col=1, end_line=last,
                                               end_col=len(self.lines[last - 1]) + 1)
        return Edit(span=span, text="")

    def _parent_body(self, target: ast.stmt) -> list[ast.stmt] | None:
        for node in ast.walk(self.tree):
            for name in ("body", "orelse"):
                body = getattr(node, name, None)
                if isinstance(body, list) and target in body:
                    return body
        return None

    def _declare(self, text: str) -> Edit:
        fn = next((n for n in self.tree.body if isinstance(n, ast.FunctionDef)), None)
        if fn is None:
            raise RepairError("no schedule function")
        last = None
        for stmt in fn.body:
            if isinstance(stmt, ast.With):
                break
            last = stmt
        if last is None:
            raise RepairError("no declaration to follow")
        pad = self.indent(last.lineno)
        return Edit(span=self._after_line(last.end_lineno or last.lineno), text=f"{pad}{text}\n")

    def _copy_bound(self, path: str, other: str) -> Edit:
        mine, theirs = self.stmt(path).ast_node, self.stmt(other).ast_node
        if not (isinstance(mine, ast.For) and isinstance(theirs, ast.For)):
            raise RepairError("copy_bound needs two loops")
        a, b = mine.iter, theirs.iter
        if not (isinstance(a, ast.Call) and isinstance(b, ast.Call) and a.args and b.args):
            raise RepairError("loops over lm.range(...)")
        stop_a = a.args[1] if len(a.args) > 1 else a.args[0]
        stop_b = b.args[1] if len(b.args) > 1 else b.args[0]
        return Edit(span=self._span(stop_a), text=self.text(stop_b))

    def _carry_phase(self, path: str, counter: str) -> list[Edit]:
        """Loop `path` advances `counter`, and the ring positions of its body (barrier and
        buffer indices, `parity=`, the iterations given to a pipeline) read the counter
        instead of the loop variable; coordinates and conditions keep the variable."""
        loop = self.stmt(path).ast_node
        if not (isinstance(loop, ast.For) and isinstance(loop.iter, ast.Call)
                and isinstance(loop.target, ast.Name) and loop.iter.args):
            raise RepairError("carry_phase needs a loop over lm.range(...)")
        if any(kw.arg == "counter" for kw in loop.iter.keywords):
            raise RepairError("the loop already advances a counter")
        var = loop.target.id
        pipelines = {d.name for d in self.schedule.resources if d.kind == "pipeline"}
        names: dict[tuple[int, int], ast.Name] = {}

        def take(node: ast.AST) -> None:
            for sub in ast.walk(node):
                if isinstance(sub, ast.Name) and sub.id == var:
                    names[(sub.lineno, sub.col_offset)] = sub

        for stmt in loop.body:
            for node in ast.walk(stmt):
                if isinstance(node, ast.Subscript):
                    take(node.slice)
                elif isinstance(node, ast.keyword) and node.arg == "parity":
                    take(node.value)
                elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                        isinstance(node.func.value, ast.Name) and \
                        node.func.value.id in pipelines:
                    for arg in node.args:
                        take(arg)
        if not names:
            raise RepairError("the loop body derives no ring position from its variable")
        end = self._span(loop.iter)
        at = Span(line=end.end_line, col=end.end_col - 1, end_line=end.end_line,
                  end_col=end.end_col - 1)
        edits = [Edit(span=at, text=f", counter={counter}")]
        edits += [Edit(span=self._span(n), text=counter) for _, n in sorted(names.items())]
        return edits

    # ---- expressions in the schedule's own spelling --------------------------------

    @staticmethod
    def _receiver_index(call: ast.Call) -> ast.expr | None:
        func = call.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Subscript):
            return func.value.slice
        return None

    def _mod_parts(self, index: ast.expr | None) -> tuple[str, str] | None:
        if isinstance(index, ast.BinOp) and isinstance(index.op, ast.Mod):
            return self.text(index.left), self.text(index.right)
        return None

    def parity_text(self, st: _Stmt, call: ast.Call, parity: ast.expr, form: str) -> str:
        if form in ("0", "1"):
            return form
        if form == "flip":
            if isinstance(parity, ast.Constant) and parity.value in (0, 1):
                return str(1 - parity.value)
            if isinstance(parity, ast.BinOp) and isinstance(parity.op, ast.Mod):
                left = parity.left
                if isinstance(left, ast.BinOp) and isinstance(left.op, ast.Add) and \
                        isinstance(left.right, ast.Constant) and left.right.value == 1:
                    return f"{_paren(self.text(left.left))} % 2"
                return f"({self.text(left)} + 1) % 2"
            return f"({self.text(parity)} + 1) % 2"
        if form in ("ring", "ring+1"):
            parts = self._mod_parts(self._receiver_index(call))
            if parts is None:
                raise RepairError("the barrier index is not `E % m`")
            plus = " + 1" if form == "ring+1" else ""
            return f"({_paren(parts[0])} // {parts[1]}{plus}) % 2"
        if form in ("ordinal", "ordinal+1"):
            if not st.loops:
                raise RepairError("the wait is not in a loop")
            loop = st.loops[-1]
            start = self._loop_start_text(loop)
            ordinal = loop.var if start in ("", "0") else f"{loop.var} - {_paren(start)}"
            plus = " + 1" if form == "ordinal+1" else ""
            return f"({ordinal}{plus}) % 2" if plus or ordinal != loop.var else f"{ordinal} % 2"
        raise RepairError(f"unknown parity form {form}")

    def _loop_start_text(self, loop: For) -> str:
        st = self._stmts.get(loop.path)
        if st is None or not isinstance(st.ast_node, ast.For):
            return ""
        it = st.ast_node.iter
        if isinstance(it, ast.Call) and len(it.args) >= 2:
            return self.text(it.args[0])
        return "0"

    def _barrier_text(self, path: str) -> tuple[str, ast.expr | None]:
        st = self.stmt(path)
        call = self._call(st.ast_node)
        for kw in call.keywords:
            if kw.arg == "barrier":
                node = kw.value
                index = node.slice if isinstance(node, ast.Subscript) else None
                return self.text(node), index
        func = call.func
        if isinstance(func, ast.Attribute):
            node = func.value
            index = node.slice if isinstance(node, ast.Subscript) else None
            return self.text(node), index
        raise RepairError("the statement names no barrier")

    def _wait_like(self, other: str, form: str) -> str:
        barrier, index = self._barrier_text(other)
        if ".full(" in barrier or ".empty(" in barrier:
            raise RepairError("pipeline barriers are waited on through the pipeline")
        parts = self._mod_parts(index)
        if form in ("ring", "ring+1"):
            if parts is None:
                raise RepairError("the barrier index is not `E % m`")
            plus = " + 1" if form == "ring+1" else ""
            parity = f"({_paren(parts[0])} // {parts[1]}{plus}) % 2"
        elif form in ("0", "1"):
            parity = form
        else:
            raise RepairError(f"unknown parity form {form}")
        return f"{barrier}.wait(parity={parity})"

    def _ring_iteration(self, node: ast.stmt, ring: str) -> str:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and \
                    isinstance(sub.func.value, ast.Name) and sub.func.value.id == ring and \
                    sub.func.attr in ("stage", "full", "empty", "acquire", "release", "wait",
                                      "commit") and sub.args:
                return self.text(sub.args[0])
        raise RepairError(f"the statement names no iteration of `{ring}`")


def _paren(text: str) -> str:
    simple = text.replace("_", "").replace(".", "").isalnum()
    return text if simple else f"({text})"


def source_lines_keepends(source: str) -> list[str]:
    """The lines of `source` with their line ends, as Python's tokenizer counts them."""
    return [source[a:b] for a, b in pairwise(line_starts(source))]


class EditConflict(ValueError):
    """Two edits overlap: no order of applying them means what both say."""


def line_starts(source: str) -> list[int]:
    """The offset of every line's first character, lines as Python's tokenizer counts
    them (`\n`, `\r\n`, `\r`; a form feed is not a line break), plus the end."""
    starts = [0]
    for m in _NEWLINE.finditer(source):
        starts.append(m.end())
    if starts[-1] != len(source):
        starts.append(len(source))
    return starts


def edit_offsets(source: str, edits: list[Edit] | tuple[Edit, ...],
                 starts: list[int] | None = None) -> list[tuple[int, int]]:
    """Character offsets [start, end) of each edit's span in `source` (a line past the
    end is the end of the text; a column past the end of its line, that line's end)."""
    starts = line_starts(source) if starts is None else starts
    last = len(starts) - 1

    def offset(line: int, col: int) -> int:
        if line > last:
            return len(source)
        return min(starts[line - 1] + col - 1, starts[line])

    out = []
    for e in edits:
        a, b = offset(e.span.line, e.span.col), offset(e.span.end_line, e.span.end_col)
        if b < a:
            raise EditConflict(f"edit ends before it starts: {e.span}")
        out.append((a, b))
    return out


def overlapping(spans: list[tuple[int, int]]) -> tuple[int, int] | None:
    """Indices of two overlapping ranges (an insertion strictly inside a replaced range
    overlaps it; one at either end does not), or None."""
    order = sorted(range(len(spans)), key=lambda i: spans[i])
    for x, y in pairwise(order):
        if spans[y][0] < spans[x][1]:  # sorted by start: then the ends never decrease
            return (x, y)
    return None


def apply_edits(source: str, edits: list[Edit] | tuple[Edit, ...]) -> str:
    """`source` with every edit applied. Edits must not overlap (EditConflict); at one
    position, insertions go in the order given, before a replacement starting there."""
    spans = edit_offsets(source, edits)
    clash = overlapping(spans)
    if clash is not None:
        raise EditConflict(f"edits {clash[0]} and {clash[1]} overlap")
    out = source
    order = sorted(range(len(edits)), key=lambda i: (spans[i][0], spans[i][1] > spans[i][0], i))
    for i in reversed(order):
        a, b = spans[i]
        out = out[:a] + edits[i].text + out[b:]
    return out
