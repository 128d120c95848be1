"""Every role that uses a named barrier must reach it the same number of times.

## What it does
The protocol analysis finds a named barrier (`bar.sync id, threads` /
`bar.arrive id, threads`; `lm.sync_cta()` is barrier 0) that deadlocks or splits a role:
its participants reach it different numbers of times, so an instance never gets its
declared threads and a `sync` waits forever; or a role brings more threads than an
instance has room for, so its warps land in two instances. The rule proposes deleting a
use the other participants do not match, or the thread count its participants really
bring, or, where a role signals the barrier only inside its loop after waiting on its
partner's (an ordered sequence: FA3's warp-scheduler barriers, CUTLASS's
`OrderedSequenceBarrier`), the warm-up `bar.arrive()` before that loop that starts the
sequence (the later role first, so the earlier goes first); it has the engine re-check
the schedule, and reports only when that removes the anomaly: at the use, the
declaration or the loop the arrive goes before, with the witness and the re-checked fix.

## Why is this bad?
A role that reaches a named barrier fewer times than its partners (a missing `sync`, a
`sync` in a loop whose partner sits outside it, a role whose loop never runs for some
sizes) leaves the others blocked in `bar.sync` forever: the CTA hangs and with it the
whole grid. A surplus `bar.arrive` completes a later generation early instead, releasing
waiters before the data they wait for is ready.

## Failing example
`corpus/invalid/scale/named_barrier_extra_sync.cake`:
```python
ready.sync()  # expect: P015
```

## Passing example
`corpus/valid/scale/named_barrier_handoff.cake`:
```python
ready.arrive()
ready.sync()
```
"""

from cakegov.analysis.diagnose import (
    Candidate,
    calls,
    classify,
    evidence,
    loops_around,
    program_of,
    role_of,
    siblings_after,
)
from cakegov.ir.nodes import NamedBarrierDecl
from cakegov.plugin import Repair

CODE = "P015"
NAME = "named-barrier-deadlock"
VERSION = "2.1.0"
SEVERITY = "blocking"
CATEGORY = "protocol"
STATUS = "stable"
MOTIVATED_BY = (
    "corpus/invalid/scale/named_barrier_extra_sync.cake",
    "corpus/invalid/kmeans_assign/named_handback_missing.cake",
    "corpus/invalid/attention/fa3_scheduler_init_missing.cake",
)

_KINDS = ("deadlock", "named-split", "named-premature", "race")


def _barriers(ctx, anomaly):
    ids = set()
    for ev in anomaly.events:
        if ev.kind == "named" and ev.named is not None and not ev.derived:
            ids.add(ev.named[0])
    if anomaly.kind.startswith("named") and anomaly.resource.isdigit():
        ids.add(int(anomaly.resource))
    return ids


def _candidates(ctx, anomaly):
    ids = _barriers(ctx, anomaly)
    if not ids:
        return
    decls = {d.id: d for d in ctx.schedule.resources if isinstance(d, NamedBarrierDecl)}
    uses = [c for c in calls(ctx.schedule, ("named_barrier_sync", "named_barrier_arrive",
                                            "sync_cta"))
            if (c.primitive == "sync_cta" and 0 in ids) or
            (c.primitive != "sync_cta" and decls.get(_id(ctx, c)) is not None
             and _id(ctx, c) in ids)]
    program = program_of(ctx, anomaly)
    counts = {}
    if program is not None:
        for t in program.threads:
            n = sum(1 for ev in t.events if ev.kind == "named" and not ev.derived
                    and ev.named[0] in ids)
            if n:
                counts[t.role] = n
    if len(counts) > 1:  # a role reaches the barrier less often: give it the missing use
        busiest = max(counts, key=counts.get)
        first_busy = next((u for u in uses if role_of(u.path) == busiest), None)
        for role, n in counts.items():
            if n >= counts[busiest]:
                continue
            mine = [u for u in uses if role_of(u.path) == role]
            if not mine:
                continue
            last = mine[-1]
            after = siblings_after(ctx.schedule, last.path)
            anchors = [last, *after]
            text = f"{last.args['bar'].name}.sync()" if last.primitive != "sync_cta" \
                else "lm.sync_cta()"
            for anchor in reversed(anchors):
                yield Candidate((Repair("insert", anchor.path, text=text, after=True),),
                                f"add `{text}` in `{role}` after line {anchor.span.line}: it "
                                f"reaches the barrier {n} time(s) where `{busiest}` reaches "
                                f"it {counts[busiest]}",
                                subject=first_busy.path if first_busy else last.path,
                                value=last)
    # a role that signals the barrier only after its own wait on its partner's: it must
    # signal once before its loop to start the sequence (FA3's `mma_init` arrive on the
    # other warpgroup's scheduler barrier, CUTLASS's OrderedSequenceBarrier initial arrive)
    # (the later role primes first: the earlier warpgroup goes first, as FA3's WG2 lets
    # WG1 go first)
    primed: set[tuple[str, str]] = set()
    order = {r.name: i for i, r in enumerate(ctx.schedule.roles)}
    for use in sorted(uses, key=lambda u: (-order.get(role_of(u.path), 0), u.span.line)):
        if use.primitive != "named_barrier_arrive" or not loops_around(ctx.schedule,
                                                                      use.path):
            continue
        role, name = role_of(use.path), use.args["bar"].name
        first = next((u for u in uses if role_of(u.path) == role
                      and u.args["bar"].name == name), use)
        if (role, name) in primed or first.primitive != "named_barrier_arrive":
            continue
        primed.add((role, name))
        top = ".".join(use.path.split(".")[:3]).split("]")[0] + "]"  # roles.R.body[i]
        yield Candidate((Repair("insert", top, text=f"{name}.arrive()"),),
                        f"signal `{name}` once before `{role}` enters its loop: its partner "
                        f"waits on `{name}` before `{role}` first arrives on it",
                        subject=top, value=use)
    for use in sorted(uses, key=lambda c: -c.span.line):
        yield Candidate((Repair("delete", use.path),),
                        "remove this use: the other participants do not reach the barrier "
                        "as often", subject=use.path, value=use)
    for ident in ids:
        decl = decls.get(ident)
        if decl is None:
            continue
        threads = sorted({32 * (r.warp_stop - r.warp_start) for r in ctx.schedule.roles})
        total = sum(32 * (r.warp_stop - r.warp_start) for r in ctx.schedule.roles
                    if any(role_of(u.path) == r.name for u in uses))
        for value in sorted(set(threads) | {total}):
            if value != decl.threads:
                yield Candidate((Repair("set_arg", decl.path, "threads", str(value)),),
                                f"declare the barrier for the {value} threads that reach it",
                                subject=decl.path, value=decl)


def _id(ctx, call):
    decl = ctx.schedule.resource(call.args["bar"].name)
    return decl.id if isinstance(decl, NamedBarrierDecl) else None


def _report(ctx, anomaly, attempt, cand):
    return ctx.finding(
        ctx.node_at(cand.subject), f"named barrier misuse: {anomaly.message}",
        condition="every participant reaches a named barrier the same number of times and "
                  "an instance receives exactly its declared threads",
        hint=attempt.fix.description, resource=anomaly.resource or None,
        role=role_of(cand.subject) or None, evidence=evidence(anomaly), fix=attempt.fix,
        explains=attempt.removed)


def check(ctx):
    yield from classify(ctx, _KINDS, _candidates, _report)
