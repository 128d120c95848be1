"""What a rule sees: the schedule, the target, the workload, derived facts, and a way to
make findings. Rules get read-only data and never print or raise for a defect."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from cakegov.analysis.execute import Anomaly
from cakegov.analysis.protocol import Bounds, ProtocolResult, analyze
from cakegov.check.docs_url import rule_url
from cakegov.check.findings import Finding
from cakegov.check.repair import Fix, RepairError, SourceEditor, apply_edits
from cakegov.check.rulebook import PrimitivePlugin, RulePlugin, Target
from cakegov.check.spelling import Spelling
from cakegov.corpus.workloads import Workload
from cakegov.ir.dtypes import dtype_bytes
from cakegov.ir.expr import (
    Const,
    Env,
    EvalError,
    Expr,
    Interval,
    bounds,
    evaluate,
    free_symbols,
    step_expr,
)
from cakegov.ir.nodes import (
    Call,
    Decl,
    ExprValue,
    For,
    FragmentDecl,
    Node,
    PipelineDecl,
    RoleDecl,
    Schedule,
    SmemDecl,
    Span,
    Warps,
)
from cakegov.ir.parse import walk_statements
from cakegov.lower.derive import LoweringError, lower
from cakegov.lower.kernel import LoweredKernel
from cakegov.lower.layout import SmemLayout, smem_layout
from cakegov.plugin import Effects, Repair


def loose_key(anomaly: Anomaly) -> tuple[str, str]:
    """An anomaly's identity across a change of the source (paths and lines shift)."""
    return (anomaly.kind, anomaly.resource)


@dataclass(frozen=True)
class Attempt:
    """A repair that removes anomalies: the fix, and the anomalies it removes."""

    fix: Fix
    removed: tuple[Anomaly, ...]
    remaining: tuple[Anomaly, ...]


@dataclass(frozen=True)
class CallSite:
    """A primitive call with the role that runs it and its enclosing loops; `subset`: the
    role-relative warps of its `with lm.warps(...)` block (None: every warp)."""

    call: Call
    role: RoleDecl
    loops: tuple[For, ...]
    subset: tuple[int, ...] | None = None

    @property
    def warps(self) -> tuple[int, ...]:
        """The role-relative warps that execute the call."""
        if self.subset is not None:
            return self.subset
        return tuple(range(self.role.warp_stop - self.role.warp_start))


class ResourceView:
    """Declarations by name; the `view` argument of primitive `effects`."""

    def __init__(self, schedule: Schedule, workload: Workload | None):
        self._decls = {d.name: d for d in schedule.resources}
        self._workload = workload

    def decl(self, name: str) -> Decl | None:
        return self._decls.get(name)

    def tensor_dtype(self, name: str) -> str:
        if self._workload is None or name not in self._workload.tensors:
            return "f32"
        return self._workload.tensors[name][0]

    def tensor_dims(self, name: str) -> tuple[str, ...]:
        if self._workload is None or name not in self._workload.tensors:
            return ()
        return self._workload.tensors[name][1]

    @staticmethod
    def dtype_bytes(dtype: str) -> int:
        return dtype_bytes(dtype)

    @staticmethod
    def bytes_of(decl: Decl | None) -> int:
        if isinstance(decl, SmemDecl):
            return decl.stage_bytes
        if isinstance(decl, FragmentDecl):
            n = 1
            for d in decl.shape:
                n *= d
            return n * dtype_bytes(decl.dtype)
        return 0

    @staticmethod
    def static_value(value: Any) -> int | None:
        if isinstance(value, ExprValue) and isinstance(value.expr, Const):
            return value.expr.value
        return None


