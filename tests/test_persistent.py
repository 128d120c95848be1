"""Persistent kernels and tile schedulers: `lm.grid(axis)`, loops whose bounds depend on
the CTA, grid-stride steps and running counters, through the front end, the lowering and
CUDA emission, the protocol analysis (every class of CTAs, counters evaluated with numpy
as the builder evaluates them one by one), the simulator and the rules (P026, and P008 /
P019 on persistent loops)."""

from __future__ import annotations

import numpy as np
import pytest

from cakegov.analysis import ctas as cta_classes
from cakegov.analysis.cluster import cross_cta, members
from cakegov.analysis.grid import Store, count, tiles
from cakegov.analysis.program import Builder
from cakegov.analysis.protocol import ctas
from cakegov.analysis.window import plan
from cakegov.cost.profile import profile
from cakegov.ir.canonical import canonical_json
from cakegov.ir.errors import InputError
from cakegov.ir.expr import BinOp, Block, Const, Counter, Env, compile_expr, evaluate
from cakegov.ir.nodes import For
from cakegov.ir.parse import parse_bytes
from cakegov.lower.emit import emit_cuda
from cakegov.lower.text import lowered_text
from cakegov.sim.evidence import lower_any
from cakegov.sim.run import Options, sample_ctas, simulate_run

from .conftest import CORPUS

COOP = CORPUS / "valid/gemm/persistent_coop_cluster2_s4.cake"
PINGPONG = CORPUS / "valid/gemm/persistent_pingpong_cluster2_s4.cake"
DEEPGEMM = CORPUS / "valid/gemm/persistent_deepgemm_fp8_s2.cake"
FA3 = CORPUS / "valid/attention/fa3_persistent_causal_d128.cake"
KMEANS = CORPUS / "valid/kmeans_assign/persistent_rows_s2.cake"
RESTART = CORPUS / "invalid/gemm/persistent_phase_restart.cake"
IDLE = CORPUS / "invalid/kmeans_assign/persistent_centroids_unwaited_idle_cta.cake"


def _parse(checker, text: str):
    return parse_bytes(text.encode(), checker.vocabulary)


def _error(checker, text: str) -> InputError:
    with pytest.raises(InputError) as err:
        _parse(checker, text)
    return err.value


def _kernel(rulebook, workloads, text: str):
    kernel, workload, _schedule, why = lower_any(text.encode(), "t.cake", rulebook, workloads)
    assert kernel is not None, why
    return kernel, workload


def _check(checker, text: str):
    return checker.check_bytes(text.encode(), "t.cake")


def _codes(result) -> list[tuple[str, int]]:
    return sorted((f.code, f.span.line) for f in result.findings if f.severity == "blocking")


# ---- front end ----------------------------------------------------------------------


def test_grid_is_the_launch_extent_and_the_step_may_be_an_expression(checker):
    schedule = _parse(checker, COOP.read_text())
    loop = schedule.role("loader").body[0]
    assert isinstance(loop, For)
    assert loop.start == BinOp(op="//", lhs=Block(axis=0), rhs=Const(value=2))
    # lm.grid(0) // CX: the launch's own expression, divided by the cluster
    assert isinstance(loop.step, BinOp) and loop.step.lhs == schedule.launch.grid[0]
    inner = loop.body[0]  # the let-binding of m0, n0 is no statement
    assert isinstance(inner, For) and inner.counter == "it"
    wait = inner.body[0]
    assert wait.args["bar"].index == BinOp(op="%", lhs=Counter(name="it"), rhs=Const(value=4))


def test_schedules_without_the_new_constructs_keep_their_identity(checker):
    text = (CORPUS / "valid/gemm/ws_pipeline_s4.cake").read_text()
    assert '"counter"' not in canonical_json(_parse(checker, text))
    assert '"counter":"it"' in canonical_json(_parse(checker, COOP.read_text()))


