"""The bytes armed on a phase must equal the bytes of the copies completing on it.

## What it does
The protocol analysis reaches an anomaly on a barrier that bulk copies complete on
(a phase that never completes, or one that completes while a copy is still landing, and
the race that follows) and the bytes one thread arms for a phase with
`arrive_expect_tx(bytes=...)` are not the bytes the copies of that phase deliver. The rule
proposes the delivered bytes (spelled `lm.nbytes(...)` of the buffers loaded when they
add up), has the engine re-check the schedule with them, and reports only when that
removes the anomaly, pointing at the arming statement with both byte counts, the copies,
the witness and the re-checked fix. Phases armed by several threads are double arming
(P004); barriers that multicast copies from other CTAs of a cluster complete on are
left to P024 (multicast-expect-tx).

## Why is this bad?
Armed bytes above the copies' bytes: the phase waits for bytes that never arrive and
every waiter hangs. Below: the phase completes when that many bytes have landed, while
the rest is still in flight; the consumer reads a half-written stage, and the late bytes
are subtracted from the next phase, skewing it as well. Nothing reports either.

## Failing example
`corpus/invalid/gemm/expect_tx_a_only.cake`:
```python
            full[k % S].arrive_expect_tx(bytes=lm.nbytes(a_s))  # expect: P003
```

## Passing example
`corpus/valid/gemm/raw_barriers_s2.cake`:
```python
            full[k % S].arrive_expect_tx(bytes=lm.nbytes(a_s, b_s))
```
"""

from cakegov.analysis.diagnose import (
    Candidate,
    barriers_of,
    classify,
    evidence,
    multicast_into,
    program_of,
    slots_of,
)
from cakegov.plugin import Repair

CODE = "P003"
NAME = "expect-tx-bytes"
VERSION = "2.1.0"
SEVERITY = "blocking"
CATEGORY = "protocol"
STATUS = "stable"
MOTIVATED_BY = (
    "corpus/invalid/gemm/expect_tx_a_only.cake",
    "corpus/invalid/scale/expect_tx_elements_not_bytes.cake",
    "corpus/invalid/kmeans_assign/expect_tx_wrong_buffer.cake",
)

_KINDS = ("deadlock", "race", "premature", "early-pass", "lapped", "uninit", "tx-range",
          "exit-inflight")


def _arms(program, barrier):
    slots = slots_of(program, barrier)
    return [ev for t in program.threads for ev in t.events
            if ev.kind == "arrive" and ev.slot in slots and ev.source == "mbarrier_expect_tx"]


def _delivered(program, arm):
    """The copies on the armed slot the arming thread issues before it arms it again."""
    out = []
    for ev in program.threads[arm.thread].events[arm.seq + 1:]:
        if ev.slot == arm.slot and ev.kind == "arrive" and ev.tx:
            break
        if ev.kind == "copy" and ev.slot == arm.slot:
            out.append(ev)
    if not out:  # copies issued before the arm, by this or another thread
        out = [ev for t in program.threads for ev in t.events[:]
               if ev.kind == "copy" and ev.slot == arm.slot][:8]
    return out


def _candidates(ctx, anomaly):
    program = program_of(ctx, anomaly)
    if program is None:
        return
    kernel = ctx.protocol.kernel
    for barrier in barriers_of(ctx, anomaly):
        if multicast_into(program, barrier):
            continue  # bytes per destination CTA of a multicast: P024
        arms = _arms(program, barrier)
        if not arms or len({a.path for a in arms}) > 1 or any(a.n > 1 for a in arms):
            continue  # several threads arm a phase: double arming (P004)
        for arm in arms[:4]:
            copies = _delivered(program, arm)
            delivered = sum(c.nbytes for c in copies)
            if not copies or delivered == arm.tx * arm.n:
                continue
            names = list(dict.fromkeys(c.mem[0].name for c in copies))
            stage_sum = sum(kernel.buffer(n).stage_bytes for n in names)
            text = f"lm.nbytes({', '.join(names)})" if stage_sum == delivered and \
                len(names) == len(copies) else str(delivered)
            yield Candidate((Repair("set_arg", arm.path, "bytes", text),),
                            f"arm `bytes={text}` ({delivered:,} B): the bytes of every copy "
                            f"that completes on the phase", subject=arm.path,
                            value=(arm, copies, delivered))


def _report(ctx, anomaly, attempt, cand):
    arm, copies, delivered = cand.value
    armed = arm.tx * arm.n
    barrier = ctx.protocol.runs[0].program.slots[arm.slot][0] if ctx.protocol.runs else ""
    program = program_of(ctx, anomaly)
    if program is not None:
        barrier = program.slots[arm.slot][0]
    listed = " + ".join(f"{c.mem[0].name} ({c.nbytes:,} B, line {c.line})" for c in copies)
    if armed > delivered:
        effect = (f"{armed - delivered:,} B never arrive, so the phase never completes and "
                  "every wait on it blocks forever (deadlock)")
    else:
        effect = (f"the phase can complete once {armed:,} B have landed while "
                  f"{delivered - armed:,} B are still in flight: the waiter reads a stage "
                  "before its copy finished (race), and the late bytes skew the next phase")
    return ctx.finding(
        ctx.node_at(arm.path),
        f"{arm.role} arms {barrier} with {armed:,} B per phase but the copies completing on "
        f"it deliver {delivered:,} B ({listed}): {effect}",
        condition=f"armed bytes == bytes of the copies completing on the phase: "
                  f"{armed:,} == {delivered:,}",
        hint=attempt.fix.description, resource=barrier, role=arm.role,
        evidence=evidence(anomaly, armed=armed, delivered=delivered,
                          copies=[{"line": c.line, "bytes": c.nbytes} for c in copies]),
        fix=attempt.fix, explains=attempt.removed)


def check(ctx):
    yield from classify(ctx, _KINDS, _candidates, _report)
