"""Every statement of one ring iteration names that iteration's ring position: the wait, the
reads, the copy and its barrier, the arm and the release.

## What it does
The protocol analysis finds an anomaly (a race, a read of a stage nothing wrote before
it, a deadlock, an arrival in a phase that is not its own, a waiter that falls behind)
and, in the iteration of a role that it involves, one ring statement names a different
position than the others: a read of `a_s[(k + 1) % S]` after `full[k % S].wait(...)`, a
wait on `full[(k + 1) % S]` before reads of `a_s[k % S]`, `x_s[ring.stage(it - 1)]`
after `ring.wait(it)`, a copy into `b_s[(k + 1) % S]` with `barrier=full[k % S]`, an
`arrive_expect_tx` or a release on the next stage. The positions compared are the
barrier indices, the stages of buffer views and the iterations of pipeline operations
(`E` of `full[E]`, `a_s[E]`, `ring.wait(E)`, `a_s[ring.stage(E)]`) of the statements in
the same loop body (or, after the loops, in the same peeled block); one that occurs once
where another occurs at least twice is proposed the majority's position, a
one-expression edit. The engine re-checks the schedule, and the rule reports at that
statement when that removes the anomaly, with the witness and the re-checked fix. A
position that legitimately differs (a release of the previous stage after
`lm.mma_wait(pending=1)`) is proposed too and refused by the re-check. The rule runs
before the rules that would insert a wait or change a parity (phase `early`): where the
index is what is wrong, a new wait orders the wrong data.

## Why is this bad?
A wait orders the reader after the copies counted on the barrier slot it names, not after
the copy into the stage it reads: the read races with a bulk copy still writing the other
stage (or, one stage back, with the producer refilling a stage already handed back), and
the kernel multiplies operands of another iteration. A copy whose stage and barrier
disagree signals the wrong stage full; an arm or a release on another slot completes a
phase early on one stage and never on the other (the kernel hangs).

## Failing example
`corpus/invalid/gemm/pipeline_read_next_stage.cake`:
```python
            lm.mma(acc, a_s[ring.stage(k + 1)], b_s[ring.stage(k)],  # expect: P029
                   transpose_b=True, init=(k == 0))
```

## Passing example
`corpus/valid/gemm/ws_pipeline_tail_s4.cake`:
```python
            ring.wait(k)
            lm.mma(acc, a_s[ring.stage(k)], b_s[ring.stage(k)], transpose_b=True, init=(k == 0))
```

## References
PTX ISA "mbarrier.try_wait" (a completed phase orders the waiting thread after the
complete-tx of the copies counted on that barrier object only) and "cp.async.bulk.tensor"
(`.mbarrier::complete_tx::bytes`: the copy signals the barrier it names).
"""

from cakegov.analysis.diagnose import Candidate, classify, evidence, statements
from cakegov.ir.expr import StageOf
from cakegov.ir.nodes import Call
from cakegov.plugin import Repair

CODE = "P029"
NAME = "stage-mismatch"
VERSION = "1.0.0"
SEVERITY = "blocking"
CATEGORY = "protocol"
STATUS = "stable"
PHASE = "early"  # a one-expression repair, before the rules that insert or move waits
MOTIVATED_BY = (
    "corpus/invalid/gemm/pipeline_read_next_stage.cake",
    "corpus/invalid/knn/persistent_read_previous_stage.cake",
    "corpus/invalid/gemm/raw_copy_into_next_stage.cake",
    "corpus/invalid/gemm/wait_other_stage_fresh.cake",  # was P006: a parity for the wrong slot
    "corpus/invalid/kmeans_assign/peeled_last_wait_stage.cake",  # was P027: the same edit
)

_KINDS = ("race", "uninit", "deadlock", "early-pass", "lapped", "premature",
          "exit-inflight", "over-arrival")
_RING_OPS = ("pipeline_wait", "pipeline_acquire", "pipeline_release", "pipeline_commit")


def _position(expr):
    """A ring position as the statements compare it: `E` of `ring.stage(E)`."""
    return expr.iter if isinstance(expr, StageOf) else expr


def _sites(call: Call) -> list[tuple[str, object]]:
    """(selector, position) of every ring position `call` names (cakegov/plugin.py,
    Repair `restage`)."""
    out = []
    for key, value in call.args.items():
        kind = getattr(value, "kind", "")
        if kind == "smem" and value.stage is not None:
            out.append((f"view:{value.name}", _position(value.stage)))
        elif kind == "barrier" and value.index is not None and key in ("bar", "barrier"):
            out.append(("recv" if key == "bar" else "barrier", _position(value.index)))
    if call.primitive in _RING_OPS and "iter" in call.args:
        out.append(("recv", call.args["iter"].expr))
    return out


def _iterations(schedule, role: str):
    """The ring statements of `role` grouped by the loop body (or peeled block) they are
    in: {loops: [(call, selector, position)]}, in program order."""
    groups: dict[tuple, list] = {}
    for stmt, loops, _ in statements(schedule, role):
        if isinstance(stmt, Call):
            for selector, pos in _sites(stmt):
                groups.setdefault(tuple(x.path for x in loops), []).append(
                    (stmt, selector, pos))
    return groups


def _candidates(ctx, anomaly):
    roles = list(dict.fromkeys(e.role for e in anomaly.events if e.role))
    roles += [r.name for r in ctx.schedule.roles if r.name not in roles]
    for role in roles:
        for sites in _iterations(ctx.schedule, role).values():
            counts: dict[str, int] = {}
            for _, _, pos in sites:
                counts[repr(pos)] = counts.get(repr(pos), 0) + 1
            if len(counts) < 2:
                continue
            top = max(counts.values())
            majority = next(s for s in sites if counts[repr(s[2])] == top)
            if top < 2 or list(counts.values()).count(top) > 1:
                continue  # no position most of the iteration agrees on
            for stmt, selector, pos in sites:
                if counts[repr(pos)] != 1:
                    continue
                source, source_selector, _ = majority
                yield Candidate(
                    (Repair("restage", stmt.path, arg=selector, other=source.path,
                            form=source_selector),),
                    f"name the ring position of the other {top} statements of this "
                    f"iteration (as line {source.span.line} does)",
                    subject=stmt.path, value=(stmt, selector, role, top))


def _what(stmt: Call, selector: str) -> str:
    if selector.startswith("view:"):
        verb = "copies into" if stmt.primitive == "load" else "accesses"
        return f"{verb} a stage of `{selector[5:]}`"
    if selector == "barrier":
        return "counts its bytes on a barrier slot"
    verbs = {"mbarrier_wait": "waits on a barrier slot", "mbarrier_arrive": "arrives on a "
             "barrier slot", "mbarrier_expect_tx": "arms a barrier slot"}
    if stmt.primitive in verbs:
        return verbs[stmt.primitive]
    return f"`{stmt.primitive.replace('pipeline_', 'ring.')}`s a ring iteration"


def _report(ctx, anomaly, attempt, cand):
    stmt, selector, role, top = cand.value
    return ctx.finding(
        stmt,
        f"`{role}` {_what(stmt, selector)} other than the one the other {top} ring "
        f"statements of its iteration name: {anomaly.message}",
        condition="every statement of one ring iteration names that iteration's position "
                  "(barrier slot, stage, pipeline iteration)",
        hint=attempt.fix.description, role=role, resource=anomaly.resource or None,
        evidence=evidence(anomaly), fix=attempt.fix, explains=attempt.removed)


def check(ctx):
    yield from classify(ctx, _KINDS, _candidates, _report)
