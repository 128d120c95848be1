"""No CTA of a cluster exits while a peer's arrival on its barriers or a copy into its
shared memory may still be under way.

## What it does
The protocol analysis explores every CTA of the thread-block cluster together and finds
a remote write into a CTA (an `arrive(cta=...)` on its barrier, or a multicast copy
into its shared memory) that no thread of that CTA is ordered after before it ends: no
wait observes it and no cluster barrier follows it. The rule proposes
`lm.sync_cluster()` at the end of every role, has the engine re-check the cluster, and
reports at the remote operation when that removes the anomaly, naming both CTAs and the
witness.

## Why is this bad?
A CTA's shared memory is released when the CTA exits and may be given to the next CTA
scheduled on the SM. The last releases of a multicast pipeline land on the producer's
`empty` barrier after the producer has stopped waiting; if the producer's CTA has already
exited, the remote arrive writes into shared memory that is no longer its own — silent
corruption of another CTA, or a fault. The CUDA programming guide requires every
distributed shared-memory operation to complete before a block exits.

## Failing example
`corpus/invalid/gemm/cluster_exit_without_sync.cake`:
```python
            empty[k % S].arrive(cta=peer)            # expect: P025
```

## Passing example
`corpus/valid/gemm/cluster2_multicast_s4.cake`:
```python
            empty[k % S].arrive(cta=peer)            # the peer's producer (multicast)
        lm.store(C, at=(m0, n0), src=acc, mask=True)
        lm.sync_cluster()
```

## References
CUDA C++ programming guide, "Distributed Shared Memory" (cluster.sync() so that no
block exits while others still access its shared memory); PTX ISA "barrier.cluster";
CUTLASS `sm90_gemm_tma_warpspecialized_*.hpp` (a cluster wait before the kernel ends).
"""

from cakegov.analysis.diagnose import Candidate, classify, evidence, last_statement, program_of
from cakegov.plugin import Repair

CODE = "P025"
NAME = "cluster-exit-sync"
VERSION = "1.0.0"
SEVERITY = "blocking"
CATEGORY = "protocol"
STATUS = "stable"
MOTIVATED_BY = ("corpus/invalid/gemm/cluster_exit_without_sync.cake",)

_KINDS = ("exit-remote",)


def _has_sync(role) -> bool:
    from cakegov.ir.nodes import Call

    return any(isinstance(s, Call) and s.primitive == "sync_cluster" for s in role.body)


def _candidates(ctx, anomaly):
    if program_of(ctx, anomaly) is None:
        return
    repairs = []
    for role in ctx.schedule.roles:
        last = last_statement(ctx.schedule, role.name)
        if last is None or _has_sync(role):
            continue
        repairs.append(Repair("insert", last.path, text="lm.sync_cluster()", after=True))
    if repairs:
        yield Candidate(tuple(repairs), "end every role with `lm.sync_cluster()`, so no CTA "
                        "of the cluster exits before its peers' writes into it have landed",
                        subject=anomaly.events[0].path, value=anomaly.events[0])


def _report(ctx, anomaly, attempt, cand):
    ev = cand.value
    dest = anomaly.details.get("dest")
    return ctx.finding(
        ctx.node_at(ev.path),
        f"{anomaly.message}",
        condition=f"every remote write into CTA {dest} is ordered before CTA {dest} exits",
        hint=attempt.fix.description, resource=anomaly.resource or None, role=ev.role,
        evidence=evidence(anomaly, dest=dest, source_cta=ev.cta), fix=attempt.fix,
        explains=attempt.removed)


def check(ctx):
    yield from classify(ctx, _KINDS, _candidates, _report)
