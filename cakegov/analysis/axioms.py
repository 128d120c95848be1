"""The machine model as named axioms: every assumption the protocol analysis and the CPU
simulator make about the hardware, with its source and the code that implements it.

A legality verdict is a claim about what the hardware does; this table is what the claim
rests on. `docs/checker.md` ("The machine model: axioms") is generated from it by
`cakegov docs`, and `tests/test_axioms.py` holds at least one positive and one negative
hand-worked trace per axiom (a test whose name starts `test_a<N>_pos_` / `test_a<N>_neg_`;
a meta-test fails when one is missing).

`status` says how much rests on the axiom:
- `documented`: the PTX ISA or the CUDA Programming Guide states it;
- `assumed`: the documentation implies it without stating it in these words, and the
  production code named in the source relies on it; a GPU litmus test is the evidence
  that can confirm or refute it;
- `lowering`: the emitted code guarantees it by construction, so the checker never asks
  the schedule for it.

`implemented_by` names the engine code: `module:qualified.name` for Python objects (the
shared state machines of cakegov/analysis/semantics.py first, then the analysis's and the
simulator's use of them), `path#token` for a template or primitive file that must contain
the token. The test suite resolves every reference.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

PTX = "https://docs.nvidia.com/cuda/parallel-thread-execution/index.html"
GUIDE = "https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html"


@dataclass(frozen=True)
class Axiom:
    id: str
    title: str
    statement: str
    source: str
    status: str  # documented | assumed | lowering
    implemented_by: tuple[str, ...]
    # what a device would show if the axiom were false: the observation a GPU litmus test
    # looks for (set below, one sentence per axiom)
    if_false: str = ""
    # the documentation versions the source was read in and the ISA versions that
    # introduced the instructions the axiom rests on (set below)
    versions: str = ""


AXIOMS: tuple[Axiom, ...] = (
    Axiom(
        "A1", "mbarrier phase completion",
        "`mbarrier.init` sets the pending count to the expected arrival count, tx-count 0, "
        "phase 0. The current phase completes exactly when the pending arrivals and the "
        "tx-count are both zero; the phase then advances and pending is reloaded.",
        f"PTX ISA, mbarrier: \"Phase completion of the mbarrier object\" ({PTX}"
        "#parallel-synchronization-and-communication-instructions-mbarrier)",
        "documented",
        ("cakegov.analysis.semantics:MBarrier", "cakegov.analysis.execute:Executor.contribute",
         "cakegov.sim.machine:Machine.contribute"),
    ),
    Axiom(
        "A2", "parity waits and aliasing",
        "`mbarrier.try_wait.parity(p)` succeeds when the phase of parity p has completed, "
        "i.e. the current phase's parity differs from p; a waiter observes the most "
        "recently completed phase. A waiter two phases behind sees the same parity as "
        "one that is current (parity aliasing).",
        f"PTX ISA, mbarrier.test_wait/try_wait: \"phaseParity\" operand ({PTX}"
        "#parallel-synchronization-and-communication-instructions-mbarrier-test-wait-try-wait)",
        "documented",
        ("cakegov.analysis.semantics:MBarrier.passes", "cakegov.analysis.execute:Executor.wait",
         "cakegov.analysis.execute:Executor.lapped", "cakegov.sim.machine:Machine.wait"),
    ),
    Axiom(
        "A3", "a fresh barrier's preceding phase",
        "On a freshly initialised mbarrier the phase before phase 0 counts as complete: "
        "`try_wait.parity(1)` succeeds at once and `try_wait.parity(0)` waits. Producers "
        "that start on parity 1 (CUTLASS `make_producer_start_state`) rely on it.",
        f"PTX ISA, mbarrier.test_wait/try_wait: waiting on the parity of \"the immediately "
        f"preceding phase\" ({PTX}"
        "#parallel-synchronization-and-communication-instructions-mbarrier-test-wait-try-wait)",
        "documented",
        ("cakegov.analysis.semantics:MBarrier.observed", "cakegov.analysis.execute:Executor.wait",
         "cakegov.sim.machine:Machine.wait"),
    ),
    Axiom(
        "A4", "arrival counts and over-arrival",
        "The expected arrival count and the tx-count lie in 1..2^20-1 and +-(2^20-1). An "
        "arrive counts towards the current phase only; an arrival on a phase whose "
        "expected arrivals are all in (its bytes still outstanding) has no defined outcome.",
        f"PTX ISA, mbarrier: \"Contents of the mbarrier object\", mbarrier.arrive ({PTX}"
        "#parallel-synchronization-and-communication-instructions-mbarrier-arrive)",
        "documented",
        ("cakegov.analysis.semantics:OverArrival", "cakegov.analysis.semantics:ARRIVAL_LIMIT",
         "cakegov.analysis.execute:Executor.contribute", "cakegov.sim.machine:Machine.contribute"),
    ),
    Axiom(
        "A5", "transaction count",
        "`expect_tx(n)` (alone or in `arrive.expect_tx`) raises the tx-count by n; the "
        "completion of an asynchronous copy signalled with `complete_tx::bytes` lowers it by "
        "the bytes delivered, and may take it below zero while arrivals are outstanding.",
        f"PTX ISA, mbarrier: \"tx-count\", mbarrier.expect_tx, mbarrier.complete_tx ({PTX}"
        "#parallel-synchronization-and-communication-instructions-mbarrier-expect-tx)",
        "documented",
        ("cakegov.analysis.semantics:MBarrier.complete_tx",
         "cakegov.analysis.semantics:MBarrier.expect_tx",
         "cakegov.analysis.execute:Executor.land_copy",
         "cakegov.sim.machine:Machine.finish"),
    ),
    Axiom(
        "A6", "arrive releases, the wait that observes the phase acquires",
        "`mbarrier.arrive` has release semantics and `try_wait` acquire semantics at CTA "
        "scope (the defaults): what the arriving thread did before the arrive happens "
        "before what a thread does after a wait that observes the phase the arrive "
        "completed. Nothing else orders the two roles.",
        f"PTX ISA, mbarrier.arrive / try_wait: \".release\" / \".acquire\" and \"Memory "
        f"Consistency Model\" ({PTX}#memory-consistency-model)",
        "documented",
        ("cakegov.analysis.execute:Executor.acquire", "cakegov.analysis.execute:Executor.race",
         "cakegov.sim.machine:Warp.acquire", "cakegov.sim.memory:SharedMemory"),
    ),
    Axiom(
        "A7", "bulk copies complete on their barrier",
        "A `cp.async.bulk(.tensor)` into shared memory writes its destination between its "
        "issue and its `complete_tx` on the named mbarrier; a thread that observes the phase "
        "that completion finished sees the bytes. A copy whose completion no thread observes "
        "may still be writing when the CTA exits.",
        f"PTX ISA, cp.async.bulk.tensor: \".mbarrier::complete_tx::bytes\" completion "
        f"mechanism ({PTX}#data-movement-and-conversion-instructions-cp-async-bulk-tensor)",
        "documented",
        ("cakegov.analysis.execute:Executor.land_copy", "cakegov.analysis.execute:Executor.at_exit",
         "cakegov.sim.machine:Machine.copy", "cakegov.sim.machine:Machine.at_exit"),
    ),
    Axiom(
        "A8", "named barriers",
        "`bar.sync id, n` waits until n threads have arrived at barrier id, `bar.arrive` "
        "arrives without waiting; the arrivals after completion start the next instance. "
        "Every access a participating thread made before its arrival happens before every "
        "access of a `bar.sync` participant after it.",
        f"PTX ISA, bar / barrier ({PTX}#parallel-synchronization-and-communication-"
        "instructions-bar-barrier)",
        "documented",
        ("cakegov.analysis.semantics:NamedBarrier",
         "cakegov.analysis.execute:Executor.named_barrier",
         "cakegov.sim.machine:Machine.named_arrive"),
    ),
    Axiom(
        "A9", "generic-to-async proxy ordering",
        "Shared memory written through the generic proxy (ordinary stores) and then read "
        "through the async proxy (a bulk store, a wgmma operand, a bulk copy source) needs a "
        "`fence.proxy.async` by the writer between the write and the hand-off; a barrier "
        "alone does not order the two proxies.",
        f"PTX ISA, \"Proxies\" and membar/fence: fence.proxy.async ({PTX}"
        "#parallel-synchronization-and-communication-instructions-membar)",
        "documented",
        ("cakegov.analysis.execute:Executor.check_fence",
         "cakegov.analysis.execute:Executor.proxy_fence",
         "cakegov.sim.machine:Machine.fence", "cakegov.sim.memory:SharedMemory.fence"),
    ),
    Axiom(
        "A10", "manual mbarrier initialisation",
        "A thread's use of an mbarrier must happen after its `mbarrier.init`; the async "
        "proxy (a bulk copy completing on it) additionally needs the initialising thread's "
        "`fence.mbarrier_init.release.cluster` before the copy is issued.",
        f"PTX ISA, mbarrier.init and fence.mbarrier_init ({PTX}"
        "#parallel-synchronization-and-communication-instructions-mbarrier-init)",
        "documented",
        ("cakegov.analysis.execute:Executor.init", "cakegov.analysis.execute:Executor.check_init",
         "cakegov.sim.machine:Machine.init", "cakegov.sim.machine:Machine.check_init"),
    ),
    Axiom(
        "A11", "__syncwarp orders the lanes of one warp",
        "`__syncwarp()` (`bar.warp.sync`) makes the participating lanes wait for each other "
        "and orders their memory accesses before it against those after it; it orders "
        "nothing between different warps.",
        f"CUDA C++ Programming Guide, \"Synchronization Functions\" (__syncwarp: \"guarantees "
        f"memory ordering among threads participating in the barrier\") ({GUIDE}"
        "#synchronization-functions); PTX ISA bar.warp.sync",
        "documented",
        ("cakegov.analysis.execute:Executor.step", "cakegov.sim.machine:Warp.converge",
         "cakegov.sim.machine:Machine.fence"),
    ),
    Axiom(
        "A12", "no lane convergence is assumed; an elected arrive releases its own thread",
        "Lanes of a warp are independently scheduled: they are not assumed to run in "
        "lockstep except at `__syncwarp`, a `.sync.aligned` collective (A14) or a wgmma "
        "(A13). An arrive by one elected lane releases that lane's accesses and what was "
        "ordered before it, nothing more. The lowering makes the common forms safe: "
        "`__syncwarp()` before an elected per-warp arrive (or per-role arrive of a one-warp "
        "role) after per-thread shared-memory accesses, `mma_wait` on the mma.sync path "
        "followed by a role sync, and roles that only wait and issue run on one warp.",
        f"CUDA C++ Programming Guide, \"Independent Thread Scheduling\" (compute capability "
        f"7.x and later) ({GUIDE}#independent-thread-scheduling)",
        "lowering",
        ("cakegov.lower.derive:issuing_warp", "cakegov.lower.derive:_Lowerer",
         "cakegov.analysis.execute:Executor.view", "cakegov.sim.machine:Machine.arrive"),
    ),
    Axiom(
        "A13", "wgmma is one operation of its warpgroup",
        "`wgmma.mma_async` is `.sync.aligned` over a warpgroup (four contiguous warps, the "
        "first a multiple of four) and takes the fragments of all 128 threads: a wgmma group "
        "cannot complete, and no `wgmma.wait_group` can retire it, before every warp of the "
        "warpgroup has issued it; once retired, its shared-memory operand reads are complete "
        "for every warp. CUTLASS's consumer release by one thread per warpgroup after "
        "`warpgroup_wait` and FA3's barrier_O rely on it.",
        f"PTX ISA, \"Asynchronous Warpgroup Level Matrix Multiply-Accumulate Instructions\", "
        f"wgmma.mma_async (\".sync.aligned\", warpgroup) ({PTX}"
        "#asynchronous-warpgroup-level-matrix-instructions)",
        "assumed",
        ("cakegov.analysis.semantics:WarpgroupIssue",
         "cakegov.analysis.execute:Executor.warpgroup_ready",
         "cakegov.analysis.execute:Executor.warpgroup_retire",
         "cakegov.sim.machine:Machine.completable"),
    ),
    Axiom(
        "A14", "warp collectives",
        "A `.sync.aligned` instruction (`mma.sync`, `ldmatrix`, `shfl.sync`) is executed by "
        "all lanes of the warp together: each lane waits until every lane of the warp "
        "executes the same instruction, so the warp's operand reads are complete, warp-wide, "
        "when any lane is past it.",
        f"PTX ISA, mma (\"The mandatory .sync qualifier ... the executing thread wait until "
        f"all threads in the warp execute the same mma instruction\") and \".aligned\" "
        f"({PTX}#warp-level-matrix-instructions-mma)",
        "documented",
        ("cakegov.analysis.execute:Executor.compute", "cakegov.sim.machine:Warp.converge",
         "cakegov.sim.machine:Machine.compute"),
    ),
    Axiom(
        "A15", "asynchronous groups",
        "`wgmma.commit_group` / `cp.async.bulk.commit_group` close a group of the thread's "
        "outstanding operations; `wait_group N` returns once all but the N most recent "
        "groups are complete. The groups of one thread complete in commit order.",
        f"PTX ISA, wgmma.wait_group and cp.async.bulk.wait_group ({PTX}"
        "#asynchronous-warpgroup-level-matrix-instructions-wgmma-wait-group)",
        "documented",
        ("cakegov.analysis.semantics:AsyncGroups",
         "cakegov.analysis.execute:Executor.groups_at_exit",
         "cakegov.sim.machine:Machine.group_wait"),
    ),
    Axiom(
        "A16", "wgmma.fence before a warpgroup's MMA",
        "Accumulator registers written by other instructions, and shared-memory operands "
        "written through the generic proxy, must be fenced by `wgmma.fence` before the "
        "`wgmma.mma_async` that uses them. The lowering emits it before every mma_async, so "
        "the checker never asks for it.",
        f"PTX ISA, wgmma.fence ({PTX}#asynchronous-warpgroup-level-matrix-instructions-"
        "wgmma-fence)",
        "lowering",
        ("rules/primitives/mma_async.py#wgmma_fence()",
         "cakegov/lower/templates/runtime.cuh.j2#wgmma_fence"),
    ),
    Axiom(
        "A17", "bulk stores read shared memory asynchronously",
        "A bulk store (`cp.async.bulk` shared to global) reads its source after issue, until "
        "`cp.async.bulk.wait_group.read` retires its group: the source may be overwritten, "
        "and the CTA may exit, only after that wait.",
        f"PTX ISA, cp.async.bulk.wait_group (\".read\" modifier) ({PTX}"
        "#data-movement-and-conversion-instructions-cp-async-bulk-wait-group)",
        "documented",
        ("cakegov.analysis.semantics:AsyncGroups",
         "cakegov.analysis.execute:Executor.groups_at_exit",
         "cakegov.sim.machine:Machine.at_exit"),
    ),
    Axiom(
        "A18", "remote arrives and copies into a peer CTA",
        "An arrive or copy into another CTA of the cluster (`mapa`, `.shared::cluster`, "
        "multicast) writes that CTA's shared memory; the destination CTA must not exit "
        "before it lands (a cluster barrier before the end orders it).",
        f"CUDA C++ Programming Guide, \"Distributed Shared Memory\" ({GUIDE}"
        "#distributed-shared-memory); PTX ISA mapa and barrier.cluster",
        "documented",
        ("cakegov.analysis.execute:Executor.remote_exit", "cakegov.sim.machine:Machine.peer"),
    ),
    Axiom(
        "A19", "generic accesses before an async-proxy write",
        "An async-proxy write of shared memory (a TMA or bulk copy refilling a stage) that a "
        "hand-off orders after generic-proxy reads or writes of the same bytes is ordered "
        "after them only if each accessing thread executed `fence.proxy.async` after its "
        "last access and before the release the copy's issue depends on; the release/acquire "
        "pair alone orders generic accesses for generic accesses. The lowering emits the "
        "fence before every mbarrier arrive, pipeline release and own bulk copy of a role "
        "that touches a refilled buffer through the generic proxy (including `ldmatrix` of "
        "an `mma_async` "
        "emitted as `mma.sync`); a hand-off through a named barrier needs `lm.fence_proxy()`.",
        f"PTX ISA, \"Memory Consistency Model: Proxies\" and membar/fence: fence.proxy.async, "
        f"a bi-directional proxy fence ({PTX}"
        "#parallel-synchronization-and-communication-instructions-membar); production code "
        "fences on this path: FlashAttention's SM90 backward (`fence_view_async_shared` "
        "before `consumer_release` of a stage read with `ld.shared`)",
        "documented",
        ("cakegov.analysis.semantics:proxy_fenced", "cakegov.analysis.semantics:needs_proxy_fence",
         "cakegov.analysis.execute:Executor.check_refill_fence",
         "cakegov.analysis.execute:Executor.proxy_fence",
         "cakegov.lower.derive:_Lowerer.release_fence",
         "cakegov.sim.memory:SharedMemory._unfenced_before_async_write",
         "cakegov.sim.memory:SharedMemory.fence"),
    ),
)

# What a device would show if each axiom were false (docs/checker.md prints it under the
# axiom; tests/test_axioms.py requires one per axiom).
IF_FALSE: dict[str, str] = {
    "A1": (
        "a wait on a phase whose arrivals are all in would block (or pass before the last "
        "arrival): correct kernels hang, or read a stage before its copy lands (wrong values "
        "that vary run to run)"
    ),
    "A2": (
        "a consumer that waits with the parity of the current phase would pass (or block) one"
        " phase off: the simulator's and the checker's lapping findings would not reproduce "
        "as hangs or stale reads, and valid rings would deadlock"
    ),
    "A3": (
        "producers that start on parity 1 (CUTLASS, every `ring.acquire`) would block on "
        "their first acquire: every pipelined kernel in the corpus would hang at its first "
        "stage"
    ),
    "A4": (
        "an extra arrive would be absorbed or carried into the next phase instead of being "
        "undefined: schedules the checker rejects for over-arrival would run correctly on the"
        " device"
    ),
    "A5": (
        "a copy that lands before its `expect_tx` would complete the phase early: the "
        "consumer would read a stage the rest of the copy is still writing (wrong values at "
        "random positions)"
    ),
    "A6": (
        "a consumer past its wait could see stale shared memory written before the producer's"
        " arrive: wrong values with every barrier in place, which compute-sanitizer's "
        "racecheck would report"
    ),
    "A7": (
        "a consumer that observed the copy's phase could still read old bytes, or a CTA could"
        " exit with its copy done: wrong tiles, and no error from exits with copies in flight"
    ),
    "A8": (
        "threads past a `bar.sync` could see writes made before the other participants' "
        "arrival missing, or the barrier could complete with fewer threads: epilogue hand-"
        "offs through shared memory would read stale data"
    ),
    "A9": (
        "an unfenced generic write read by wgmma or a bulk store would be seen anyway: "
        "schedules the checker rejects for a missing `fence.proxy.async` would give correct "
        "results on every run"
    ),
    "A10": (
        "a copy completing on a barrier initialised without the fence would still be counted:"
        " the checker's initialisation findings would never show as a hang or a lost phase"
    ),
    "A11": (
        "lanes past `__syncwarp` could miss writes of other lanes of their warp made before "
        "it: warp-local exchanges through shared memory would read stale values"
    ),
    "A12": (
        "lanes would run in lockstep, so an elected arrive after per-thread reads would be "
        "safe without `__syncwarp`: nothing would break, but the checker would reject (and "
        "the lowering would fence) schedules that are safe"
    ),
    "A13": (
        "a wgmma group could retire before a lagging warp of its warpgroup issued its part: a"
        " stage released by one thread per warpgroup after `wgmma.wait_group` could be "
        "refilled while a warp still reads it (wrong values in that warp's rows of the tile)"
    ),
    "A14": (
        "a lane past `mma.sync` or `ldmatrix` could run ahead of lanes still reading the "
        "operands: a per-warp release after them would let a refill overwrite operands other "
        "lanes still load"
    ),
    "A15": (
        "`wait_group N` could return with an older group still running: accumulator or source"
        " reads after the wait would see partial results"
    ),
    "A16": (
        "nothing a schedule can observe: the lowering emits `wgmma.fence` before every "
        "`mma_async` (if the fence were not needed the kernel would only be slower)"
    ),
    "A17": (
        "a bulk store's source could be overwritten after issue without changing the bytes "
        "stored: the checker's findings for overwriting before `wait_group.read` would never "
        "show as wrong output"
    ),
    "A18": (
        "a CTA could exit while a peer's copy or arrive into its shared memory is in flight "
        "without faults: cluster schedules without the final cluster barrier would run "
        "cleanly instead of faulting or corrupting a later CTA's memory"
    ),
    "A19": (
        "a copy issued after a bare release could never land under the releasing threads' "
        "outstanding generic reads of the old contents: the FlashAttention-3 transcriptions "
        "with two math warpgroups would have given correct results on the H200 without "
        "the fence, where they gave 2-22 % relative error intermittently"
    ),
}
# The source of every axiom was read in the PTX ISA 9.0 and the CUDA C++ Programming Guide
# of CUDA 13.0 (section names, not numbers: NVIDIA renumbers sections between releases).
# The "since" versions are the PTX ISA versions and targets that introduced the instruction
# forms the lowering emits for the axiom (as listed by CCCL's cuda::ptx reference, which
# gives the ISA version and target of each form); a toolchain older than that cannot emit
# the construct at all.
READ_IN_PTX = "PTX ISA 9.0 (CUDA 13.0)"
READ_IN_GUIDE = "CUDA C++ Programming Guide, CUDA 13.0"
VERSIONS: dict[str, str] = {
    "A1": f"{READ_IN_PTX}; mbarrier.init / arrive since PTX ISA 7.0, sm_80",
    "A2": f"{READ_IN_PTX}; test_wait.parity since PTX ISA 7.1, sm_80; try_wait.parity "
          "since PTX ISA 7.8, sm_90",
    "A3": f"{READ_IN_PTX}; try_wait.parity since PTX ISA 7.8, sm_90",
    "A4": f"{READ_IN_PTX}; mbarrier.arrive since PTX ISA 7.0, sm_80; the count operand "
          "since PTX ISA 7.8, sm_90",
    "A5": f"{READ_IN_PTX}; mbarrier.expect_tx, arrive.expect_tx and complete_tx since PTX "
          "ISA 8.0, sm_90",
    "A6": f"{READ_IN_PTX}; arrive.release and try_wait.acquire since PTX ISA 8.0, sm_90",
    "A7": f"{READ_IN_PTX}; cp.async.bulk(.tensor) with mbarrier::complete_tx::bytes since "
          "PTX ISA 8.0, sm_90",
    "A8": f"{READ_IN_PTX}; bar.sync with a thread count since PTX ISA 2.0; barrier.sync "
          "since PTX ISA 6.0",
    "A9": f"{READ_IN_PTX}; fence.proxy.async since PTX ISA 8.0, sm_90",
    "A10": f"{READ_IN_PTX}; fence.mbarrier_init.release.cluster since PTX ISA 8.0, sm_90",
    "A11": f"{READ_IN_GUIDE}; __syncwarp since CUDA 9.0 (bar.warp.sync, PTX ISA 6.0, "
           "sm_30)",
    "A12": f"{READ_IN_GUIDE}; independent thread scheduling since compute capability 7.0",
    "A13": f"{READ_IN_PTX}; wgmma.mma_async since PTX ISA 8.0, sm_90a",
    "A14": f"{READ_IN_PTX}; mma.sync.aligned m16n8k16 since PTX ISA 7.0, sm_80",
    "A15": f"{READ_IN_PTX}; wgmma.commit_group / wait_group and cp.async.bulk.commit_group "
           "/ wait_group since PTX ISA 8.0 (sm_90a for wgmma, sm_90 for bulk copies)",
    "A16": f"{READ_IN_PTX}; wgmma.fence since PTX ISA 8.0, sm_90a",
    "A17": f"{READ_IN_PTX}; cp.async.bulk.wait_group.read since PTX ISA 8.0, sm_90",
    "A18": f"{READ_IN_GUIDE} and {READ_IN_PTX}; mapa and barrier.cluster since PTX ISA "
           "7.8, sm_90",
    "A19": f"{READ_IN_PTX}; fence.proxy.async since PTX ISA 8.0, sm_90",
}
AXIOMS = tuple(replace(a, if_false=IF_FALSE[a.id], versions=VERSIONS[a.id]) for a in AXIOMS)

BY_ID = {a.id: a for a in AXIOMS}
STATUSES = ("documented", "assumed", "lowering")


def render_axioms() -> str:
    """The axiom table of docs/checker.md."""
    lines = ["<!-- Generated by `cakegov docs` from cakegov/analysis/axioms.py; "
             "do not edit by hand. -->", ""]
    for a in AXIOMS:
        lines.append(f"- **{a.id} {a.title}** ({a.status}). {a.statement}")
        lines.append(f"  Source: {a.source}. Versions: {a.versions}.")
        refs = ", ".join(f"`{r}`" for r in a.implemented_by)
        lines.append(f"  Implemented by: {refs}.")
        lines.append(f"  If it were false: {a.if_false}.")
    return "\n".join(lines) + "\n"
