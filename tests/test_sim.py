"""The CPU simulator (cakegov/sim): numerics against numpy, dynamic defects on small
hand-written schedules, the lowered layout actually executed, determinism, the CLI and
its input parsers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from cakegov.check.context import CheckContext
from cakegov.check.rulebook import PluginError, Rulebook
from cakegov.cli import app
from cakegov.ir.parse import Vocabulary, parse_bytes
from cakegov.plugin import mma_accumulate, sequential_sum
from cakegov.sim.evidence import lower_any, simulate_evidence
from cakegov.sim.memory import decode, encode, round_to
from cakegov.sim.run import Options, parse_cta, sample_ctas, simulate_run
from cakegov.sim.scheduler import STRATEGIES

from .conftest import CORPUS, RULES, WORKLOADS

VALID = CORPUS / "valid"
INVALID = CORPUS / "invalid"


def evidence(path: Path, rulebook, workloads, **kw):
    return simulate_evidence(path.read_bytes(), str(path), rulebook, workloads, **kw)


def kernel_of(source: str, rulebook, workloads):
    kernel, workload, _schedule, why = lower_any(source.encode(), "t.cake", rulebook,
                                                 workloads)
    assert kernel is not None, why
    return kernel, workload


def cli(*args: str):
    result = CliRunner().invoke(app, [*args, "--rules", str(RULES), "--workloads",
                                      str(WORKLOADS)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert "Traceback" not in result.output
    return result


# ---- element encodings ----------------------------------------------------------------


def test_bf16_rounds_to_nearest_even_not_truncating():
    # 1 + 2^-8 is halfway between the bf16 neighbours 1 and 1 + 2^-7: ties go to even (1);
    # 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: ties go to the even 1 + 2^-6
    x = np.array([1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-8 + 2**-20], dtype=np.float32)
    assert list(round_to("bf16", x)) == [1.0, 1 + 2**-6, 1 + 2**-7]
    assert list(decode("bf16", encode("bf16", x))) == [1.0, 1 + 2**-6, 1 + 2**-7]
    assert list(round_to("f16", np.array([1 + 2**-11], dtype=np.float32))) == [1.0]


def test_mma_accumulates_16_wide_k_steps_in_f32():
    rng = np.random.default_rng(0)
    a = round_to("bf16", rng.normal(size=(64, 64)))
    b = round_to("bf16", rng.normal(size=(64, 32)))
    out = mma_accumulate(np.zeros((64, 32), np.float32), a, b, 16)
    expected = np.zeros((64, 32), np.float32)
    for kk in range(0, 64, 16):
        expected = expected + (a[:, kk:kk + 16].astype(np.float32) @
                               b[kk:kk + 16].astype(np.float32))
    assert out.dtype == np.float32 and np.array_equal(out, expected)
    assert np.allclose(out, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_sequential_sum_adds_left_to_right():
    x = np.array([[1e8, 1.0, -1e8, 1.0]], dtype=np.float32)
    assert sequential_sum(x, axis=1)[0] == np.float32(1.0)  # ((1e8 + 1) - 1e8) + 1 in f32


# ---- the corpus: valid schedules match, dynamic defects show ---------------------------


def test_valid_schedule_matches_the_reference_on_every_planned_run(rulebook, workloads):
    ev = evidence(VALID / "gemm" / "ws_pipeline_s4.cake", rulebook, workloads)
    assert ev["status"] == "correct", ev["detail"]
    runs = ev["strategies"]
    assert len({r["seed"] for r in runs}) >= 3 and len({r["shape"] for r in runs}) >= 2
    assert {r["strategy"] for r in runs} == set(STRATEGIES)
    assert all(r["outcome"] == "correct" for r in runs)


@pytest.mark.parametrize(("case", "kind"), [
    ("scale/role_release_without_named_sync.cake", "race"),  # warps 1-3 unsynchronised
    ("scale/wait_parity_one.cake", "deadlock"),
    ("scale/store_async_without_fence.cake", "race"),  # generic write, async read
    ("scale/store_async_not_drained.cake", "in flight at exit"),
    ("scale/grid_overshoot_unmasked.cake", "out of bounds"),
    ("kmeans_assign/centroids_never_loaded.cake", "uninitialised read"),
    ("gemm/expect_tx_per_warp.cake", "over-arrival"),
    ("gemm/grid_floor_division.cake", "wrong result"),  # rows no CTA writes keep poison
    ("gemm/accumulator_read_before_mma_wait.cake", "race"),
])
def test_invalid_schedule_reproduces_its_defect(case, kind, rulebook, workloads):
    ev = evidence(INVALID / case, rulebook, workloads)
    assert ev["status"] == "defect" and ev["detail"].startswith(kind + ":"), ev["detail"]
    assert ev["witness"] and all(set(s) == {"line", "text"} for s in ev["witness"])


def test_deadlock_names_the_waiter_its_barrier_slot_and_phase(rulebook, workloads):
    ev = evidence(INVALID / "scale" / "wait_parity_one.cake", rulebook, workloads)
    assert "waits on full[0] parity 1" in ev["detail"]
    assert "phase 1 with 1 arrival(s)" in ev["detail"]
    assert ev["witness"][-1]["text"].startswith("deadlock:")


@pytest.mark.slow
def test_evidence_is_deterministic(rulebook, workloads):
    path = INVALID / "gemm" / "parity_min_saturates.cake"
    assert evidence(path, rulebook, workloads) == evidence(path, rulebook, workloads)
    path = VALID / "scale" / "ring_1stage.cake"
    first = evidence(path, rulebook, workloads)
    assert json.dumps(first, sort_keys=True) == json.dumps(evidence(path, rulebook, workloads),
                                                           sort_keys=True)


def test_not_simulated_and_incomplete(rulebook, workloads):
    ev = simulate_evidence(b"def broken(:\n", "x.cake", rulebook, workloads)
    assert ev["status"] == "not simulated" and ev["detail"].startswith("not simulated:")
    ev = evidence(INVALID / "kmeans_assign" / "mbarrier_count_zero.cake", rulebook, workloads)
    assert ev["status"] == "not simulated" and "arrival count 0" in ev["detail"]
    ev = evidence(VALID / "scale" / "tile_1stage.cake", rulebook, workloads, max_events=50)
    assert ev["status"] == "incomplete" and "more than 50 events" in ev["detail"]


# ---- the simulator executes the lowered layout ------------------------------------------

TWO_BUFFERS = '''\
@cake.schedule(target="sm_90a", workload="scale", divisible={"N": 4})
def staged(lm, X, Y):
    TM, TN = 16, 256
    lm.launch(grid=(lm.cdiv(lm.M, TM), lm.cdiv(lm.N, TN)), warps=4)
    x_s = lm.smem("f32", (TM, TN))
    y_s = lm.smem("f32", (TM, TN))
    full = lm.mbarrier(count=1)
    worker = lm.role(warps=range(0, 4))
    y = lm.fragment("f32", (TM, TN), role=worker)
    m0, n0 = lm.block(0) * TM, lm.block(1) * TN
    with worker:
        full[0].arrive_expect_tx(bytes=lm.nbytes(x_s))
        x_s[0].load(X, at=(m0, n0), barrier=full[0], pad=True)
        full[0].wait(parity=0)
        lm.elementwise(y_s[0], x_s[0], op="scale", alpha=2.5)
        lm.sync_cta()
        lm.elementwise(y, y_s[0], op="copy")
        lm.store(Y, at=(m0, n0), src=y, mask=True)
'''


def test_a_wrong_buffer_offset_in_the_lowering_shows_up(rulebook, workloads):
    kernel, workload = kernel_of(TWO_BUFFERS, rulebook, workloads)
    shape = {"M": 64, "N": 256}
    ok = simulate_run(kernel, workload, rulebook.primitives, shape)
    assert ok.outcome == "correct", ok.detail
    x, y = kernel.buffers
    assert y.offset >= x.offset + x.stage_bytes
    # y_s moved onto x_s, 4 elements on: what one warp's scale writes overwrites inputs
    # that other warps read, unordered, so the run is no longer correct
    moved = kernel.model_copy(update={"buffers": (x, y.model_copy(
        update={"offset": x.offset + 16}))})
    bad = simulate_run(moved, workload, rulebook.primitives, shape)
    assert bad.outcome == "defect" and bad.detail.startswith("race:"), bad.detail


def test_a_wrong_stage_offset_shows_up(rulebook, workloads):
    path = VALID / "scale" / "ring_1stage.cake"
    kernel, workload = kernel_of(path.read_text(), rulebook, workloads)
    buf = kernel.buffers[0]
    shape = {"M": 64, "N": 512}
    assert simulate_run(kernel, workload, rulebook.primitives, shape).outcome == "correct"
    if buf.stages > 1:
        squashed = kernel.model_copy(update={"buffers": (buf.model_copy(
            update={"stage_bytes": buf.stage_bytes // 2}), *kernel.buffers[1:])})
        r = simulate_run(squashed, workload, rulebook.primitives, shape)
        assert r.outcome != "correct"


@pytest.mark.slow
def test_every_strategy_and_seed_runs_a_valid_schedule(rulebook, workloads):
    kernel, workload = kernel_of((VALID / "kmeans_assign" / "rows_pipelined_s2.cake")
                                 .read_text(), rulebook, workloads)
    for name in STRATEGIES:
        for seed in (0, 7):
            r = simulate_run(kernel, workload, rulebook.primitives,
                             {"N": 520, "K": 16, "D": 64}, Options(strategy=name, seed=seed))
            assert r.outcome == "correct", (name, seed, r.detail)


def test_cta_sample_has_first_last_and_tail_ctas():
    assert sample_ctas((2, 2, 1), 0) == [(0, 0, 0), (0, 1, 0), (1, 0, 0), (1, 1, 0)]
    big = sample_ctas((40, 3, 1), 5)
    assert {(0, 0, 0), (39, 2, 0), (38, 1, 0)} <= set(big)
    assert len(big) == len(set(big)) == 11
    assert big == sample_ctas((40, 3, 1), 5)


# ---- plugins ----------------------------------------------------------------------------


def test_a_primitive_with_a_template_needs_numpy_semantics(tmp_path: Path):
    import shutil

    root = tmp_path / "rules"
    shutil.copytree(RULES, root, ignore=shutil.ignore_patterns("__pycache__"))
    path = root / "primitives" / "fill.py"
    text = path.read_text()
    path.write_text(text[:text.index("# ---- numpy semantics")])
    with pytest.raises(PluginError, match="needs its numpy semantics"):
        Rulebook.load(root)
    path.write_text(text.replace("def simulate(op, sim):", "def simulate(op):"))
    with pytest.raises(PluginError, match="two arguments"):
        Rulebook.load(root)


def test_every_templated_primitive_has_simulate(rulebook):
    for prim in rulebook.primitives.values():
        if prim.template:
            assert prim.simulate is not None, prim.relpath


# ---- the CLI and its parsers ------------------------------------------------------------


def test_simulate_exit_codes():
    assert cli("simulate", str(VALID / "scale" / "tile_1stage.cake"), "--seeds", "1",
               "--shape", "M=64,N=256").exit_code == 0
    bad = cli("simulate", str(INVALID / "scale" / "wait_parity_one.cake"))
    assert bad.exit_code == 1 and "deadlock" in bad.output
    assert cli("simulate", str(INVALID / "scale" / "typo_primitive.cake")).exit_code == 3
    for args in (("--shape", "M=64,N=257"), ("--shape", "Q=3"), ("--cta", "1,x"),
                 ("--strategy", "fastest"), ("--cta", "0,99", "--shape", "M=64,N=256")):
        r = cli("simulate", str(VALID / "scale" / "tile_1stage.cake"), *args)
        assert r.exit_code == 2 and "error" in r.output, (args, r.output)
    assert cli("simulate", "no/such.cake").exit_code == 2


def test_simulate_json_is_the_evidence_format():
    r = cli("simulate", str(VALID / "scale" / "tile_1stage.cake"), "--format", "json",
            "--seeds", "1", "--cta", "1,0", "--strategy", "laggard")
    data = json.loads(r.stdout)
    assert set(data) == {"status", "detail", "strategies", "witness"}
    assert data["status"] == "correct"
    assert {run["strategy"] for run in data["strategies"]} == {"laggard"}
    assert all(run["cta"] == [1, 0, 0] for run in data["strategies"])


@given(st.tuples(*(st.integers(0, 10**6),) * 3), st.integers(1, 3))
def test_parse_cta_round_trips(cta, n):
    text = ",".join(str(x) for x in cta[:n])
    assert parse_cta(text) == (*cta[:n], *(0,) * (3 - n))


@given(st.text(max_size=12))
def test_parse_cta_rejects_or_parses_with_a_reason(text):
    try:
        cta = parse_cta(text)
    except ValueError as exc:
        assert "bad CTA" in str(exc)
    else:
        assert len(cta) == 3 and all(isinstance(x, int) and x >= 0 for x in cta)


@given(st.dictionaries(st.sampled_from(["M", "N"]), st.integers(-5, 10**5), min_size=1))
def test_shape_option_is_validated_against_the_workload(shape):
    from cakegov.gpu.data import DataError, parse_shape

    text = ",".join(f"{k}={v}" for k, v in shape.items())
    try:
        parsed = parse_shape(text)
    except DataError as exc:
        assert any(v <= 0 for v in shape.values()) and "positive" in str(exc)
    else:
        assert parsed == shape


def test_lowering_any_verdict_uses_the_checkers_effects(rulebook, workloads):
    path = INVALID / "scale" / "wait_parity_one.cake"
    vocab = Vocabulary(primitives=rulebook.spellings(),
                       workloads={n: w.sig for n, w in workloads.items()})
    schedule = parse_bytes(path.read_bytes(), vocab)
    ctx = CheckContext(schedule, str(path), rulebook.targets[schedule.target],
                       workloads[schedule.workload], rulebook.primitives)
    kernel, _, _, why = lower_any(path.read_bytes(), str(path), rulebook, workloads)
    assert why == "" and kernel == ctx.lowered


def test_a_fragment_written_by_another_role_is_never_written_for_its_owner(rulebook,
                                                                           workloads):
    """Registers belong to threads: the loader scaling into the worker's fragment writes
    its own threads' registers, so the worker stores what it never wrote."""
    path = CORPUS.parent / "examples" / "proposals" / "corpus" / "invalid" / "scale" / \
        "fragment_written_by_loader.cake"
    ev = evidence(path, rulebook, workloads)
    assert ev["status"] == "defect", ev["detail"]
    assert ev["detail"].startswith("uninitialised read:")
    assert "read by role worker" in ev["detail"] and "only the threads of loader" in \
        ev["detail"]
