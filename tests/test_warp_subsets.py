"""Part of a role (`with lm.warps(start, stop[, step]):`): the typed IR keeps the block,
the lowering marks its ops (LOp.subset) and counts only its warps, the emitter predicates
them on the warp's index in its role, the protocol analysis splits the role into warp
classes, the simulator skips the block on the other warps, and misuse is an input
error, R007 or H007. The corpus holds the protocol cases (P002, P011, P014, R007)."""

from __future__ import annotations

import pytest

from cakegov.analysis.program import Builder, arrivals, executes, warp_classes
from cakegov.ir.canonical import canonical_json
from cakegov.ir.errors import InputError
from cakegov.ir.nodes import Warps
from cakegov.ir.parse import parse_source, walk_statements
from cakegov.lower.emit import emit_cuda
from cakegov.lower.kernel import LArrive, LCompute, LFence, LFor, LNamedSync
from cakegov.lower.text import lowered_text
from cakegov.sim.evidence import lower_any, simulate_evidence

from .conftest import CORPUS

WG = (CORPUS / "valid/gemm/elected_release_per_warpgroup_s4.cake").read_text(
    encoding="utf-8")
EPI = (CORPUS / "valid/gemm/epilogue_subtiles_producer_warp.cake").read_text(
    encoding="utf-8")


def parse(text, checker):
    return parse_source(text, checker.vocabulary)


def lowered(text, rulebook, workloads):
    kernel, _, _, why = lower_any(text.encode(), "t.cake", rulebook, workloads)
    assert kernel is not None, why
    return kernel


def _ops(ops):
    for op in ops:
        yield op
        if isinstance(op, LFor):
            yield from _ops(op.body)


# ---- front end -------------------------------------------------------------------------

def test_blocks_are_ir_nodes_with_their_warps(checker):
    schedule = parse(WG, checker)
    math = schedule.role("math")
    blocks = [s for s, _ in walk_statements(math.body) if isinstance(s, Warps)]
    assert [b.members for b in blocks] == [(0, 1, 2, 3), (4, 5, 6, 7), (0, 4)]
    assert blocks[2].step == 4 and blocks[2].path == "roles.math.body[0].body[5]"
    inner = blocks[2].body[0]
    assert inner.path == "roles.math.body[0].body[5].body[0]"
    assert inner.primitive == "mbarrier_arrive"
    assert '"kind":"warps"' in canonical_json(schedule)


def test_identity_of_schedules_without_blocks_is_unchanged(checker):
    plain = parse((CORPUS / "valid/gemm/raw_barriers_s2.cake").read_text(), checker)
    text = canonical_json(plain)
    assert '"kind":"warps"' not in text and '"tile"' not in text and '"subset"' not in text


@pytest.mark.parametrize("block, code, words", [
    ("with lm.warps(0, 9):", "E103", "inside the role"),
    ("with lm.warps(2, 2):", "E103", "inside the role"),
    ("with lm.warps(0, 4, 0):", "E103", "must be positive"),
    ("with lm.warps(start=0, stop=1):", "E103", "positional"),
    ("with lm.warps(0):", "E103", "2 or 3"),
    ("with lm.warps(0, 4) as w:", "E105", "cannot nest"),
])
def test_malformed_blocks_are_located_input_errors(checker, block, code, words):
    text = WG.replace("with lm.warps(0, 4):", block, 1)
    with pytest.raises(InputError) as exc:
        parse(text, checker)
    assert exc.value.code == code and words in exc.value.message
    assert exc.value.span.line == WG[:WG.index("with lm.warps(0, 4):")].count("\n") + 1


def test_blocks_do_not_nest(checker):
    text = WG.replace("                wg0.sync()", "                with lm.warps(0, 1):\n"
                      "                    wg0.sync()", 1)
    with pytest.raises(InputError) as exc:
        parse(text, checker)
    assert exc.value.code == "E105" and "cannot nest" in exc.value.message


# ---- lowering and emission -------------------------------------------------------------

def test_ops_of_a_block_carry_its_warps_and_count_them(rulebook, workloads):
    kernel = lowered(WG, rulebook, workloads)
    math = next(r for r in kernel.roles if r.name == "math")
    arrive = next(op for op in _ops(math.body) if isinstance(op, LArrive))
    assert arrive.subset == (0, 4) and arrive.arrivals == 2 and arrive.per == "warp"
    syncs = [op for op in _ops(math.body) if isinstance(op, LNamedSync)]
    assert [(s.subset, s.threads) for s in syncs] == [((0, 1, 2, 3), 128), ((4, 5, 6, 7), 128)]
    loader = next(r for r in kernel.roles if r.name == "loader")
    assert all(op.subset == (0,) for op in loader.body)
    text = lowered_text(kernel)
    assert "warps [0, 4] of the role only:" in text