@pytest.mark.parametrize(("edit", "code", "words"), [
    (("    it = lm.counter()", "    it = lm.counter(1)"), "E103", "no argument"),
    (("lm.range(0, KT, counter=it):\n                empty", "lm.range(0, KT, counter=KT):\n"
      "                empty"), "E103", "not a counter"),
    (("lm.range(0, KT, counter=it):\n                empty", "lm.range(0, it):\n"
      "                empty"), "E103", "cannot bound"),
    (("lm.grid(0) // CX):\n            m0, n0 = ((t % CTM) * CX + rank) * BM, (t // CTM) * BN\n"
      "            for k in lm.range(0, KT, counter=it):\n                empty",
      "0):\n            m0, n0 = ((t % CTM) * CX + rank) * BM, (t // CTM) * BN\n"
      "            for k in lm.range(0, KT, counter=it):\n                empty"),
     "E103", "positive"),
    (("for k in lm.range(0, KT, counter=it):\n                empty",
      "for k in lm.range(0, KT, t):\n                empty"), "E103", "not over loop"),
    (("            empty[it % S].wait(parity=(it // S + 1) % 2)\n    with math:",
      "            for again in lm.range(0, 1, counter=it):\n                pass\n"
      "            empty[it % S].wait(parity=(it // S + 1) % 2)\n    with math:"),
     "E105", "already advanced"),
    (("    with loader:\n", "    with loader:\n        c = lm.counter()\n"), "E105",
     "top of the schedule"),
])
def test_misuses_are_located_input_errors(checker, edit, code, words):
    text = COOP.read_text()
    assert edit[0] in text
    err = _error(checker, text.replace(edit[0], edit[1], 1))
    assert err.code == code and words in err.message
    assert err.span.line > 1


def test_grid_needs_the_launch_first(checker):
    text = COOP.read_text().replace("    KT = lm.cdiv(lm.K, BK)\n",
                                    "    KT = lm.cdiv(lm.K, BK)\n    G0 = lm.grid(0)\n", 1)
    assert _error(checker, text).code == "E105"


# ---- lowering and CUDA --------------------------------------------------------------


def test_counters_and_grid_stride_loops_reach_the_cuda(rulebook, workloads):
    kernel, _ = _kernel(rulebook, workloads, COOP.read_text())
    cuda = emit_cuda(kernel, rulebook.primitives, verifier_digest="test").source
    assert cuda.count("int n_it = 0;") == 2  # one per role that uses it
    assert "v_k += 1, ++n_it)" in cuda and "v_tail += 1, ++n_it)" in cuda
    assert "for (int v_t = cg::floordiv((int)blockIdx.x, 2);" in cuda
    assert "cg::floormod(n_it, 4)" in cuda
    text = lowered_text(kernel)
    assert "advancing counter it" in text and "step (" in text


def test_compiled_expressions_match_evaluate():
    e = BinOp(op="%", lhs=BinOp(op="//", lhs=Counter(name="it"), rhs=Const(value=4)),
              rhs=BinOp(op="cdiv", lhs=Block(axis=0), rhs=Const(value=3)))
    fn = compile_expr(e)
    for it in range(-9, 40, 7):
        for b in range(1, 8):
            env = Env(vars={"it": it}, blocks={0: b})
            assert fn({}, {"it": it}, {0: b}) == evaluate(e, env)


# ---- protocol analysis --------------------------------------------------------------


def _sig(program) -> tuple:
    return program.signature()


