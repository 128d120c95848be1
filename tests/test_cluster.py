"""Thread-block clusters and TMA multicast: the front end (`lm.cluster_rank`, rank-dependent
loops, `multicast=`, `cta=`, `lm.sync_cluster()`), the joined cluster program of the
protocol analysis, the CUDA lowering and the simulator running a cluster's CTAs together."""

from __future__ import annotations

import pytest

from cakegov.analysis.cluster import build, cross_cta, members
from cakegov.analysis.program import Builder
from cakegov.ir.errors import InputError
from cakegov.ir.expr import BinOp, Block, Const
from cakegov.ir.parse import parse_bytes
from cakegov.lower.emit import emit_cuda
from cakegov.sim.evidence import lower_any
from cakegov.sim.run import Options, simulate_run

from .conftest import CORPUS

GEMM = CORPUS / "valid/gemm/cluster2_multicast_s4.cake"
KMEANS = CORPUS / "valid/kmeans_assign/cluster2_centroids_multicast.cake"


def _source(edit: tuple[str, str] | None = None) -> str:
    text = GEMM.read_text()
    if edit is not None:
        assert edit[0] in text
        text = text.replace(edit[0], edit[1])
    return text


def _kernel(rulebook, workloads, text: str):
    kernel, workload, _schedule, why = lower_any(text.encode(), "t.cake", rulebook, workloads)
    assert kernel is not None, why
    return kernel, workload


def _anomalies(checker, text: str):
    schedule = parse_bytes(text.encode(), checker.vocabulary)
    return checker.context(schedule, "t.cake").protocol


# ---- front end ------------------------------------------------------------------------


def test_cluster_rank_is_the_block_index_modulo_the_cluster(checker):
    schedule = parse_bytes(GEMM.read_bytes(), checker.vocabulary)
    loader = schedule.role("loader")
    inner = loader.body[0].body[3]  # for lead in lm.range(rank, 1)
    assert inner.start == BinOp(op="%", lhs=Block(axis=0), rhs=Const(value=2))
    load = inner.body[0]
    assert load.args["multicast"].expr == Const(value=3)
    release = schedule.role("math").body[0].body[3]
    assert release.args["cta"].expr == BinOp(op="-", lhs=Const(value=1), rhs=inner.start)


def test_linear_rank_over_a_two_dimensional_cluster(checker):
    text = _source(("cluster=(CX, 1, 1))", "cluster=(CX, 2, 1))")).replace(
        "rank = lm.cluster_rank(0)", "rank = lm.cluster_rank()")
    schedule = parse_bytes(text.encode(), checker.vocabulary)
    start = schedule.role("loader").body[0].body[3].start
    x = BinOp(op="%", lhs=Block(axis=0), rhs=Const(value=2))
    y = BinOp(op="%", lhs=Block(axis=1), rhs=Const(value=2))
    assert start == BinOp(op="+", lhs=x, rhs=BinOp(op="*", lhs=Const(value=2), rhs=y))


def test_loop_bounds_may_depend_on_the_block_index(checker):
    # a persistent tile loop (cakegov/ir/persistent.py): peers need not share the rank form
    text = _source(("lm.range(rank, 1)", "lm.range(lm.block(0), 1)"))
    schedule = parse_bytes(text.encode(), checker.vocabulary)
    assert schedule.role("loader").body[0].body[3].start == Block(axis=0)


def test_cluster_rank_needs_the_launch_first(checker):
    text = GEMM.read_text().replace(
        "    KT = lm.cdiv(lm.K, BK)\n", "    KT = lm.cdiv(lm.K, BK)\n    R0 = lm.cluster_rank(0)\n")
    with pytest.raises(InputError) as err:
        parse_bytes(text.encode(), checker.vocabulary)
    assert err.value.code == "E105"


# ---- the joined cluster program ---------------------------------------------------------