def test_role_syncs_inside_a_block_cover_the_block(rulebook, workloads):
    kernel = lowered(EPI, rulebook, workloads)
    loader = next(r for r in kernel.roles if r.name == "loader")
    derived = [op for op in _ops(loader.body) if getattr(op, "derived", "")]
    # one-warp block: __syncwarp, never the role's 128-thread barrier
    assert derived and all(isinstance(op, LFence) and op.scope == "warp" for op in derived)
    # a multi-warp block that stores gets a barrier of its own, after the role barriers
    text = EPI.replace("with lm.warps(0, 1):                                 # the producer "
                       "warp", "with lm.warps(0, 2):")
    text = text.replace("threads=160", "threads=192")
    kernel = lowered(text, rulebook, workloads)
    (reserved,) = kernel.subset_barriers
    assert reserved.role == "loader" and reserved.warps == (0, 1)
    used = {n.id for n in kernel.named_barriers} | {0} | {
        kernel.role_barrier(r.name) for r in kernel.roles} - {None}
    assert reserved.id not in used
    loader = next(r for r in kernel.roles if r.name == "loader")
    syncs = [op for op in _ops(loader.body) if isinstance(op, LNamedSync) and op.derived]
    assert syncs and all(s.id == reserved.id and s.threads == 64 for s in syncs)


def test_emitted_blocks_are_warp_uniform_predicates(rulebook, workloads):
    kernel = lowered(WG, rulebook, workloads)
    source = emit_cuda(kernel, rulebook.primitives, verifier_digest="x").source
    assert "if (cg_rwarp >= 0 && cg_rwarp <= 4 && (cg_rwarp - 0) % 4 == 0) {" in source
    assert "if (cg_rwarp >= 4 && cg_rwarp <= 7) {" in source
    # inside a block the block's first warp is the issuer and lane 0 of it the elected one
    assert "const int cg_rwarp = cg_subwarp;" in source
    assert "const int cg_rtid = cg_subwarp * 32 + cg_lane;" in source


# ---- the protocol model ----------------------------------------------------------------

def test_split_roles_are_warp_classes(rulebook, workloads):
    kernel = lowered(WG, rulebook, workloads)
    math = next(r for r in kernel.roles if r.name == "math")
    assert warp_classes(math) == [(0,), (1, 2, 3), (4,), (5, 6, 7)]
    loader = next(r for r in kernel.roles if r.name == "loader")
    assert warp_classes(loader) == [(0,), (1, 2, 3)]
    arrive = next(op for op in _ops(math.body) if isinstance(op, LArrive))
    assert executes((0,), arrive) and not executes((1, 2, 3), arrive)
    assert arrivals((4,), arrive) == 1
    program = Builder(kernel, symmetry=False).build({"M": 128, "N": 128, "K": 512})
    by_part = {(t.role, t.members): t for t in program.threads}
    idle = by_part[("loader", (1, 2, 3))]
    assert idle.events == []  # the loader's other warps only run setmaxnreg
    worker = by_part[("math", (5, 6, 7))]
    kinds = {e.kind for e in worker.events}
    assert "arrive" not in kinds and {"wait", "named", "compute"} <= kinds
    named = [e for e in worker.events if e.kind == "named"]
    assert all(e.n == 96 for e in named)  # three warps bring 96 of wg1's 128 threads
    assert worker.events[0].where().startswith("math (warps 5..7) line")
    # the two warpgroups run the same code, each on its own named barrier: with the
    # symmetry reduction (tests/test_symmetry.py) each class stands for both
    reduced = Builder(kernel).build({"M": 128, "N": 128, "K": 512})
    assert [(t.role, t.members, t.rep) for t in reduced.threads if t.role == "math"] == [
        ("math", (0, 4), (0,)), ("math", (1, 2, 3, 5, 6, 7), (1, 2, 3))]


def test_a_whole_role_is_one_model_thread(rulebook, workloads):
    """The math role runs as one model thread. The loader only waits and issues copies
    from one elected thread (an issue-only role, cakegov/lower/derive.py issuing_warp), so
    the lowering runs its body on its first warp alone: that warp is one thread, the
    warps that skip the loop another."""
    kernel = lowered((CORPUS / "valid/gemm/raw_barriers_s2.cake").read_text(), rulebook,
                     workloads)
    program = Builder(kernel).build({"M": 128, "N": 128, "K": 256})
    assert [(t.role, t.members) for t in program.threads] == [
        ("loader", (0,)), ("loader", (1, 2, 3)), ("math", ())]


def test_a_partial_sync_is_counted_by_the_threads_that_reach_it(checker):
    bad = EPI.replace("ready = lm.named_barrier(id=1, threads=160)",
                      "ready = lm.named_barrier(id=1, threads=224)")
    result = checker.check_bytes(bad.encode(), "t.cake")
    (f,) = [f for f in result.findings if f.severity == "blocking"]
    assert f.code == "R007" and "`loader` (warp 0) 32 + `math` 128" in f.message
    assert "threads=160" in f.hint


def test_an_elected_release_without_the_warpgroup_barrier_is_a_race(checker):
    path = CORPUS / "invalid/gemm/elected_release_without_warpgroup_sync.cake"
    result = checker.check_path(path)
    (f,) = [f for f in result.findings if f.severity == "blocking"]
    assert f.code == "P011" and "warps 1, 2, 3, 5, 6, 7" in f.message
    assert f.fixes and any("math_sync.sync()" in e.text for e in f.fixes[0].edits)
    # the barrier over the role is put before the block, not inside it
    inserted = next(e for e in f.fixes[0].edits if "math_sync.sync()" in e.text)
    assert inserted.text.startswith("            math_sync")  # the block's indentation