class CheckContext:
    """Facts about one schedule, shared by all rules that check it."""

    def __init__(
        self,
        schedule: Schedule,
        file: str,
        target: Target | None,
        workload: Workload | None,
        primitives: dict[str, PrimitivePlugin],
        known_targets: tuple[str, ...] = (),
    ):
        self.schedule = schedule
        self.file = file
        self.target = target
        self.workload = workload
        self.primitives = primitives
        # Names of every target in the rulebook; `target` is None when the schedule's
        # target is not among them.
        self.known_targets = known_targets
        self.view = ResourceView(schedule, workload)
        self._effects: dict[str, Effects] = {}
        self.findings: list[Finding] = []  # findings of the rules that ran before this one
        # the source and a way to analyse an edited copy: engine-only, never for rules
        self._source: str | None = None
        self._reanalyze: Any = None
        self._attempts: dict[str, tuple[Anomaly, ...] | None] = {}
        self._editor: SourceEditor | None = None
        self._tried = 0  # repairs attempted, against MAX_REPAIR_ATTEMPTS
        self._full = 0  # edited sources analysed whole, against MAX_REANALYSES
        self._rule_base = 0  # of them, before the running rule started
        self._rule_units = (0, 0)  # work.repairs and work.race then
        self.work = Work()  # analysis work units of this check, against DIAGNOSIS_FACTOR
        self.strict = False  # accept only repairs that leave no anomaly (runner, pass 1)

    # ---- declarations ----------------------------------------------------------------

    def decl(self, name: str) -> Decl | None:
        return self.view.decl(name)

    def decls(self, kind: type) -> list[Any]:
        return [d for d in self.schedule.resources if isinstance(d, kind)]

    @cached_property
    def layout(self) -> SmemLayout:
        return smem_layout(self.schedule)

    @cached_property
    def lowered(self) -> LoweredKernel | None:
        """The schedule lowered (cakegov/lower/derive.py), or None when it cannot be
        (unresolved names, no launch, a construct other rules reject)."""
        if self.schedule.unresolved or self.schedule.launch is None or self.workload is None:
            return None
        limits = {k: v.value for k, v in self.target.limits.items()} if self.target else {}
        try:
            return lower(self.schedule, self.effects, self.workload.tensors, limits,
                         outputs=self.workload.outputs, size_names=self.workload.sizes)
        except LoweringError as exc:
            self.lowering_error = str(exc)
            return None

    lowering_error: str | None = None

    @cached_property
    def protocol(self) -> ProtocolResult | None:
        """The protocol analysis (cakegov/analysis/protocol.py), shared by the P rules."""
        kernel = self.lowered
        if kernel is None:
            return None
        result = analyze(kernel, self.shapes, self.protocol_bounds, derive=self._derive)
        self.work.base += units(result)
        self.work.base_race += result.work
        return result

    def protocol_only(self, pairs) -> ProtocolResult | None:
        """The protocol analysis of just these (sizes, CTA) programs."""
        kernel = self.lowered
        if kernel is None:
            return None
        return analyze(kernel, self.shapes, self.protocol_bounds, only=pairs,
                       derive=self._derive)

    protocol_bounds: Bounds = Bounds()

    @property
    def _derive(self):
        return self.workload.derive if self.workload is not None else None

    # ---- the schedule's own spelling (for prose) --------------------------------------

    @cached_property
    def _spelling(self) -> Spelling | None:
        return Spelling(self._source) if self._source is not None else None

    def spelling(self, of: Any, arg: str | None = None) -> str | None:
        """How the schedule writes an expression, for messages and hints: `of` is a value
        of a call (`call.args["parity"]`) or, with `arg`, a declaration or call whose
        keyword argument `arg` is wanted. The text is re-printed from the source's syntax
        tree (names as written, comments dropped); None when it cannot be found."""
        if self._spelling is None:
            return None
        if arg is not None:
            if isinstance(of, Call) and arg in of.arg_spans:
                found = self._spelling.of_span(of.arg_spans[arg])
                if found is not None:
                    return found
            span = getattr(of, "span", None)
            return self._spelling.of_arg(span.line, arg) if span is not None else None
        span = of if isinstance(of, Span) else getattr(of, "span", None)
        return self._spelling.of_span(span) if span is not None else None

    # ---- repairs (trusted: the source never reaches a rule) -------------------------

    def claimed(self) -> set[tuple]:
        """Keys of the anomalies the findings so far explain."""
        return {tuple(k) for f in self.findings for k in f.evidence.get("anomalies", ())}

    def unclaimed(self, kinds: tuple[str, ...] | None = None) -> list[Anomaly]:
        """Anomalies of the protocol analysis no earlier finding explains."""
        if self.protocol is None:
            return []
        taken = self.claimed()
        return [a for a in self.protocol.anomalies if _key_of(a) not in taken
                and (kinds is None or a.kind in kinds)]

    def repairs_spent(self) -> bool:
        """Has this check used up its repair search (MAX_REPAIR_ATTEMPTS attempts,
        MAX_REANALYSES re-analyses of edited sources, MAX_REPAIR_WORK race-check work in
        them, or DIAGNOSIS_FACTOR times the work of the schedule's own analysis)? The
        first bound hit is remembered (`work.spent`) for the finding that reports what
        is left."""
        reanalysed = self._reanalysed()
        work = self.work
        hit = ("repair attempts" if self._tried > MAX_REPAIR_ATTEMPTS
               else "re-analyses" if reanalysed >= MAX_REANALYSES
               else "race-check work" if work.race > work.race_allowance()
               else "diagnosis work" if work.repairs > work.allowance()
               else "")
        if hit and not work.spent:
            work.spent = hit
        # one rule's share, per pass: a broad search (a count for every barrier, a wait
        # before every read) leaves the rest of the budget to the rules after it
        share = (reanalysed - self._rule_base >= MAX_RULE_REANALYSES
                 or work.repairs - self._rule_units[0] > work.allowance() // RULE_SHARE
                 or work.race - self._rule_units[1] > work.race_allowance() // RULE_SHARE)
        return bool(hit) or share

    def diagnosis_spent(self) -> str:
        """The bound the repair search hit ("repair attempts", "re-analyses", "race-check
        work", "diagnosis work"), or "" while it has not: a finding that reports what is
        left says why no rule named it."""
        return self.work.spent

    def _reanalysed(self) -> int:
        return self._full

    def _begin_rule(self) -> None:
        """The runner starts a rule: its share of the re-analyses (MAX_RULE_REANALYSES)
        counts from here, so that one rule's broad search (a wait before every read)
        cannot spend the whole budget before a rule with one targeted repair is asked."""
        self._rule_base = self._reanalysed()
        self._rule_units = (self.work.repairs, self.work.race)

    def attempt(self, repairs: list[Repair] | tuple[Repair, ...], description: str,
                target: Anomaly, applicability: str = "machine") -> Attempt | None:
        """Apply `repairs` (one fix, possibly several edits) to the source, re-analyse
        and return the fix when it removes `target` and introduces no anomaly the
        schedule did not have; None otherwise (or when the repair does not apply)."""
        if self._source is None or self._reanalyze is None or self.protocol is None:
            return None
        # A bound on the search, counted (never timed): past it no repair is confirmed and
        # the anomalies left are reported as they are (P099, with their witness), so a
        # schedule with hundreds of candidate repairs still gets its verdict.
        self._tried += 1
        if self.repairs_spent():
            return None
        try:
            if self._editor is None:  # edits() leaves the editor as it was: one per source
                self._editor = SourceEditor(self._source, self.schedule)
            edits = [e for r in repairs for e in self._editor.edits(r)]
        except (RepairError, SyntaxError, ValueError, IndexError):
            return None
        new = apply_edits(self._source, edits)
        before = list(self.protocol.anomalies)
        had = _multiset(before)
        run = self.protocol.run_of(target)
        if run is not None and (new, "quick") not in self._attempts:
            # first the program the anomaly showed in: most proposals fail there
            quick = self._reanalyze(new, [(run.sizes, run.cta)], meter=self.work)
            self._attempts[(new, "quick")] = quick  # type: ignore[index]
            if quick is None or _worse(quick, had, target, self.strict):
                self._attempts[new] = None
        if new not in self._attempts:
            # a program the original's analysis could not finish either (a bound hit on a
            # shape the anomaly is not on) does not fail the repair: the rejection stands
            # on the program the anomaly showed in, and the repair is re-checked wherever
            # the original was
            self._full += 1
            self._attempts[new] = self._reanalyze(
                new, meter=self.work, tolerate=frozenset(self.protocol.incomplete))
        after = self._attempts[new]
        if after is None:
            return None
        if _worse(after, had, target, self.strict):
            return None
        left = _multiset(after)
        removed: list[Anomaly] = []
        budget = dict(left)
        for a in before:
            k = loose_key(a)
            if budget.get(k, 0) > 0:
                budget[k] -= 1
            else:
                removed.append(a)
        return Attempt(Fix(description=description, applicability=applicability,  # type: ignore[arg-type]
                           edits=tuple(edits)), tuple(removed), after)

    @cached_property
    def pipeline_stages(self) -> dict[str, int]:
        return {d.name: d.stages for d in self.decls(PipelineDecl)}

    @cached_property
    def shapes(self) -> list[dict[str, int]]:
        """Concrete workload sizes to evaluate expressions under."""
        if self.workload is None:
            return []
        return self.workload.shapes_for(self.schedule.sizes, self.schedule.divisible)

    # ---- statements ------------------------------------------------------------------

    def calls(self, primitive: str | None = None) -> Iterator[CallSite]:
        """Every primitive call in every role body, in program order."""
        for role in self.schedule.roles:
            blocks: list[Warps] = []
            for stmt, loops in walk_statements(role.body):
                if isinstance(stmt, Warps):
                    blocks.append(stmt)
                    continue
                if isinstance(stmt, Call) and (primitive is None or stmt.primitive == primitive):
                    block = next((b for b in blocks
                                  if stmt.path.startswith(b.path + ".body[")), None)
                    yield CallSite(stmt, role, loops, block.members if block else None)

    def node_at(self, path: str) -> Node | None:
        """The IR node with this path (a declaration, a role or a statement)."""
        if path == "schedule":
            return self.schedule
        if path == "launch":
            return self.schedule.launch
        for decl in self.schedule.resources:
            if decl.path == path:
                return decl
        for role in self.schedule.roles:
            if role.path == path:
                return role
            for stmt, _ in walk_statements(role.body):
                if stmt.path == path:
                    return stmt
        return None

    def effects(self, call: Call) -> Effects:
        """The declared effects of a call (from its primitive plugin)."""
        if call.path not in self._effects:
            self._effects[call.path] = self.primitives[call.primitive].effects(call, self.view)
        return self._effects[call.path]

    def env(self, sizes: dict[str, int]) -> Env:
        """Sizes and stage counts; the grid's extents bound `lm.block` (for `bounds`)."""
        grid: dict[int, int] = {}
        launch = self.schedule.launch
        for axis, extent in enumerate(launch.grid if launch is not None else ()):
            with contextlib.suppress(EvalError):
                grid[axis] = evaluate(extent, Env(sizes=sizes))
        return Env(sizes=sizes, pipeline_stages=self.pipeline_stages, grid=grid)

    def loop_ranges(self, loops: tuple[For, ...], sizes: dict[str, int]
                    ) -> dict[str, Interval] | None:
        """The interval of each loop variable under `sizes`; None if a loop never runs."""
        env = self.env(sizes)
        ranges: dict[str, Interval] = {}
        for loop in loops:
            lo, _ = bounds(loop.start, ranges, env)
            _, hi = bounds(loop.stop, ranges, env)
            last = hi - 1
            if last < lo:
                return None
            if isinstance(loop.step, int):  # a grid-stride step: every value in between
                last -= (last - lo) % loop.step
            ranges[loop.var] = (lo, last)
        return ranges

    def value_range(self, expr: Expr, loops: tuple[For, ...]) -> Interval | None:
        """The least and greatest value of `expr` over every check shape, CTA and iteration
        of `loops`: exact (every point evaluated) up to EXACT_POINTS points per shape, so
        that `t - S * (t // S)` ranges over 0..S-1 as `t % S` does; past that, or with a
        running counter, an interval that contains every value (`bounds`)."""
        result: Interval | None = None
        for sizes in self.shapes or [{}]:
            try:
                found = self._exact_range(expr, loops, sizes)
            except _Inexact:
                ranges = self.loop_ranges(loops, sizes)
                found = None if ranges is None else bounds(expr, ranges, self.env(sizes))
            if found is None:
                continue
            lo, hi = found
            result = (lo, hi) if result is None else (min(result[0], lo), max(result[1], hi))
        return result

    def _exact_range(self, expr: Expr, loops: tuple[For, ...], sizes: dict[str, int]
                     ) -> Interval | None:
        """min and max of `expr` over every point (CTA index, loop variables) under
        `sizes`, evaluated with numpy; None when the loops never run; _Inexact when the
        points are too many or a running counter (whose value depends on history) takes
        part."""
        import numpy as np

        from cakegov.analysis.grid import vec_eval

        steps = [step_expr(loop.step) for loop in loops]
        syms = free_symbols(expr).union(*(free_symbols(e) for loop, step in zip(
            loops, steps, strict=True) for e in (loop.start, loop.stop, step)))
        if any(s.startswith("counter:") for s in syms):
            raise _Inexact()
        env = self.env(sizes)
        axes = sorted({int(s[6:]) for s in syms if s.startswith("block:")})
        if any(a not in env.grid for a in axes):
            raise _Inexact()
        extents = [max(env.grid[a], 0) for a in axes]
        points = 1
        for e in extents:
            points *= e
        if points > EXACT_POINTS:
            raise _Inexact()
        if points == 0:
            return None
        grid = np.indices(extents).reshape(len(axes), -1) if axes else np.zeros((0, 1))
        blocks = {a: grid[i].astype(np.int64) for i, a in enumerate(axes)}
        vars_: dict[str, Any] = {}
        stages = dict(self.pipeline_stages)

        def column(e: Expr) -> Any:
            return np.broadcast_to(np.asarray(vec_eval(e, sizes, vars_, blocks, stages),
                                              dtype=np.int64), (points,))

        for loop, step_e in zip(loops, steps, strict=True):
            start, stop, step = column(loop.start), column(loop.stop), column(step_e)
            if (step <= 0).any():
                raise _Inexact()
            counts = np.maximum(0, -(-(stop - start) // step))
            total = int(counts.sum())
            if total > EXACT_POINTS:
                raise _Inexact()
            if total == 0:
                return None
            owner = np.repeat(np.arange(points), counts)
            offset = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
            vars_ = {k: v[owner] for k, v in vars_.items()}
            blocks = {a: b[owner] for a, b in blocks.items()}
            vars_[loop.var] = start[owner] + offset * step[owner]
            points = total
        values = column(expr)
        return int(values.min()), int(values.max())

    def evaluate(self, expr: Expr, sizes: dict[str, int]) -> int:
        return evaluate(expr, self.env(sizes))


# The repair search of one check (`CheckContext.attempt`), counted, never timed: the
# corpus needs at most 162 attempts, 49 re-analyses of edited sources and 20,673 units of
# their race-check work (ProtocolResult.work) (2026-12-05). Past a bound, no more repairs
# are confirmed and what is left is reported with its witness (P099): the same verdict.
MAX_REPAIR_ATTEMPTS = 2000
MAX_REANALYSES = 100
MAX_RULE_REANALYSES = 32  # of them, for one rule in one pass (CheckContext._begin_rule)
MAX_REPAIR_WORK = 200_000
# The diagnosis budget (issue 45): the re-analyses of edited sources may do at most this
# many times the work units of the schedule's own analysis (`units`), so a defective
# schedule is judged within 1 + DIAGNOSIS_FACTOR times the work of its analysis, and of
# its clean twin's; DIAGNOSIS_FLOOR units are always allowed (a tiny analysis still gets
# a few repairs).
DIAGNOSIS_FACTOR = 4
DIAGNOSIS_FLOOR = 100_000
RULE_SHARE = 2  # one rule, in one pass, may spend at most 1/RULE_SHARE of either allowance
# The most times the engine calls one rule while checking one schedule: twice in the
# check itself (the strict pass and the pass over unclaimed anomalies), and once per
# re-analysis of an edited source, of which each repair attempt makes at most two (the
# program the anomaly showed in, then every program). The trusted recomputation replays
# a proposed rule's recorded calls up to this many (cakegov/govern/judge.py).
MAX_RULE_CALLS = 2 + 2 * MAX_REPAIR_ATTEMPTS


def units(result: ProtocolResult) -> int:
    """Work units of one protocol analysis: events unrolled plus steps executed, over
    every program it ran. A count: the same on every machine, and what the diagnosis
    budget and the fuzz test measure. (The race checks' comparisons, which a defect that
    lets phases overlap multiplies, have their own bound: MAX_REPAIR_WORK.)"""
    return result.events + result.states


@dataclass
class Work:
    """The analysis work of one check, in units (`units`)."""

    base: int = 0  # the schedule's own protocol analysis
    repairs: int = 0  # re-analyses of edited sources (the repair search), quick or whole
    race: int = 0  # their race-check share, against MAX_REPAIR_WORK
    quick: int = 0  # re-analyses of only the program an anomaly showed in
    whole: int = 0  # re-analyses of every program
    spent: str = ""  # the first bound the repair search hit ("" while none)

    @property
    def total(self) -> int:
        return self.base + self.repairs

    base_race: int = 0  # race-check comparisons of the schedule's own analysis

    def allowance(self) -> int:
        """Work units the repair search may spend: DIAGNOSIS_FACTOR times the analysis."""
        return max(DIAGNOSIS_FACTOR * self.base, DIAGNOSIS_FLOOR)

    def race_allowance(self) -> int:
        """Race-check comparisons it may spend: MAX_REPAIR_WORK, or DIAGNOSIS_FACTOR times
        the analysis' own when a defect made that larger (overlapping phases compare every
        access of one with every access of the next)."""
        return max(DIAGNOSIS_FACTOR * self.base_race, MAX_REPAIR_WORK)

    def add(self, result: ProtocolResult, whole: bool) -> None:
        self.repairs += units(result)
        self.race += result.work
        if whole:
            self.whole += 1
        else:
            self.quick += 1


EXACT_POINTS = 1 << 16  # points (CTA index x iterations) value_range evaluates one by one


class _Inexact(Exception):
    """value_range falls back to interval bounds."""


def _key_of(anomaly: Anomaly) -> tuple:
    return (anomaly.kind, anomaly.resource, *(e.path for e in anomaly.events))


def _worse(after, had: dict, target: Anomaly, strict: bool) -> bool:
    """Does the re-analysed schedule fail the repair: an anomaly it did not have, the
    target still there, or (strict) anything left at all?"""
    left = _multiset(after)
    if any(n > had.get(k, 0) for k, n in left.items()):
        return True
    if left.get(loose_key(target), 0) >= had.get(loose_key(target), 0):
        return True
    return bool(strict and after)


def _multiset(anomalies) -> dict[tuple[str, str], int]:
    out: dict[tuple[str, str], int] = {}
    for a in anomalies:
        out[loose_key(a)] = out.get(loose_key(a), 0) + 1
    return out


# What a rule may read: the typed IR, the analyses, the target and the findings so far.
# Not the file name, the raw source, comments or labels (the gate also hands workers
# blinded copies under neutral names, so this is not the only line of defence); `spelling`
# gives one argument expression re-printed from the syntax tree, never a comment.
RULE_API: frozenset[str] = frozenset({
    "schedule", "target", "workload", "primitives", "known_targets", "view", "decl",
    "decls", "layout", "lowered", "lowering_error", "protocol", "protocol_only",
    "protocol_bounds", "claimed", "unclaimed", "attempt", "repairs_spent", "diagnosis_spent",
    "pipeline_stages", "shapes",
    "calls", "node_at", "effects", "env", "loop_ranges", "value_range", "evaluate",
    "findings", "strict", "spelling",
})


class RuleContext:
    """A CheckContext seen by one rule: adds `finding()` with the rule's metadata."""

    def __init__(self, base: CheckContext, rule: RulePlugin):
        self._base = base
        self.rule = rule

    def __getattr__(self, name: str) -> Any:
        if name not in RULE_API:
            raise AttributeError(
                f"a rule sees the schedule, not the file: `ctx.{name}` is not part of the "
                f"rule API ({', '.join(sorted(RULE_API))})")
        return getattr(self._base, name)

    def finding(
        self,
        node: Node | Span | None,
        message: str,
        *,
        condition: str = "",
        hint: str | None = None,
        resource: str | None = None,
        role: str | None = None,
        stage: int | None = None,
        evidence: dict[str, Any] | None = None,
        path: str | None = None,
        span: Span | None = None,
        fix: Fix | None = None,
        explains: tuple[Anomaly, ...] | list[Anomaly] = (),
    ) -> Finding:
        """A finding of this rule pointing at `node` (or an explicit span)."""
        if isinstance(node, Span):
            span, node = node, None
        node_path = path or (node.path if node is not None else "schedule")
        return Finding(
            code=self.rule.code,
            rule=self.rule.name,
            severity=self.rule.severity,  # type: ignore[arg-type]
            authority=self.rule.authority,  # type: ignore[arg-type]
            message=message,
            file=self._base.file,
            path=node_path,
            span=span or (node.span if node is not None else None),
            resource=resource,
            role=role,
            stage=stage,
            condition=condition,
            hint=hint,
            evidence={**(evidence or {}),
                      **({"anomalies": [list(_key_of(a)) for a in explains]} if explains
                         else {})},
            fixes=(fix,) if fix is not None else (),
            doc_url=rule_url(self.rule.code, self.rule.name),
        )
