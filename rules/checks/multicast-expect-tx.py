"""Each CTA of a cluster arms its barrier with the bytes that land in it, multicasts
from its peers included.

## What it does
The protocol analysis explores every CTA of a thread-block cluster together and reaches
an anomaly (a phase that never completes, one that completes while a multicast copy is
still landing and the race that follows, a copy that lands in the wrong phase) on a
barrier that multicast copies complete on (`load(..., multicast=MASK)`), and the bytes
a CTA arms for a phase with `arrive_expect_tx(bytes=...)` are not the bytes that land on
*its* barrier in that phase, whoever issued the copies. A multicast delivers the whole
tile to each CTA of the mask and completes its bytes on each destination's barrier, so
a CTA must arm what it receives: neither only what it issues itself, nor what it issues
times the multicast factor. The rule proposes the received bytes (spelled
`lm.nbytes(...)` of the buffers that land when they add up), has the engine re-check
the whole cluster with them, and reports only when that removes the anomaly, at the
arming statement, naming the CTA, both byte counts, the copies and their issuers.

## Why is this bad?
Armed bytes below what lands: the phase completes while the peer's multicast is still
writing the stage; the consumer reads half a tile and the late bytes are subtracted from
the next phase. Above: the phase waits for bytes no CTA sends and both CTAs of the
cluster hang. Nothing reports either.

## Failing example
`corpus/invalid/gemm/cluster_multicast_expect_issued_only.cake`:
```python
            full[k % S].arrive_expect_tx(bytes=lm.nbytes(a_s) + issued_b)  # expect: P024
```

## Passing example
`corpus/valid/gemm/cluster2_multicast_s4.cake`:
```python
            full[k % S].arrive_expect_tx(bytes=lm.nbytes(a_s, b_s))
```

## References
PTX ISA, "cp.async.bulk" (`.multicast::cluster`, ctaMask: the data and the mbarrier
signal are delivered to the same offsets in each destination CTA) and "mbarrier"
(expect-tx / complete-tx); CUTLASS `include/cutlass/pipeline/sm90_pipeline.hpp`
(`PipelineTmaAsync`: every CTA arms the full transaction bytes of the stage).
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

CODE = "P024"
NAME = "multicast-expect-tx"
VERSION = "1.0.0"
SEVERITY = "blocking"
CATEGORY = "protocol"
STATUS = "stable"
MOTIVATED_BY = (
    "corpus/invalid/gemm/cluster_multicast_expect_issued_only.cake",
    "corpus/invalid/kmeans_assign/cluster_centroids_unarmed_peer.cake",
)

_KINDS = ("deadlock", "race", "premature", "early-pass", "lapped", "uninit", "tx-range",
          "exit-inflight", "over-arrival")


def _received(program, slot):
    """(bytes per phase that land on `slot`, the copies of one phase): every copy on the
    slot, whoever issued it, divided by the phases its arms open."""
    arms = [ev for t in program.threads for ev in t.events
            if ev.kind == "arrive" and ev.slot == slot and ev.source == "mbarrier_expect_tx"]
    copies = [ev for t in program.threads for ev in t.events
              if ev.kind == "copy" and ev.slot == slot]
    if not arms or not copies:
        return None
    total = sum(c.nbytes for c in copies)
    if total % len(arms):
        return None
    first = {}
    for c in copies:  # one phase's copies: the first of each (issuer, statement)
        first.setdefault((c.cta, c.path), c)
    per_phase = total // len(arms)
    if sum(c.nbytes for c in first.values()) != per_phase:
        return None
    return per_phase, list(first.values()), arms


def _candidates(ctx, anomaly):
    program = program_of(ctx, anomaly)
    if program is None:
        return
    kernel = ctx.protocol.kernel
    for barrier in barriers_of(ctx, anomaly):
        if not multicast_into(program, barrier):
            continue
        for slot in sorted(slots_of(program, barrier)):
            got = _received(program, slot)
            if got is None:
                continue
            per_phase, copies, arms = got
            wrong = [a for a in arms if a.tx * a.n != per_phase]
            if not wrong or len({a.path for a in arms}) > 1 or any(a.n > 1 for a in arms):
                continue  # several arming statements or threads: P004
            arm = wrong[0]
            names = list(dict.fromkeys(c.mem[0].name for c in copies))
            stage_sum = sum(kernel.buffer(n).stage_bytes for n in names)
            text = f"lm.nbytes({', '.join(names)})" if stage_sum == per_phase and \
                len(names) == len(copies) else str(per_phase)
            yield Candidate((Repair("set_arg", arm.path, "bytes", text),),
                            f"arm `bytes={text}` ({per_phase:,} B) in every CTA: the bytes "
                            "that land on its own barrier each phase, multicasts from its "
                            "peers included", subject=arm.path,
                            value=(arm, copies, per_phase))
            break


def _report(ctx, anomaly, attempt, cand):
    arm, copies, received = cand.value
    armed = arm.tx * arm.n
    program = program_of(ctx, anomaly)
    name = program.slot_name(arm.slot) if program is not None else ""
    barrier = program.slots[arm.slot][0] if program is not None else ""
    listed = " + ".join(
        f"{c.mem[0].name} ({c.nbytes:,} B, line {c.line}, "
        f"{'multicast from CTA ' + str(c.cta) if c.peer >= 0 else 'issued here'})"
        for c in copies)
    if armed > received:
        effect = (f"{armed - received:,} B never arrive, so the phase never completes and "
                  "the cluster hangs (deadlock)")
    else:
        effect = (f"the phase can complete once {armed:,} B have landed while "
                  f"{received - armed:,} B of the multicast are still in flight: the "
                  "consumer reads a stage before its copy finished (race)")
    return ctx.finding(
        ctx.node_at(arm.path),
        f"{arm.role} of CTA {arm.cta} arms {name} with {armed:,} B per phase but "
        f"{received:,} B land on it ({listed}): a multicast completes its bytes on every "
        f"destination CTA's barrier, so each CTA arms what it receives, not what it "
        f"issues: {effect}",
        condition=f"armed bytes == bytes landing on this CTA's barrier per phase: "
                  f"{armed:,} == {received:,}",
        hint=attempt.fix.description, resource=barrier, role=arm.role,
        evidence=evidence(anomaly, armed=armed, received=received, cta=arm.cta,
                          copies=[{"line": c.line, "bytes": c.nbytes, "issuer": c.cta}
                                  for c in copies]),
        fix=attempt.fix, explains=attempt.removed)


def check(ctx):
    yield from classify(ctx, _KINDS, _candidates, _report)