@pytest.mark.parametrize("call, scope", [("lm.sync_cta()", "every thread of the CTA"),
                                         ("lm.sync_cluster()", "every thread of the cluster"),
                                         ("lm.mma_wait(pending=0)", "aligned warpgroup")])
def test_collectives_in_a_block_are_h007(checker, call, scope):
    arrive = "                empty[k % S].arrive()"
    text = WG.replace(arrive, f"                {call}\n{arrive}", 1)  # in warps 0 and 4
    result = checker.check_bytes(text.encode(), "t.cake")
    (f,) = [f for f in result.findings if f.severity == "blocking"]
    assert f.code == "H007" and scope in f.message and "warps 0, 4 of role `math`" in f.message


def test_warpgroup_instructions_in_whole_warpgroups_are_fine(checker):
    text = WG.replace("                wg0.sync()", "                wg0.sync()\n"
                      "                lm.mma_wait(pending=0)", 1)
    result = checker.check_bytes(text.encode(), "t.cake")
    assert "H007" not in [f.code for f in result.findings]


# ---- the simulator ---------------------------------------------------------------------

def test_warps_outside_a_block_skip_it(rulebook, workloads):
    # only the first warp of the math role stores its part of the accumulator: the
    # other warps' elements stay poisoned in the output
    text = WG.replace("        lm.store(C, at=(m0, n0), src=acc, mask=True)",
                      "        with lm.warps(0, 1):\n"
                      "            lm.store(C, at=(m0, n0), src=acc, mask=True)")
    ev = simulate_evidence(text.encode(), "t.cake", rulebook, workloads, seeds=1)
    assert ev["status"] == "defect" and ev["detail"].startswith("wrong result")


def test_a_partial_named_barrier_deadlocks_in_the_simulator(rulebook, workloads):
    path = CORPUS / "invalid/gemm/producer_warp_barrier_whole_warpgroup.cake"
    ev = simulate_evidence(path.read_bytes(), str(path), rulebook, workloads, seeds=1)
    assert ev["status"] == "defect" and "160 of 256 threads" in ev["detail"]


def test_an_elected_arrive_in_a_block_counts_one_per_block_warp(rulebook, workloads):
    kernel = lowered(WG, rulebook, workloads)
    assert any(isinstance(op, LCompute) for op in _ops(kernel.roles[1].body))
    ev = simulate_evidence(WG.encode(), "t.cake", rulebook, workloads, seeds=1)
    assert ev["status"] == "correct"


def test_different_warps_at_different_uses_are_left_to_the_exploration(checker):
    # warp 0 and then warp 1 of the loader each meet the worker at `ready` (160 = 128 +
    # 32): R007 cannot count that statically; the exploration finds that warp 1's
    # bar.arrive is not ordered after the first instance and can be counted in it
    text = (CORPUS / "valid/scale/named_barrier_handoff.cake").read_text()
    text = text.replace("threads=256)", "threads=160)")
    text = text.replace("        ready.arrive()\n",
                        "        with lm.warps(0, 1):\n            ready.arrive()\n"
                        "        with lm.warps(1, 2):\n            ready.arrive()\n")
    text = text.replace("        ready.sync()\n", "        ready.sync()\n        ready.sync()\n")
    result = checker.check_bytes(text.encode(), "t.cake")
    blocking = [f for f in result.findings if f.severity == "blocking"]
    assert blocking and "R007" not in {f.code for f in blocking}
    assert any("without being ordered after instance 0" in f.message for f in blocking)
    assert blocking[0].span.line == text[:text.index("with lm.warps(1, 2)")].count("\n") + 2


def test_a_store_wait_of_the_whole_role_waits_in_the_warp_that_stored(checker, rulebook,
                                                                       workloads):
    # the last warp issues the bulk stores in a block; a drain by the whole role is
    # executed by every warp, each waiting for the groups its own lanes committed: the
    # emitted code, the model and the simulator agree that warp 3's stores are drained
    text = (CORPUS / "valid/softmax/rows_subtile_store_last_warp.cake").read_text()
    text = text.replace("        with lm.warps(3, 4):\n            lm.store_wait(pending=0)",
                        "        lm.store_wait(pending=0)")
    assert checker.check_bytes(text.encode(), "t.cake").verdict == "clean"
    kernel = lowered(text, rulebook, workloads)
    source = emit_cuda(kernel, rulebook.primitives, verifier_digest="x").source
    drain = source[source.rindex("): store_wait"):]
    assert drain.splitlines()[1].strip().startswith("cg::bulk_wait_read<0>();")
    assert "if (cg_rwarp == 0) cg::bulk" not in source
    ev = simulate_evidence(text.encode(), "t.cake", rulebook, workloads, seeds=1)
    assert ev["status"] == "correct", ev["detail"]
