"""Axiom A19 in the lowering, over the whole valid corpus: every kernel whose role reads or
writes a copy-refilled buffer through the generic proxy fences (`fence.proxy.async`)
before each mbarrier arrive, pipeline release and own bulk copy of that role, in the
lowered kernel and in the emitted CUDA, and no other kernel gains a fence. The expected
set is computed here from the lowered kernel's accesses, not from the lowering's own
bookkeeping."""

from __future__ import annotations

import re

from cakegov.lower.emit import emit_cuda
from cakegov.lower.kernel import LArrive, LCompute, LCopy, LFence, LFor
from cakegov.sim.evidence import lower_any

from .conftest import CORPUS

VALID = sorted((CORPUS / "valid").rglob("*.cake"))
RELEASES = ("mbarrier_arrive", "pipeline_release")


def _ops(body):
    for op in body:
        if isinstance(op, LFor):
            yield from _ops(op.body)
        else:
            yield op


def _lowered(path, rulebook, workloads):
    kernel, _wl, _s, why = lower_any(path.read_bytes(), str(path), rulebook, workloads)
    assert kernel is not None, why
    return kernel


def _expected(kernel) -> dict[str, set[str]]:
    """Role -> the refilled buffers it touches through the generic proxy."""
    refilled = {op.buffer for r in kernel.roles for op in _ops(r.body) if isinstance(op, LCopy)}
    out: dict[str, set[str]] = {}
    for r in kernel.roles:
        names = {a.name for op in _ops(r.body) if isinstance(op, LCompute)
                 for a in (*op.reads, *op.writes)
                 if a.space == "smem" and a.proxy == "generic" and a.name in refilled}
        if names:
            out[r.name] = names
    return out


def _fenced_before(ops: list, i: int) -> bool:
    """Is op i preceded by a proxy fence with no shared-memory access in between (only
    syncs, waits and other arrives)?"""
    for op in reversed(ops[:i]):
        if isinstance(op, LFence) and op.scope == "proxy_async":
            return True
        if isinstance(op, (LCompute, LCopy)):
            return False
    return False


def test_every_release_after_generic_accesses_of_a_refilled_stage_is_fenced(rulebook,
                                                                            workloads):
    gained = []
    for path in VALID:
        kernel = _lowered(path, rulebook, workloads)
        expected = _expected(kernel)
        derived = 0
        for r in kernel.roles:
            ops = list(_ops(r.body))
            for i, op in enumerate(ops):
                if isinstance(op, LFence) and op.scope == "proxy_async" and op.derived:
                    derived += 1
                    assert r.name in expected, (path.name, r.name, op.path)
                handoff = (isinstance(op, LArrive) and op.source in RELEASES) or \
                    isinstance(op, LCopy)  # the role sync before its own copy
                if handoff and r.name in expected:
                    assert _fenced_before(ops, i), (path.name, r.name, op.path)
        if derived:
            gained.append(path.name)
            src = emit_cuda(kernel, rulebook.primitives,
                            verifier_digest=rulebook.digest()).source
            body = src[src.index("__global__"):]
            assert body.count("cg::fence_proxy_async();") >= derived, path.name
            assert re.search(r"fence the lowering inserts for (arrive|pipeline_release|load) "
                             r"after generic accesses of `", body), path.name
    # FA3's three transcriptions with two math warpgroups are among them (the kernels the
    # H200 contradicted), and kernels whose generic readers read nothing a copy refills
    # are not
    assert {"fa3_mainloop_d128.cake", "fa3_persistent_causal_d128.cake",
            "fa3_producer_warp_d128.cake"} <= set(gained)
    assert "cutlass_coop_wgmma_s4.cake" not in gained  # wgmma reads through the async proxy
    assert len(gained) < len(VALID)


def test_an_mma_async_emitted_as_mma_sync_reads_through_the_generic_proxy(rulebook,
                                                                           workloads):
    kinds = set()
    for rel in ("valid/attention/fa3_wgmma_mainloop_d128.cake",
                "valid/gemm/cutlass_coop_wgmma_s4.cake"):
        kernel = _lowered(CORPUS / rel, rulebook, workloads)
        for op in (op for r in kernel.roles for op in _ops(r.body)
                   if isinstance(op, LCompute) and op.primitive == "mma_async"):
            kinds.add(op.wgmma is not None)
            proxies = {a.proxy for a in op.reads if a.space == "smem"}
            assert proxies == ({"async"} if op.wgmma is not None else {"generic"}), op.path
    assert kinds == {True, False}  # both a real wgmma and an mma.sync fallback were seen