@pytest.mark.parametrize(("path", "sizes"), [
    (FA3, {"M": 1025, "N": 1025, "D": 128}),
    (KMEANS, {"N": 1000, "K": 16, "D": 64}),
    (DEEPGEMM, {"M": 256, "N": 384, "K": 512, "KB": 4, "NB": 3}),
    (CORPUS / "invalid/gemm/persistent_tile_count_floor.cake",
     {"M": 1000, "N": 520, "K": 256}),
])
def test_cta_classes_are_exactly_the_distinct_programs(rulebook, workloads, path, sizes):
    """The numpy signatures (counters by segmented prefix sums) split the grid exactly as
    building every CTA's program one event at a time does."""
    kernel, _ = _kernel(rulebook, workloads, path.read_text())
    sig = cta_classes.signatures(kernel, sizes)
    builder = Builder(kernel)
    dims = cta_classes.grid_of(kernel, sizes)
    programs = [_sig(builder.build(sizes, (c % dims[0], c // dims[0] % dims[1], 0)))
                for c in range(len(sig))]
    for a in range(len(sig)):
        for b in range(a + 1, len(sig)):
            assert (sig[a] == sig[b]).all() == (programs[a] == programs[b]), (a, b)
    reps = cta_classes.classes(kernel, sizes)
    assert len(reps) == len(set(programs))


def test_every_trip_count_class_is_analysed(rulebook, workloads):
    kernel, _ = _kernel(rulebook, workloads, COOP.read_text())
    picked = ctas(kernel, {"M": 4096, "N": 4096, "K": 4096})
    # 512 cluster tiles over 66 clusters: clusters 0..49 take 8, the others 7
    assert picked == [(0, 0, 0), (130, 0, 0)]
    kmeans, _ = _kernel(rulebook, workloads, KMEANS.read_text())
    picked = ctas(kmeans, {"N": 1000, "K": 16, "D": 64})
    assert (0, 0, 0) in picked and any(c[0] >= 16 for c in picked)  # a CTA with no tile


def test_a_grid_of_one_cta_per_sm_is_also_checked_where_a_cta_walks_several_tiles(
        rulebook, workloads):
    """At the check shapes a kernel launching 132 CTAs gives each at most one tile (or, at
    M = N = K = 4096, a K-block count where a restarted ring position lands on the carried
    phase): the analysis adds a shape where CTA 0 walks three tiles, growing only the
    sizes the tile count depends on; the simulator one where it walks two, within its
    size bound. Kernels without a grid-stride loop get none."""
    from cakegov.analysis.protocol import _grid_stride_loops, _passes, persistent
    from cakegov.sim.evidence import MAX_SHAPE_ELEMENTS, _largest, carried_shape

    text = (CORPUS / "valid/gemm/persistent_coop_wgmma_s4.cake").read_text()
    kernel, workload = _kernel(rulebook, workloads, text)
    [loop, _] = _grid_stride_loops(kernel)  # the producer's and the consumer's tile loops
    base = {"M": 256, "N": 256, "K": 256}
    assert _passes(loop, base) == 1
    grown = persistent(kernel, base)
    assert grown is not None and grown["K"] == 256 and grown["M"] > 256
    assert _passes(loop, grown) >= 3
    assert persistent(kernel, grown) is None  # already walks them
    sim = carried_shape(kernel, workload, [base])
    assert sim is not None and _passes(loop, sim) == 2 and sim["K"] == 256
    assert _largest(workload, sim) <= MAX_SHAPE_ELEMENTS
    fixed = text.replace('divisible={"K": 64}', 'sizes={"M": 256}, divisible={"K": 64}')
    kernel_m, _ = _kernel(rulebook, workloads, fixed)
    only_n = persistent(kernel_m, base)
    assert only_n is not None and only_n["M"] == 256 and only_n["N"] > 256
    plain, _ = _kernel(rulebook, workloads, (CORPUS / "valid/gemm/raw_barriers_s2.cake")
                       .read_text())
    assert persistent(plain, base) is None


def test_counters_carry_the_phase_across_tiles(rulebook, workloads):
    kernel, _ = _kernel(rulebook, workloads, COOP.read_text())
    program = Builder(kernel).build({"M": 1000, "N": 520, "K": 256}, (0, 0, 0))
    # grid 40 over 20 cluster tiles: each CTA one tile; at M = 4096 CTA 0 takes 8
    loader = next(t for t in program.threads if t.role == "loader")
    waits = [ev for ev in loader.events if ev.kind == "wait"]
    assert [dict(ev.iters)["it"] for ev in waits] == list(range(8))  # 4 K blocks + tail
    big = Builder(kernel).build({"M": 4096, "N": 4096, "K": 4096}, (0, 0, 0))
    math = next(t for t in big.threads if t.role == "math")
    parities = [ev.parity for ev in math.events if ev.kind == "wait"]
    assert len(parities) == 8 * 64
    assert parities == [(i // 4) % 2 for i in range(8 * 64)]


def test_counters_turn_the_window_off(rulebook, workloads):
    kernel, _ = _kernel(rulebook, workloads, KMEANS.read_text())
    assert plan(kernel, {"N": 65536, "K": 16, "D": 64}, (0, 0, 0)) == {}


@pytest.mark.slow
def test_the_persistent_cluster_point_has_a_verdict(checker):
    result = _check(checker, COOP.read_text())
    assert result.verdict == "clean" and not result.incomplete_reasons


@pytest.mark.slow
def test_a_restarted_phase_is_a_defect_only_where_the_phases_disagree(checker):
    """Witness or nothing: with 8 K blocks on a 4-stage ring a restarted position lands on
    the phase the carried one would (two phases per tile), so the schedule is clean."""
    text = RESTART.read_text()
    assert _codes(_check(checker, text)) == [("P026", 36)]
    benign = text.replace('sizes={"K": 256}', 'sizes={"K": 512}').replace(
        "lm.range(0, 4", "lm.range(0, 8")
    assert _check(checker, benign).verdict == "clean"


def test_the_phase_carry_fix_is_the_counter(checker):
    result = _check(checker, RESTART.read_text())
    [finding] = [f for f in result.findings if f.code == "P026"]
    texts = [e.text for e in finding.fixes[0].edits]
    assert texts[0] == ", counter=it" and set(texts[1:]) == {"it"}


def test_a_fresh_counter_is_declared_when_none_exists(checker):
    """The loader counts positions in closed form (its tile ordinal times 4, plus k), the
    math role restarts them: the fix declares a counter for the math role."""
    local = "((t - lm.block(0)) // lm.grid(0) * 4 + k)"
    text = RESTART.read_text().replace("    it = lm.counter()\n", "").replace(
        "lm.range(0, 4, counter=it)", "lm.range(0, 4)").replace("it % S", f"{local} % S")
    text = text.replace("it // S", f"{local} // S")
    result = _check(checker, text)
    assert _codes(result) == [("P026", 35)]  # one line less: no counter
    [finding] = [f for f in result.findings if f.code == "P026"]
    texts = [e.text for e in finding.fixes[0].edits]
    assert "pos = lm.counter()" in texts[0] and ", counter=pos" in texts


def test_zero_tile_ctas_and_the_idle_cta_defect(checker):
    result = _check(checker, IDLE.read_text())
    assert _codes(result) == [("P008", 22)]
    [finding] = [f for f in result.findings if f.code == "P008"]
    assert "cbar[0].wait(parity=0)" in finding.fixes[0].edits[0].text
    fixed = IDLE.read_text().replace(
        "    with math:\n", "    with math:\n        cbar[0].wait(parity=0)\n")
    assert _check(checker, fixed).verdict == "clean"


# ---- grid coverage and cost -----------------------------------------------------------


def test_persistent_stores_cover_the_output_once(rulebook, workloads, checker):
    schedule = _parse(checker, COOP.read_text())
    math = schedule.role("math")
    loop = math.body[0]
    store_call = loop.body[-1]
    store = Store(store_call.path, store_call.span.line, "math", "C",
                  store_call.args["at"].items, (128, 128), True, (loop,))
    sizes = {"M": 1000, "N": 520, "K": 320}
    part = tiles(store, sizes, (40, 1, 1), {})
    cover = count((1000, 520), [part])
    assert cover.counts.min() == 1 and cover.counts.max() == 1


def test_the_cost_model_counts_cta_zero(rulebook, workloads):
    kernel, workload = _kernel(rulebook, workloads, DEEPGEMM.read_text())
    prof = profile(kernel, {"M": 1024, "N": 1024, "K": 512, "KB": 4, "NB": 8},
                   dict(workload.tensors), {})
    loops = [s for s in prof.segments if s.kind == "loop"]
    assert loops and loops[0].trips == 13  # 64 blocks over 5 CTAs: CTA 0 takes 13


# ---- simulator ------------------------------------------------------------------------


def test_the_sample_holds_every_class(rulebook, workloads):
    kernel, _ = _kernel(rulebook, workloads, KMEANS.read_text())
    classes = cta_classes.classes(kernel, {"N": 65536, "K": 16, "D": 64})
    sample = sample_ctas((132, 1, 1), 0, classes)
    assert all(c in sample for c in classes)


@pytest.mark.slow
def test_the_simulator_carries_counters_and_finds_the_restart(rulebook, workloads):
    kernel, workload = _kernel(rulebook, workloads, COOP.read_text())
    assert cross_cta(kernel) and members(kernel, (3, 0, 0)) == [(2, 0, 0), (3, 0, 0)]
    ok = simulate_run(kernel, workload, rulebook.primitives, {"M": 257, "N": 257, "K": 256},
                      Options(strategy="random", seed=1))
    assert ok.outcome == "correct", ok.detail
    bad, workload = _kernel(rulebook, workloads, RESTART.read_text())
    run = simulate_run(bad, workload, rulebook.primitives, {"M": 1001, "N": 521, "K": 256},
                       Options(strategy="round-robin", seed=0))
    assert run.outcome == "defect", run.detail


def test_ping_pong_warpgroups_skip_each_others_positions(rulebook, workloads):
    kernel, _ = _kernel(rulebook, workloads, PINGPONG.read_text())
    sizes = {"M": 4096, "N": 4096, "K": 256}  # 1024 cluster tiles: CTA 0 takes 16
    program = Builder(kernel).build(sizes, (0, 0, 0))
    def positions(role: str) -> list[int]:
        thread = next(t for t in program.threads if t.role == role)
        return [dict(ev.iters)["it"] for ev in thread.events
                if ev.kind == "wait" and program.slot_name(ev.slot).startswith("full")]

    pos0, pos1 = positions("math0"), positions("math1")
    assert pos0 == [p for i in range(0, 16, 2) for p in range(4 * i, 4 * i + 4)]
    assert pos1 == [p for i in range(1, 16, 2) for p in range(4 * i, 4 * i + 4)]
    assert np.all(np.diff(pos1) > 0)


# ---- the iteration window with CTA-dependent trip counts -------------------------------

CLOSED_FORM = '''"""A persistent GEMM whose ring position is tile ordinal i times KT, plus k."""
@cake.schedule(target="sm_90a", workload="gemm", sizes={"K": 1024})
def closed_form(lm, A, B, C):
    BM, BN, BK, S, KT, SMS = 128, 128, 64, 4, 16, 3
    TM = lm.cdiv(lm.M, BM)
    TILES = TM * lm.cdiv(lm.N, BN)
    lm.launch(grid=(lm.min(SMS, TILES),), warps=8)
    a_s = lm.smem("bf16", (BM, BK), stages=S)
    b_s = lm.smem("bf16", (BN, BK), stages=S)
    full = lm.mbarrier(count=1, stages=S)
    empty = lm.mbarrier(count=4, stages=S)
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 8), regs=232)
    acc = lm.fragment("f32", (BM, BN), role=math)
    with loader:
        for i in lm.range(0, lm.cdiv(TILES - lm.block(0), lm.grid(0))):
            t = lm.block(0) + i * lm.grid(0)
            for k in lm.range(0, KT):
                empty[(i * KT + k) % S].wait(parity=((i * KT + k) // S + 1) % 2)
                full[(i * KT + k) % S].arrive_expect_tx(bytes=lm.nbytes(a_s, b_s))
                a_s[(i * KT + k) % S].load(A, at=((t % TM) * BM, k * BK),
                                           barrier=full[(i * KT + k) % S], pad=True)
                b_s[(i * KT + k) % S].load(B, at=((t // TM) * BN, k * BK),
                                           barrier=full[(i * KT + k) % S], pad=True)
    with math:
        for i in lm.range(0, lm.cdiv(TILES - lm.block(0), lm.grid(0))):
            t = lm.block(0) + i * lm.grid(0)
            for k in lm.range(0, KT):
                full[(POS) % S].wait(parity=((POS) // S) % 2)
                lm.mma(acc, a_s[(POS) % S], b_s[(POS) % S], transpose_b=True, init=(k == 0))
                empty[(POS) % S].arrive()
            lm.store(C, at=((t % TM) * BM, (t // TM) * BN), src=acc, mask=True)
'''


@pytest.mark.slow
@pytest.mark.parametrize(("pos", "clean"), [("i * KT + k", True), ("i * 2 + k", False)])
def test_the_window_agrees_with_full_unrolling_on_cta_dependent_loops(checker, pos, clean):
    """Splicing happens per CTA on the K loops of a tile loop whose trip count depends on
    the CTA; the window's verdict and anomalies are those of unrolling every iteration."""
    from cakegov.analysis.protocol import Bounds, analyze

    text = CLOSED_FORM.replace("POS", pos)
    schedule = _parse(checker, text)
    ctx = checker.context(schedule, "t.cake")
    shapes = [dict(s) for s in ctx.shapes]
    spliced = analyze(ctx.lowered, shapes, Bounds())
    full = analyze(ctx.lowered, shapes, Bounds(window=False, max_events=400_000))
    assert not spliced.incomplete and not full.incomplete
    assert any(r.spliced for r in spliced.runs) == clean  # an anomaly is re-run in full
    assert {a.key for a in spliced.anomalies} == {a.key for a in full.anomalies}
    assert bool(spliced.anomalies) != clean
    assert len({r.cta for r in full.runs}) > 1  # CTAs with different tile counts
