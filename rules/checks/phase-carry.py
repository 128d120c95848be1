"""A ring's position carries from tile to tile: a loop nested in a tile loop that derives
stages and parities from its own index restarts the phases at every tile.

## What it does
The protocol analysis finds an anomaly (a deadlock, a wait that passes on the wrong
phase, a waiter that falls a phase behind, the race that follows) in a kernel whose
roles exchange a ring inside an outer loop, typically the tile loop of a persistent
kernel, and one role's inner loop computes the ring position from its own variable
(`full[k % S]`, `parity=(k // S) % 2`, `ring.wait(k)`), which starts again at every
tile, while the barriers' phases carry over. The rule proposes counting the position
with a running counter instead (`it = lm.counter()`, `lm.range(0, KT, counter=it)`, and
`it` wherever the loop body derives a barrier or buffer index, a parity or a pipeline
iteration from `k`; a counter the other roles already use is tried first), has the
engine re-check the schedule, and reports at the loop when that removes the anomaly,
with the witness and the re-checked fix.

## Why is this bad?
A tile of `KT` K blocks advances every stage of an `S`-stage ring by `KT / S` phases. A
position restarted at 0 is right for the next tile only when `KT` is a multiple of
`2 S`; otherwise the second tile of a CTA waits for a parity the barrier shows for
another phase: it blocks on a phase the producer fills only after the stage it never
read is released (the kernel hangs), or passes on a stale phase and reads a stage
while the copy of the next K block writes it (silently wrong results). CTAs with one
tile hide it, so it shows only on problem sizes where the grid is smaller than the
tiles, and for kernels whose inner trip count varies by tile (causal attention) only a
running count can be right.

## Failing example
`corpus/invalid/gemm/persistent_phase_restart.cake`:
```python
            for k in lm.range(0, 4):  # expect: P026
                full[k % S].wait(parity=(k // S) % 2)
```

## Passing example
`corpus/valid/gemm/persistent_coop_cluster2_s4.cake`:
```python
            for k in lm.range(0, KT, counter=it):
                full[it % S].wait(parity=(it // S) % 2)
```

## References
CUTLASS `include/cutlass/gemm/kernel/sm90_gemm_tma_warpspecialized_cooperative.hpp`
(`mainloop_pipe_consumer_state.advance(work_k_tile_count)`: the `PipelineState` outlives
the tile); FlashAttention-3 `hopper/flash_fwd_kernel_sm90.h` (`smem_pipe_read` kept
across work tiles); PTX ISA "mbarrier.try_wait.parity".
"""

from cakegov.analysis.diagnose import Candidate, classify, evidence, role_of
from cakegov.ir.nodes import For
from cakegov.ir.parse import walk_statements
from cakegov.plugin import Repair

CODE = "P026"
NAME = "phase-carry"
VERSION = "1.0.0"
SEVERITY = "blocking"
CATEGORY = "protocol"
STATUS = "stable"
MOTIVATED_BY = (
    "corpus/invalid/gemm/persistent_phase_restart.cake",
    "corpus/invalid/attention/fa3_persistent_kv_restart.cake",
)

_KINDS = ("deadlock", "race", "uninit", "early-pass", "lapped", "premature", "exit-inflight",
          "over-arrival")


def _counters(schedule) -> list[str]:
    """Counters the schedule's loops already advance, in order of appearance."""
    out: dict[str, None] = {}
    for role in schedule.roles:
        for stmt, _ in walk_statements(role.body):
            if isinstance(stmt, For) and stmt.counter:
                out.setdefault(stmt.counter, None)
    return list(out)


def _fresh(schedule, base: str = "pos") -> str:
    used = {d.name for d in schedule.resources} | {r.name for r in schedule.roles} | \
        set(schedule.params)
    for role in schedule.roles:
        for stmt, _ in walk_statements(role.body):
            if isinstance(stmt, For):
                used.add(stmt.var)
    name, n = base, 2
    while name in used:
        name, n = f"{base}{n}", n + 1
    return name


def _candidates(ctx, anomaly):
    involved = [e.role for e in anomaly.events]
    roles = sorted(ctx.schedule.roles, key=lambda r: (r.name not in involved, 0))
    existing = _counters(ctx.schedule)
    names = [*existing, _fresh(ctx.schedule)]
    for role in roles:
        for stmt, around in walk_statements(role.body):
            if not (isinstance(stmt, For) and around and stmt.counter is None):
                continue
            outer = around[-1]
            for name in names:
                repairs = (Repair("carry_phase", stmt.path, text=name),)
                if name not in existing:
                    repairs = (Repair("declare", text=f"{name} = lm.counter()"), *repairs)
                yield Candidate(repairs,
                                f"carry the ring position across the passes of the loop over "
                                f"`{outer.var}`: count it with the running counter `{name}` "
                                f"(`counter={name}`) instead of `{stmt.var}`",
                                subject=stmt.path, value=(stmt, outer, name))


def _report(ctx, anomaly, attempt, cand):
    loop, outer, _name = cand.value
    role = role_of(loop.path)
    return ctx.finding(
        loop,
        f"`{role}` derives its ring positions from `{loop.var}`, which restarts at every "
        f"pass of the loop over `{outer.var}` (line {outer.span.line}), while the barriers' "
        f"phases carry over: {anomaly.message}",
        condition="a ring exchanged inside a tile loop is indexed by a position that "
                  "carries from tile to tile",
        hint=attempt.fix.description, role=role or None, resource=anomaly.resource or None,
        evidence=evidence(anomaly), fix=attempt.fix, explains=attempt.removed)


def check(ctx):
    yield from classify(ctx, _KINDS, _candidates, _report)