def test_cluster_program_replicates_slots_and_splits_the_multicast(rulebook, workloads):
    kernel, _ = _kernel(rulebook, workloads, GEMM.read_text())
    assert cross_cta(kernel)
    assert members(kernel, (3, 5, 0)) == [(2, 5, 0), (3, 5, 0)]
    builder = Builder(kernel)
    program = build(builder, {"M": 256, "N": 128, "K": 256}, (0, 0, 0), 100_000)
    assert program.cluster == 2 and len(program.slots) == 2 * len(builder.slots)
    assert [t.cta for t in program.threads] == [0, 0, 1, 1]
    copies = [ev for t in program.threads for ev in t.events if ev.kind == "copy"]
    # CTA 0: A into itself, B into itself and into CTA 1; CTA 1: A only (4 K steps each)
    assert sorted((c.cta, c.mem[0].name, c.peer) for c in copies if c.iters[0][1] == 0) == [
        (0, "a_s", -1), (0, "b_s", -1), (0, "b_s", 1), (1, "a_s", -1)]
    per = len(builder.slots)
    into_peer = [c for c in copies if c.peer == 1]
    assert all(c.slot >= per for c in into_peer)
    remote = [ev for t in program.threads for ev in t.events
              if ev.kind == "arrive" and ev.peer >= 0]
    assert {(ev.cta, ev.peer) for ev in remote} == {(0, 1), (1, 0)}


def test_the_valid_cluster_schedule_has_no_anomaly(checker):
    result = _anomalies(checker, GEMM.read_text())
    assert not result.anomalies and not result.incomplete
    assert all(r.program.cluster == 2 for r in result.runs)


@pytest.mark.parametrize("edit, kind", [
    (("        lm.store(C, at=(m0, n0), src=acc, mask=True)\n        lm.sync_cluster()\n",
      "        lm.store(C, at=(m0, n0), src=acc, mask=True)\n"), "deadlock"),
    (("        lm.sync_cluster()\n", ""), "exit-remote"),
    (("            empty[k % S].arrive(cta=peer)", "            empty[k % S].arrive()"),
     "premature"),
    (("bytes=lm.nbytes(a_s, b_s)", "bytes=lm.nbytes(a_s) + (1 - rank) * lm.nbytes(b_s)"),
     None),
])
def test_cluster_defects_are_anomalies_with_a_witness(checker, edit, kind):
    result = _anomalies(checker, _source(edit))
    assert result.anomalies
    if kind is not None:
        assert kind in {a.kind for a in result.anomalies}
    assert all(a.witness for a in result.anomalies)
    assert any("CTA 1" in a.message for a in result.anomalies)


def test_a_multicast_never_refilled_needs_no_cluster_barrier(checker):
    result = _anomalies(checker, KMEANS.read_text())
    assert not result.anomalies and not result.incomplete


# ---- lowering and simulation ---------------------------------------------------------------


def test_cuda_uses_the_cluster_instructions(rulebook, workloads):
    kernel, _ = _kernel(rulebook, workloads, GEMM.read_text())
    cuda = emit_cuda(kernel, rulebook.primitives, verifier_digest="test").source
    for needle in ("__cluster_dims__(2, 1, 1)", "mapa.shared::cluster.u32",
                   "mbarrier.arrive.release.cluster.shared::cluster.b64",
                   "multicast::cluster", "barrier.cluster.arrive.release.aligned",
                   "barrier.cluster.wait.acquire.aligned", "cg::arrive_remote("):
        assert needle in cuda, needle


def test_simulator_runs_the_cluster_together(rulebook, workloads):
    kernel, workload = _kernel(rulebook, workloads, GEMM.read_text())
    run = simulate_run(kernel, workload, rulebook.primitives, {"M": 256, "N": 128, "K": 256})
    assert run.outcome == "correct", run.detail


def test_simulator_catches_a_peer_that_exits_early(rulebook, workloads):
    text = _source(("        lm.store(C, at=(m0, n0), src=acc, mask=True)\n"
                    "        lm.sync_cluster()\n",
                    "        lm.store(C, at=(m0, n0), src=acc, mask=True)\n"))
    text = text.replace("        lm.sync_cluster()\n    with math", "    with math")
    kernel, workload = _kernel(rulebook, workloads, text)
    outcomes = {simulate_run(kernel, workload, rulebook.primitives,
                             {"M": 256, "N": 128, "K": 256},
                             Options(strategy="random", seed=seed)).outcome
                for seed in range(3)}
    assert "defect" in outcomes


def test_simulator_catches_bytes_armed_per_issuer(rulebook, workloads):
    text = _source(("bytes=lm.nbytes(a_s, b_s)",
                    "bytes=lm.nbytes(a_s) + (1 - rank) * lm.nbytes(b_s)"))
    kernel, workload = _kernel(rulebook, workloads, text)
    run = simulate_run(kernel, workload, rulebook.primitives, {"M": 256, "N": 128, "K": 256})
    assert run.outcome == "defect"
