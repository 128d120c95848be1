"""The GPU runner up to the launch: inputs, poison, comparisons, timing statistics, records,
shapes, grids, and `cakegov run` end to end on a fake device. Tests marked `gpu` need CuPy
and a CUDA device and are skipped without one."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from cakegov.check.runner import Checker
from cakegov.cli import app
from cakegov.gpu import report
from cakegov.gpu.baselines import baseline_for, scale_alpha
from cakegov.gpu.compare import compare_float, compare_labels, kmeans_distances
from cakegov.gpu.data import (
    BF16_QUIET_NAN,
    DataError,
    bf16_bits,
    bf16_values,
    make_inputs,
    make_outputs,
    parse_shape,
    poisoned,
    select_shapes,
    shape_seed,
)
from cakegov.gpu.device import (
    DeviceInfo,
    KernelArtifact,
    KernelTimeout,
    LaunchConfig,
    NoDevice,
    Timing,
    cuda_available,
)
from cakegov.gpu.records import (
    append_record,
    read_records,
    rotation_copies,
    timing_stats,
)
from cakegov.gpu.run import RunOptions, launch_config, run_file
from cakegov.gpu.tensormap import TENSOR_MAP_DTYPE
from cakegov.ir.canonical import schedule_sha256
from cakegov.ir.parse import parse_bytes
from cakegov.lower.build import prepare

from .conftest import CORPUS

SCALE = CORPUS / "valid" / "scale" / "tile_1stage.cake"
GEMM = CORPUS / "valid" / "gemm" / "ws_pipeline_s4.cake"
KMEANS = CORPUS / "valid" / "kmeans_assign" / "rows_pipelined_s2.cake"
H200_L2 = 60 * 1024 * 1024

gpu = pytest.mark.gpu
needs_device = pytest.mark.skipif(not cuda_available(), reason="needs CuPy and a CUDA device")


# ---- a fake device -------------------------------------------------------------------

Behaviour = Callable[[str, dict[str, np.ndarray], dict[str, np.ndarray], dict[str, int]], None]


def reference_kernel(workload: str, ins: dict[str, np.ndarray], outs: dict[str, np.ndarray],
                     sizes: dict[str, int]) -> None:
    """What a correct kernel computes, in f32, from the device encodings it receives."""
    if workload == "scale":
        outs["Y"][...] = ins["X"] * np.float32(2.5)
    elif workload == "gemm":
        a, b = bf16_values(ins["A"]), bf16_values(ins["B"])
        outs["C"][...] = a @ b.T
    elif workload == "kmeans_assign":
        x, c = ins["X"], ins["C"]
        dist = ((x[:, None, :] - c[None, :, :]) ** 2).sum(-1)
        outs["labels"][...] = dist.argmin(1).astype(np.int32)
    else:
        raise AssertionError(workload)


class FakeDevice:
    """Runs `behaviour` with numpy instead of a kernel and returns fixed timings."""

    def __init__(self, workload: str, behaviour: Behaviour | None = None,
                 samples: tuple[float, ...] | None = None):
        self.workload = workload
        self.behaviour = behaviour or reference_kernel
        self.samples = samples
        self.info = DeviceInfo(name="Fake GPU", compute_capability="9.0",
                               cuda_driver_version=13000, cuda_runtime_version=13000,
                               driver="580.00", cupy_version="0-fake", l2_bytes=1 << 20,
                               memory_bytes=1 << 34, smem_optin_bytes=227 * 1024,
                               sm_count=132)
        self.loads: list[tuple[KernelArtifact, LaunchConfig]] = []
        self.poison_seen: list[bool] = []
        self.executions = 0
        self.closed = False

    def _sizes(self, launch: LaunchConfig) -> dict[str, int]:
        names = {"scale": ("M", "N"), "gemm": ("M", "N", "K"),
                 "kmeans_assign": ("N", "K", "D")}[self.workload]
        return dict(zip(names, launch.sizes, strict=True))

    def _poisoned(self, outputs: dict[str, np.ndarray]) -> bool:
        for a in outputs.values():
            if a.dtype.kind == "f" and not np.isnan(a).all():
                return False
            if a.dtype == np.int32 and not (a == 0x7FFFFFFF).all():
                return False
        return True

    def _run(self, launch: LaunchConfig, inputs: dict[str, np.ndarray],
             outputs: dict[str, np.ndarray]) -> tuple[dict, dict]:
        self.executions += 1
        self.poison_seen.append(self._poisoned(outputs))
        ins = {n: a.copy() for n, a in inputs.items()}
        outs = {n: a.copy() for n, a in outputs.items()}
        self.behaviour(self.workload, ins, outs, self._sizes(launch))
        return outs, ins

    def load(self, artifact: KernelArtifact, launch: LaunchConfig) -> str:
        self.loads.append((artifact, launch))
        return artifact.name

    def attributes(self, kernel: Any) -> dict[str, int]:
        return {"num_regs": 128, "local_size_bytes": 0}

    def execute(self, kernel, launch, inputs, outputs, timeout_s):
        return self._run(launch, dict(inputs), dict(outputs))

    def _timing(self, set_bytes: int, warmup: int, repeat: int, outs=None) -> Timing:
        samples = self.samples or tuple(1.0 + 0.01 * i for i in range(repeat))
        return Timing(tuple(samples), wall_ms=sum(samples) * 1.05, warmup=warmup,
                      rotation=rotation_copies(set_bytes, self.info.l2_bytes),
                      last_outputs=outs or {})

    def time_kernel(self, kernel, launch, inputs, outputs, warmup, repeat):
        outs, _ = self._run(launch, dict(inputs), dict(outputs))
        size = sum(a.nbytes for a in [*inputs.values(), *outputs.values()])
        return self._timing(size, warmup, repeat, outs)

    def execute_baseline(self, baseline, arrays, sizes):
        return {n: np.asarray(v) for n, v in baseline.fn(np, dict(arrays), sizes).items()}

    def time_baseline(self, baseline, arrays, sizes, warmup, repeat):
        t = self._timing(sum(a.nbytes for a in arrays.values()), warmup, repeat)
        return dataclasses.replace(t, samples_ms=tuple(s * 2 for s in t.samples_ms))

    def close(self) -> None:
        self.closed = True


def fake_compiler(prepared, book) -> KernelArtifact:
    return KernelArtifact(name=prepared.kernel.name, source="// not compiled in tests",
                          compiler="fake")


def run_fake(rulebook, workloads, path: Path, tmp_path: Path, device: FakeDevice,
             **options: Any):
    opts = RunOptions(measurements=tmp_path / "measurements", **options)
    return run_file(path, opts, rulebook, workloads, root=CORPUS.parent,
                    find_device=lambda: device, compiler=fake_compiler)


def records_of(tmp_path: Path, workload: str) -> list[dict[str, Any]]:
    return list(read_records(tmp_path / "measurements" / f"{workload}.jsonl"))


# ---- encodings, inputs, poison -------------------------------------------------------


def test_bf16_bits_round_to_nearest_even_like_the_workload(workloads):
    rng = np.random.default_rng(1)
    x = rng.normal(size=4096).astype(np.float32)
    gemm_round = vars(__import__(workloads["gemm"].generate.__module__))["_bf16_round"]
    assert np.array_equal(bf16_values(bf16_bits(x)), gemm_round(x))
    # 1 + 2^-8 is halfway between two bf16 values: ties go to the even mantissa (1.0).
    assert bf16_bits(np.float32(1 + 2**-8)) == 0x3F80
    assert bf16_bits(np.float32(np.nan)) == BF16_QUIET_NAN


def test_poison_is_nan_for_floats_and_out_of_range_for_i32():
    assert np.isnan(poisoned("f32", (3, 2))).all()
    assert np.isnan(bf16_values(poisoned("bf16", (4,)))).all()
    assert (poisoned("i32", (5,)) == 0x7FFFFFFF).all()


def test_inputs_are_fresh_per_seed_and_encoded_for_the_device(workloads):
    gemm = workloads["gemm"]
    sizes = {"M": 64, "N": 48, "K": 64}
    a, b = make_inputs(gemm, sizes, 1), make_inputs(gemm, sizes, 2)
    assert a.device["A"].dtype == np.uint16 and a.device["A"].shape == (64, 64)
    assert np.array_equal(bf16_values(a.device["A"]), a.values["A"])
    assert not np.array_equal(a.device["A"], b.device["A"])
    assert np.array_equal(make_inputs(gemm, sizes, 1).device["B"], a.device["B"])
    seeds = {shape_seed(7, i, s) for i, s in enumerate(select_shapes(gemm, {}, {"K": 64}))}
    assert len(seeds) == 3


@pytest.mark.parametrize("bad, message", [
    (lambda shape: np.zeros(shape), "constant"),
    (lambda shape: np.where(np.arange(np.prod(shape)).reshape(shape) % 2, 1.0, 0.0),
     "exact zeros"),
    (lambda shape: np.full(shape, np.nan), "non-finite"),
])
def test_degenerate_inputs_are_refused(workloads, bad, message):
    scale = dataclasses.replace(workloads["scale"],
                                generate=lambda sizes, rng: {"X": bad((sizes["M"],
                                                                       sizes["N"]))})
    with pytest.raises(DataError, match=message):
        make_inputs(scale, {"M": 8, "N": 8}, 0)


def test_outputs_start_poisoned(workloads):
    outs = make_outputs(workloads["kmeans_assign"], {"N": 10, "K": 4, "D": 3})
    assert outs["labels"].dtype == np.int32 and (outs["labels"] == 0x7FFFFFFF).all()


# ---- comparisons ---------------------------------------------------------------------


def _ref(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.uniform(-1, 1, (32, 16)) * 10


def test_a_correct_float_output_passes():
    ref = _ref()
    got = compare_float("C", "f32", ref.astype(np.float32), ref, 2e-2)
    assert got.passed and got.max_error < 1e-6


def test_a_wrong_element_fails_with_its_index():
    ref = _ref()
    out = ref.astype(np.float32)
    out[3, 5] += 1.0
    got = compare_float("C", "f32", out, ref, 2e-2)
    assert not got.passed
    assert got.details["worst_index"] == [3, 5] and "(3, 5)" in got.reason


def test_nan_left_in_the_output_fails():
    ref = _ref()
    out = ref.astype(np.float32)
    out[-1, -1] = np.nan  # poison in one tail element the kernel never wrote
    got = compare_float("C", "f32", out, ref, 1e9)
    assert not got.passed and "NaN" in got.reason and got.details["non_finite"] == 1


def test_a_constant_output_fails_even_under_a_loose_bound():
    ref = _ref()
    const = np.full(ref.shape, ref.mean(), dtype=np.float32)
    assert not compare_float("C", "f32", const, ref, 2e-2).passed
    # Under a bound loose enough for its relative error, the explicit check still refuses.
    loose = compare_float("C", "f32", const, ref, 10.0)
    assert not loose.passed and "constant" in loose.reason
    zeros = compare_float("C", "f32", np.zeros_like(const), ref, 0.5)
    assert not zeros.passed and zeros.max_error == pytest.approx(1.0)


def _distances() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    values = {"X": rng.normal(size=(50, 4)), "C": rng.normal(size=(6, 4)) * 3}
    dist = kmeans_distances(values)
    return dist, dist.argmin(1).astype(np.int32)


def test_labels_exact_match_passes_and_a_wrong_label_fails():
    dist, ref = _distances()
    assert compare_labels("labels", ref.copy(), ref, dist, 1e-5).passed
    wrong = ref.copy()
    row = 7
    wrong[row] = int(np.argsort(dist[row])[-1])  # the farthest centroid
    got = compare_labels("labels", wrong, ref, dist, 1e-5)
    assert not got.passed and got.details["wrong"] == 1 and got.details["first_wrong_rows"] == [7]


def test_labels_near_tie_is_accepted_but_a_clear_loser_is_not():
    dist, ref = _distances()
    row, other = 4, (int(ref[4]) + 1) % dist.shape[1]
    dist[row, other] = dist[row, ref[row]] * (1 + 1e-7)  # a near-tie
    flipped = ref.copy()
    flipped[row] = other
    got = compare_labels("labels", flipped, ref, dist, 1e-5)
    assert got.passed and got.details["ties_accepted"] == 1
    dist[row, other] = dist[row, ref[row]] * (1 + 1e-3)  # no longer a tie
    assert not compare_labels("labels", flipped, ref, dist, 1e-5).passed


def test_labels_poison_and_constant_labels_fail():
    dist, ref = _distances()
    poison = np.full_like(ref, 0x7FFFFFFF)
    got = compare_labels("labels", poison, ref, dist, 1e-5)
    assert not got.passed and "outside [0, 6)" in got.reason
    assert not compare_labels("labels", np.zeros_like(ref), ref, dist, 1e-5).passed


# ---- timing, rotation, records -------------------------------------------------------


def test_timing_statistics():
    stats = timing_stats([5.0, 1.0, 3.0, 2.0, 4.0])
    assert (stats.median_ms, stats.min_ms, stats.n) == (3.0, 1.0, 5)
    assert stats.p10_ms == pytest.approx(1.4) and stats.p90_ms == pytest.approx(4.6)
    with pytest.raises(ValueError):
        timing_stats([])
    with pytest.raises(ValueError):
        timing_stats([1.0, float("nan")])


def test_rotation_exceeds_l2_and_respects_memory():
    big = rotation_copies(128 * 2**20, H200_L2)  # 4096^3 gemm: A, B bf16 + C f32
    assert big.copies == 2 and big.covers_l2
    small = rotation_copies(2**20, H200_L2)
    assert small.copies == 121 and (small.copies - 1) * 2**20 >= 2 * H200_L2
    capped = rotation_copies(2**20, H200_L2, free_bytes=40 * 2**20)
    assert capped.copies == 20 and not capped.covers_l2


def test_records_are_appended_never_rewritten(tmp_path):
    path = tmp_path / "m" / "gemm.jsonl"
    append_record(path, {"schema": 1, "n": 1})
    first = path.read_bytes()
    append_record(path, {"schema": 1, "n": 2})
    assert path.read_bytes().startswith(first)
    assert [r["n"] for r in read_records(path)] == [1, 2]
    with path.open("ab") as handle:  # a torn write left a partial line behind
        handle.write(b'{"schema": 1, "n"')
    before = path.read_bytes()
    append_record(path, {"schema": 1, "n": 3})
    assert path.read_bytes().startswith(before)
    assert [r["n"] for r in read_records(path)] == [1, 2, 3]
    with pytest.raises(ValueError):
        append_record(path, {"schema": 1, "x": float("nan")})  # JSON has no NaN
    assert path.read_bytes().startswith(before)


# ---- shapes and launches -------------------------------------------------------------


def test_default_shapes_include_non_tile_multiples(workloads):
    shapes = select_shapes(workloads["gemm"], {}, {"K": 64})
    assert any(s["M"] % 128 or s["N"] % 128 for s in shapes)
    assert all(s["K"] % 64 == 0 for s in shapes)
    fixed = select_shapes(workloads["kmeans_assign"], {"K": 16, "D": 64}, {})
    assert {s["K"] for s in fixed} == {16} and any(s["N"] % 256 for s in fixed)


def test_requested_shapes_are_validated(workloads):
    gemm = workloads["gemm"]
    assert parse_shape("M=1000, N=520,K=320") == {"M": 1000, "N": 520, "K": 320}
    for text in ("M=1000,N", "M=x", "M=0", ""):
        with pytest.raises(DataError):
            parse_shape(text)
    with pytest.raises(DataError, match="multiple of 64"):
        select_shapes(gemm, {}, {"K": 64}, [{"M": 8, "N": 8, "K": 100}])
    with pytest.raises(DataError, match="lacks K"):
        select_shapes(gemm, {}, {}, [{"M": 8, "N": 8}])
    with pytest.raises(DataError, match="fixes K=16"):
        select_shapes(workloads["kmeans_assign"], {"K": 16}, {}, [{"N": 8, "K": 4, "D": 64}])


def _lowered(rulebook, workloads, path: Path):
    prepared = prepare(path, rulebook, workloads)
    assert prepared.kernel is not None, prepared.result
    return prepared.kernel


def test_launch_config_evaluates_the_grid_with_the_sizes(rulebook, workloads):
    kernel = _lowered(rulebook, workloads, GEMM)
    launch = launch_config(kernel, workloads["gemm"], {"M": 1000, "N": 520, "K": 320})
    assert launch.grid == (8, 5, 1)  # cdiv(1000, 128), cdiv(520, 128)
    assert launch.block == (kernel.threads, 1, 1) and launch.smem_bytes == kernel.smem_bytes
    assert launch.tensors == ("A", "B", "C") and launch.sizes == (1000, 520, 320)


# ---- `cakegov run` on a fake device --------------------------------------------------


@pytest.mark.slow
def test_a_correct_kernel_passes_and_records_every_shape(rulebook, workloads, tmp_path):
    device = FakeDevice("scale")
    outcome = run_fake(rulebook, workloads, SCALE, tmp_path, device, repeat=20)
    assert outcome.exit_code == 0, outcome.lines
    assert device.closed and len(device.loads) == 1
    assert all(device.poison_seen) and device.executions == 3 * 3  # 2 checks + timing
    recs = records_of(tmp_path, "scale")
    assert [r["shape"] for r in recs] == [{"M": 256, "N": 256}, {"M": 1000, "N": 336},
                                          {"M": 4096, "N": 4096}]
    schedule = parse_bytes(SCALE.read_bytes(), Checker(rulebook, workloads).vocabulary)
    rec = recs[1]
    assert rec["schedule"] == {"file": "corpus/valid/scale/tile_1stage.cake",
                               "name": "scale_tile", "sha256": schedule_sha256(schedule),
                               "target": "sm_90a"}
    assert rec["verifier_digest"] == rulebook.digest()
    assert rec["gpu"]["name"] == "Fake GPU" and rec["gpu"]["driver"] == "580.00"
    assert rec["passed"] is True and rec["max_error"] < 1e-6 and rec["tolerance"] == 1e-6
    assert rec["times_ms"]["n"] == 20 and rec["times_ms"]["median_ms"] == pytest.approx(1.095)
    assert rec["baseline"]["name"] == "cupy alpha*x" and rec["baseline"]["passed"]
    assert rec["baseline"]["times_ms"]["median_ms"] == pytest.approx(2.19)
    assert len({r["seed"] for r in recs}) == 3 and len({r["run_id"] for r in recs}) == 1
    # the 32 x 256 f32 tile arrives through a tensor map (no zero row: the map fills the
    # tail with zeros), which the launch records with its extents at this shape
    assert rec["kernel"]["launch"] == {
        "grid": [32, 2, 1], "block": [128, 1, 1], "smem_bytes": 32888,
        "tensor_maps": [{"name": "tmap_X_0", "tensor": "X", "dtype": "f32", "rows": 1000,
                         "cols": 336, "box_rows": 32, "box_cols": 256, "swizzle": "none"}]}
    assert rec["kernel"]["entry"] == "scale_tile" and rec["kernel"]["artifact"] == "source"


def test_a_second_run_appends_with_fresh_seeds(rulebook, workloads, tmp_path):
    shapes = ({"M": 64, "N": 64},)
    run_fake(rulebook, workloads, SCALE, tmp_path, FakeDevice("scale"), shapes=shapes)
    path = tmp_path / "measurements" / "scale.jsonl"
    first = path.read_bytes()
    run_fake(rulebook, workloads, SCALE, tmp_path, FakeDevice("scale"), shapes=shapes)
    assert path.read_bytes().startswith(first)
    recs = records_of(tmp_path, "scale")
    assert len(recs) == 2 and recs[0]["seed"] != recs[1]["seed"]
    assert recs[0]["run_id"] != recs[1]["run_id"]


def test_a_seed_replays_the_inputs(rulebook, workloads, tmp_path):
    for _ in range(2):
        run_fake(rulebook, workloads, SCALE, tmp_path, FakeDevice("scale"), seed=42,
                 shapes=({"M": 8, "N": 8},), record=True)
    recs = records_of(tmp_path, "scale")
    assert recs[0]["seed"] == recs[1]["seed"] == shape_seed(42, 0, {"M": 8, "N": 8})


def wrong_element(workload, ins, outs, sizes):
    reference_kernel(workload, ins, outs, sizes)
    next(iter(outs.values())).flat[17] += 1.0


def skips_tail_rows(workload, ins, outs, sizes):
    """Writes only whole 32-row tiles: right on tile multiples, NaN in the tail."""
    full = {n: a.copy() for n, a in outs.items()}
    reference_kernel(workload, ins, full, sizes)
    rows = sizes["M"] // 32 * 32
    for n in outs:
        outs[n][:rows] = full[n][:rows]


def constant_output(workload, ins, outs, sizes):
    reference_kernel(workload, ins, outs, sizes)
    for a in outs.values():
        a[...] = a.mean()


def scribbles_on_input(workload, ins, outs, sizes):
    reference_kernel(workload, ins, outs, sizes)
    ins["X"][0, 0] = 0


@pytest.mark.parametrize("behaviour, reason", [
    (wrong_element, "max relative error"),
    (constant_output, "output is constant"),
    (scribbles_on_input, "modified its input X"),
])
def test_a_wrong_kernel_fails(rulebook, workloads, tmp_path, behaviour, reason):
    outcome = run_fake(rulebook, workloads, SCALE, tmp_path, FakeDevice("scale", behaviour),
                       shapes=({"M": 64, "N": 64},))
    assert outcome.exit_code == 1
    assert "WRONG" in outcome.lines[1] and reason in outcome.lines[1]
    (rec,) = records_of(tmp_path, "scale")
    assert rec["passed"] is False and rec["times_ms"] is None
    assert any(reason in c["reason"] for c in rec["comparisons"] if not c["passed"])


def test_a_kernel_that_skips_tail_tiles_fails_only_on_the_tail_shape(rulebook, workloads,
                                                                     tmp_path):
    outcome = run_fake(rulebook, workloads, SCALE, tmp_path,
                       FakeDevice("scale", skips_tail_rows),
                       shapes=({"M": 256, "N": 256}, {"M": 1000, "N": 336}))
    assert outcome.exit_code == 1
    assert [r.passed for r in outcome.results] == [True, False]
    assert "NaN" in outcome.results[1].comparisons[0].reason


def test_a_race_that_shows_on_the_second_launch_fails(rulebook, workloads, tmp_path):
    calls = []

    def flaky(workload, ins, outs, sizes):
        calls.append(1)
        (wrong_element if len(calls) == 2 else reference_kernel)(workload, ins, outs, sizes)

    outcome = run_fake(rulebook, workloads, SCALE, tmp_path, FakeDevice("scale", flaky),
                       shapes=({"M": 64, "N": 64},))
    assert outcome.exit_code == 1 and "second launch" in outcome.lines[1]


def test_gemm_on_bf16_inputs_passes_against_the_float64_reference(rulebook, workloads,
                                                                  tmp_path):
    device = FakeDevice("gemm")
    outcome = run_fake(rulebook, workloads, GEMM, tmp_path, device,
                       shapes=({"M": 200, "N": 136, "K": 128},))
    assert outcome.exit_code == 0, outcome.lines
    (rec,) = records_of(tmp_path, "gemm")
    # the error is reported as a fraction of the derived per-element bound (<= 1 passes);
    # with bf16 inputs of magnitude >= 0.5 and K = 128 the f32 sums are exact
    assert 0 <= rec["max_error"] <= 1 and rec["tolerance"] == 1.0
    assert rec["baseline"]["name"] == "cublasGemmEx bf16" and rec["baseline"]["passed"]
    assert rec["kernel"]["launch"]["grid"] == [2, 2, 1]


def test_kmeans_labels_pass_and_a_wrong_label_fails(rulebook, workloads, tmp_path):
    shapes = ({"N": 1000, "K": 16, "D": 64},)
    ok = run_fake(rulebook, workloads, KMEANS, tmp_path, FakeDevice("kmeans_assign"),
                  shapes=shapes)
    assert ok.exit_code == 0, ok.lines
    assert "all 1000 labels right" in ok.results[0].comparisons[0].reason

    def off_by_one(workload, ins, outs, sizes):
        # every label one centroid off: the inputs are drawn afresh each run, and a single
        # changed row can land on a near-tie the comparison rightly accepts
        reference_kernel(workload, ins, outs, sizes)
        outs["labels"][:] = (outs["labels"] + 1) % sizes["K"]

    bad = run_fake(rulebook, workloads, KMEANS, tmp_path,
                   FakeDevice("kmeans_assign", off_by_one), shapes=shapes)
    assert bad.exit_code == 1 and "first row" in bad.lines[1]


def test_a_hung_kernel_stops_the_run(rulebook, workloads, tmp_path):
    device = FakeDevice("scale")

    def hang(*args, **kwargs):
        raise KernelTimeout("kernel did not finish within 30 s (deadlock or runaway loop)")

    device.execute = hang
    outcome = run_fake(rulebook, workloads, SCALE, tmp_path, device)
    assert outcome.exit_code == 1 and outcome.hung and len(outcome.results) == 1
    (rec,) = records_of(tmp_path, "scale")
    assert rec["passed"] is False and "deadlock" in rec["error"]


def test_a_compile_failure_exits_1_without_a_record(rulebook, workloads, tmp_path):
    def broken(prepared, book):
        raise RuntimeError("ptxas error: too many registers")

    outcome = run_file(SCALE, RunOptions(measurements=tmp_path / "measurements"), rulebook,
                       workloads, find_device=lambda: FakeDevice("scale"), compiler=broken)
    assert outcome.exit_code == 1 and "compile failed: ptxas error" in outcome.lines[0]
    assert not (tmp_path / "measurements").exists()


def test_too_few_repeats_is_a_usage_error(rulebook, workloads, tmp_path):
    outcome = run_fake(rulebook, workloads, SCALE, tmp_path, FakeDevice("scale"), repeat=19)
    assert outcome.exit_code == 2 and "at least 20" in outcome.lines[0]


def _nvrtc() -> bool:
    from cakegov.gpu.compile import nvrtc_available

    return nvrtc_available()


@pytest.mark.skipif(not _nvrtc(), reason="needs the NVRTC wheels (the dev extra)")
def test_up_to_the_launch_with_the_real_compiler(rulebook, workloads, tmp_path):
    """Check, lower, emit, compile with NVRTC: the device receives an sm_90a cubin whose
    entry is the schedule's kernel; only the launch itself is faked."""
    device = FakeDevice("scale")
    outcome = run_file(SCALE, RunOptions(shapes=({"M": 64, "N": 64},),
                                         measurements=tmp_path / "measurements"),
                       rulebook, workloads, root=CORPUS.parent, find_device=lambda: device)
    assert outcome.exit_code == 0, outcome.lines
    ((artifact, launch),) = device.loads
    assert launch == launch_config(_lowered(rulebook, workloads, SCALE), workloads["scale"],
                                   {"M": 64, "N": 64})
    assert artifact.form == "cubin" and artifact.cubin is not None
    assert artifact.cubin[:4] == b"\x7fELF" and artifact.name == "scale_tile"
    assert "sm_90a" in artifact.compiler and artifact.details["registers"] > 0
    (rec,) = records_of(tmp_path, "scale")
    assert rec["kernel"]["artifact"] == "cubin"
    assert rec["kernel"]["compile"]["registers"] == artifact.details["registers"]


def test_no_compiler_is_no_evidence(rulebook, workloads, tmp_path):
    from cakegov.gpu.compile import CompilerUnavailable

    def missing(prepared, book):
        raise CompilerUnavailable("neither NVRTC nor nvcc is installed")

    outcome = run_file(SCALE, RunOptions(measurements=tmp_path), rulebook, workloads,
                       find_device=lambda: FakeDevice("scale"), compiler=missing)
    assert outcome.exit_code == 3 and len(outcome.lines) == 1
    assert outcome.lines[0].endswith("nothing measured")


# ---- CupyDevice's control flow, on a numpy stand-in for CuPy -------------------------
#
# These do not test CuPy (nothing here can); they run CupyDevice's own code — argument order,
# the shared-memory opt-in, rotation sets, the timed loop, the watchdog — against an object
# with the parts of CuPy's interface it uses, backed by numpy.


class _NumpyCupy:
    """The slice of CuPy's interface CupyDevice uses, on numpy; kernels by entry name."""

    def __init__(self, kernels: dict[str, Callable[..., None]], hang: bool = False):
        outer = self
        self.__version__ = "0-numpy"
        self.kernels = kernels
        self.launches: list[tuple] = []
        self.functions: list[Any] = []
        self.hang = hang

        class Event:
            def __init__(self):
                self.t = 0.0

            @property
            def done(self) -> bool:
                return not outer.hang

            def record(self, stream=None):
                self.t = time.perf_counter()

            def synchronize(self):
                pass

        class Stream:
            def __init__(self, non_blocking=False):
                pass

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False

            def synchronize(self):
                pass

        class Function:
            def __init__(self, fn):
                self.fn, self.num_regs, self.max_threads_per_block = fn, 64, 1024
                self.max_dynamic_shared_size_bytes = 0

            def __call__(self, grid, block, args, shared_mem=0):
                outer.launches.append((grid, block, shared_mem, args))
                self.fn(*args)

        class RawModule:
            def __init__(self, code=None, path=None, options=(), backend="nvrtc"):
                assert path is not None and Path(path).read_bytes() == b"\x7fELF fake"

            def get_function(self, name):
                outer.functions.append(Function(outer.kernels[name]))
                return outer.functions[-1]

        runtime = SimpleNamespace(
            getDevice=lambda: 0, getDeviceCount=lambda: 1, memGetInfo=lambda: (1 << 33, 1 << 34),
            driverGetVersion=lambda: 13000, runtimeGetVersion=lambda: 13000,
            getDeviceProperties=lambda dev: {
                "name": b"NumPy H200", "major": 9, "minor": 0, "l2CacheSize": 1 << 16,
                "sharedMemPerBlockOptin": 227 * 1024, "multiProcessorCount": 132})
        self.cuda = SimpleNamespace(
            runtime=runtime, Stream=Stream, Event=Event,
            get_elapsed_time=lambda a, b: (b.t - a.t) * 1e3,
            Device=lambda: SimpleNamespace(synchronize=lambda: None))
        self.RawModule = RawModule
        self.asarray = lambda a: np.array(a, copy=True).view(_DeviceArray)
        self.driver = _FakeDriver(self.launches)
        self.asnumpy = lambda a, stream=None: np.array(a, copy=True)
        self.get_default_memory_pool = lambda: SimpleNamespace(free_all_blocks=lambda: None)
        self.matmul, self.argmin = np.matmul, np.argmin
        self.int32, self.float32 = np.int32, np.float32


class _DeviceArray(np.ndarray):
    """A numpy array with CuPy's `.data.ptr` (its host address stands for the device's)."""

    @property
    def data(self):  # type: ignore[override]
        return SimpleNamespace(ptr=self.ctypes.data)


class _FakeDriver:
    """The slice of `cuda.bindings.driver` that cakegov/gpu/tensormap.py calls, recording
    every cuTensorMapEncodeTiled call; the "map" holds the call number and the address."""

    cuuint64_t = cuuint32_t = CUtensorMapDataType = CUtensorMapInterleave = int
    CUtensorMapSwizzle = CUtensorMapL2promotion = CUtensorMapFloatOOBfill = int

    def __init__(self, launches: list | None = None):
        self.calls: list[tuple] = []
        self.launches = launches if launches is not None else []
        self.when: list[int] = []  # launches made before each call

    def cuInit(self, flags):
        return (0,)

    def cuTensorMapEncodeTiled(self, *args):
        self.calls.append(args)
        self.when.append(len(self.launches))
        return 0, SimpleNamespace(opaque=[len(self.calls), args[2]] + [0] * 14)


def _scale_kernel(x, y, m, n, *maps):
    assert isinstance(m, np.int32) and isinstance(n, np.int32)
    assert x.shape == y.shape == (int(m), int(n))
    y[...] = x * np.float32(2.5)


def _cubin_compiler(prepared, book) -> KernelArtifact:
    return KernelArtifact(name=prepared.kernel.name, cubin=b"\x7fELF fake", compiler="fake")


def test_cupy_device_control_flow_on_a_numpy_stand_in(rulebook, workloads, tmp_path):
    from cakegov.gpu.device import CupyDevice

    cp = _NumpyCupy({"scale_tile": _scale_kernel})
    outcome = run_file(SCALE, RunOptions(shapes=({"M": 64, "N": 64},), repeat=20,
                                         measurements=tmp_path), rulebook, workloads,
                       find_device=lambda: CupyDevice(cp, cp.driver), compiler=_cubin_compiler)
    assert outcome.exit_code == 0, outcome.lines
    kernel = _lowered(rulebook, workloads, SCALE)
    grid, block, smem, args = cp.launches[0]
    launch = launch_config(kernel, workloads["scale"], {"M": 64, "N": 64})
    assert grid == launch.grid
    assert block == (kernel.threads, 1, 1) and smem == kernel.smem_bytes
    # pointers, sizes, then the tensor map of X by value (128 bytes, encoded for X's buffer)
    assert [a.dtype for a in args] == [np.float32, np.float32, np.int32, np.int32,
                                       TENSOR_MAP_DTYPE]
    (spec,) = launch.tensor_maps
    assert args[4]["opaque"][0][1] == args[0].data.ptr and args[4].shape == (1,)
    assert args[4].nbytes == 128
    first = cp.driver.calls[0]
    assert first[1:3] == (2, args[0].data.ptr)  # rank 2, X's address
    assert first[3:6] == ([64, 64], [64 * 4], [spec.box_cols, spec.box_rows])
    assert first[8] == 0 and first[10] == 0  # no swizzle for this tile, zeros out of bounds
    # every buffer launched with has its map; the rotation sets are all encoded before the
    # warm-up (after the 2 correctness launches): the timed loop never encodes
    encoded = {call[2] for call in cp.driver.calls}
    assert {a[0].data.ptr for *_, a in cp.launches} <= encoded
    assert all(when <= 2 for when in cp.driver.when)
    assert cp.functions[0].max_dynamic_shared_size_bytes == (
        kernel.smem_bytes if kernel.smem_bytes > 48 * 1024 else 0)
    # 2 correctness launches + 5 warm-up + 20 timed
    assert len(cp.launches) == 2 + 5 + 20
    (rec,) = read_records(tmp_path / "scale.jsonl")
    assert rec["gpu"]["name"] == "NumPy H200" and rec["gpu"]["l2_bytes"] == 1 << 16
    rotation = rec["times_ms"]["rotation"]
    assert rotation["copies"] >= 2 and rotation["covers_l2"]
    assert rec["times_ms"]["n"] == 20 and rec["baseline"]["times_ms"]["n"] == 20
    assert rec["baseline"]["passed"] and rec["kernel"]["attributes"]["num_regs"] == 64


def test_cupy_device_opts_in_to_large_dynamic_shared_memory(rulebook, workloads, tmp_path):
    from cakegov.gpu.device import CupyDevice

    def gemm_kernel(a, b, c, m, n, k, *maps):
        c[...] = bf16_values(a) @ bf16_values(b).T

    kernel = _lowered(rulebook, workloads, GEMM)
    assert kernel.smem_bytes > 48 * 1024
    cp = _NumpyCupy({kernel.name: gemm_kernel})
    outcome = run_file(GEMM, RunOptions(shapes=({"M": 200, "N": 136, "K": 64},),
                                        measurements=tmp_path), rulebook, workloads,
                       find_device=lambda: CupyDevice(cp, cp.driver), compiler=_cubin_compiler)
    assert outcome.exit_code == 0, outcome.lines
    assert cp.functions[0].max_dynamic_shared_size_bytes == kernel.smem_bytes
    assert [a.dtype for a in cp.launches[0][3]] == [np.uint16, np.uint16, np.float32,
                                                    np.int32, np.int32, np.int32,
                                                    TENSOR_MAP_DTYPE, TENSOR_MAP_DTYPE]
    # A and B through 128B-swizzled maps of their own tiles
    swizzles = sorted((c[5], c[8]) for c in cp.driver.calls[:2])
    assert swizzles == [([64, 128], 3), ([64, 128], 3)]


def test_cupy_device_watchdog_ends_a_hung_kernel(rulebook, workloads, tmp_path):
    from cakegov.gpu.device import CupyDevice

    cp = _NumpyCupy({"scale_tile": _scale_kernel}, hang=True)
    freed = []
    cp.get_default_memory_pool = lambda: SimpleNamespace(free_all_blocks=lambda: freed.append(1))
    outcome = run_file(SCALE, RunOptions(shapes=({"M": 64, "N": 64}, {"M": 8, "N": 8}),
                                         measurements=tmp_path, timeout_s=0.05),
                       rulebook, workloads, find_device=lambda: CupyDevice(cp, cp.driver),
                       compiler=_cubin_compiler)
    assert outcome.exit_code == 1 and outcome.hung and len(outcome.results) == 1
    assert "did not finish within 0.05 s" in outcome.lines[1]
    assert freed == []  # freeing device memory under a running kernel would block


# ---- the command line ----------------------------------------------------------------


def test_without_a_device_run_exits_3_with_one_line(monkeypatch, tmp_path):
    def no_device():
        raise NoDevice("CuPy is not importable (ModuleNotFoundError: No module named 'cupy')")

    monkeypatch.setattr("cakegov.gpu.run.probe", no_device)
    result = CliRunner().invoke(app, ["run", str(SCALE), "--measurements", str(tmp_path)])
    assert result.exit_code == 3
    lines = result.output.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("no CUDA device: CuPy is not importable")
    assert lines[0].endswith("; nothing measured")
    assert not list(tmp_path.iterdir())


@pytest.mark.skipif(cuda_available(), reason="a CUDA device is present")
def test_this_machine_has_no_device_and_says_so(tmp_path):
    result = CliRunner().invoke(app, ["run", str(SCALE), "--measurements", str(tmp_path)])
    assert result.exit_code == 3 and len(result.output.strip().splitlines()) == 1


def test_an_unclean_schedule_never_reaches_the_device(monkeypatch):
    monkeypatch.setattr("cakegov.gpu.run.probe", lambda: pytest.fail("device probed"))
    path = CORPUS / "invalid" / "scale" / "threads_over_limit.cake"
    result = CliRunner().invoke(app, ["run", str(path)])
    assert result.exit_code == 1
    assert "verdict rejected" in result.output and "R005" in result.output


def test_a_bad_shape_is_a_usage_error():
    result = CliRunner().invoke(app, ["run", str(SCALE), "--shape", "M=10,N=7"])
    assert result.exit_code == 2 and "multiple of 4" in result.output


# ---- the report table ----------------------------------------------------------------


def _record(file: str, run: str, shape: dict, passed: bool, t: float | None,
            b: float | None, ts: str = "2030-01-01T00:00:00+00:00") -> dict:
    return {"schema": 1, "run_id": run, "timestamp": ts, "schedule": {"file": file},
            "shape": shape, "passed": passed, "error": None,
            "gpu": {"name": "NVIDIA H200", "driver": "580.1", "cupy_version": "14"},
            "comparisons": [] if passed else [{"passed": False, "reason": "max relative "
                                               "error 1e+00 exceeds 2e-02"}],
            "times_ms": None if t is None else {"median_ms": t},
            "baseline": {"name": "cupy.matmul", "passed": True,
                         "times_ms": None if b is None else {"median_ms": b}}}


def test_report_table_rows_ratio_and_missing_runs(tmp_path):
    records = [
        _record("a.cake", "old", {"M": 1}, False, None, None),
        _record("a.cake", "new", {"M": 1}, True, 2.0, 1.0),
        _record("a.cake", "new", {"M": 2}, True, 1.0, 4.0),
        _record("b.cake", "r", {"M": 1}, False, None, None),
    ]
    rows = report.build_rows(records, [("a.cake", 0), ("b.cake", 1), ("c.cake", 3)])
    assert [(r.schedule, r.correct, r.ratio) for r in rows] == [
        ("a.cake", "yes", 2.0), ("a.cake", "yes", 0.25), ("b.cake", "NO", None),
        ("c.cake", "not measured", None)]
    text = report.render(rows, records)
    lines = text.splitlines()
    assert lines[0] == "GPU: NVIDIA H200 (driver 580.1, cupy 14)"
    assert lines[1].split() == ["schedule", "shape", "correct?", "time", "ms", "TFLOP/s",
                                "GB/s", "of", "peak", "baseline", "ms", "ratio", "baseline"]
    assert "2.0000" in lines[3] and "1.0000" in lines[3] and "2.00" in lines[3]
    records[1]["throughput"] = {"tflops": 687.2, "gbps": 1.5, "fraction_of_peak": 0.6949}
    assert "687.2" in report.render(report.build_rows(records, [("a.cake", 0)]), records)
    assert "69.5%" in report.render(report.build_rows(records, [("a.cake", 0)]), records)
    assert "c.cake: exit 3: not measured: no CUDA device" in text
    assert "2 of 4 rows correct; 1 not measured" in text


def test_report_main_reads_files_since_a_time(tmp_path, capsys):
    old = _record("a.cake", "r1", {"M": 1}, True, 1.0, 1.0, ts="2020-01-01T00:00:00+00:00")
    new = _record("a.cake", "r2", {"M": 1}, True, 3.0, 1.5, ts="2030-01-01T00:00:00+00:00")
    for rec in (old, new):
        append_record(tmp_path / "gemm.jsonl", rec)
    status = tmp_path / "status.tsv"
    status.write_text("a.cake\t0\n")
    code = report.main(["--measurements", str(tmp_path), "--since", "2025-01-01T00:00:00",
                        "--status", str(status)])
    out = capsys.readouterr().out
    assert code == 0 and "3.0000" in out and "1.5000" in out and "2.00" in out
    assert "1 of 1 rows correct" in out
    status.write_text("a.cake\t0\nz.cake\t3\n")
    assert report.main(["--measurements", str(tmp_path), "--status", str(status)]) == 1


# ---- baselines -----------------------------------------------------------------------


def test_baselines_agree_with_the_references(workloads):
    from cakegov.gpu.compare import compare_outputs

    cases = {"gemm": {"M": 40, "N": 24, "K": 64}, "kmeans_assign": {"N": 300, "K": 16, "D": 8},
             "scale": {"M": 9, "N": 12}}
    assert scale_alpha(workloads["scale"]) == 2.5
    for name, sizes in cases.items():
        wl = workloads[name]
        base = baseline_for(wl)
        assert base is not None
        inputs = make_inputs(wl, sizes, 5)
        out = base.fn(np, base.prepare(inputs.values), sizes)
        ref = wl.reference({n: v.astype(np.float64) for n, v in inputs.values.items()}, sizes)
        assert all(c.passed for c in compare_outputs(wl, out, ref, inputs.values)), name


# ---- on a real device ----------------------------------------------------------------

SCALE_SOURCE = r"""
extern "C" __global__ void __launch_bounds__(128, 1)
scale_hand(const float* X, float* Y, int M, int N) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    long n = (long)M * N;
    if (i < n - SKIP) Y[i] = 2.5f * X[i];
}
"""


def _hand_kernel(skip: int) -> KernelArtifact:
    return KernelArtifact(name="scale_hand", source=SCALE_SOURCE.replace("SKIP", str(skip)),
                          compiler="cupy nvrtc (test)")


@gpu
@needs_device
@pytest.mark.parametrize("skip, correct", [(0, True), (1, False)])
def test_device_runs_a_hand_written_kernel(workloads, skip, correct):
    from cakegov.gpu.device import probe
    from cakegov.gpu.run import run_shape

    wl = workloads["scale"]
    device = probe()
    try:
        sizes = {"M": 1000, "N": 333}
        launch = LaunchConfig(grid=(-(-1000 * 333 // 128), 1, 1), block=(128, 1, 1),
                              smem_bytes=0, tensors=("X", "Y"), sizes=(1000, 333))
        kernel = device.load(_hand_kernel(skip), launch)
        shape = run_shape(device, kernel, launch, wl, make_inputs(wl, sizes, 11),
                          baseline_for(wl), RunOptions(repeat=20))
        assert shape.passed is correct, shape.comparisons
        if correct:
            assert shape.stats is not None and shape.stats.n == 20
            assert shape.baseline_stats is not None and shape.baseline_stats.median_ms > 0
            assert shape.timing is not None and shape.timing.rotation.covers_l2
        else:
            assert "NaN" in shape.comparisons[0].reason
        assert device.info.l2_bytes > 0 and device.info.name
    finally:
        device.close()


@gpu
@needs_device
def test_device_baselines_agree_with_the_references(workloads):
    from cakegov.gpu.compare import compare_outputs
    from cakegov.gpu.device import probe

    device = probe()
    try:
        for name, sizes in {"gemm": {"M": 1000, "N": 520, "K": 320},
                            "kmeans_assign": {"N": 1000, "K": 16, "D": 64},
                            "scale": {"M": 1000, "N": 333}}.items():
            wl = workloads[name]
            base = baseline_for(wl)
            inputs = make_inputs(wl, sizes, 3)
            out = device.execute_baseline(base, base.prepare(inputs.values), sizes)
            ref = wl.reference({n: v.astype(np.float64) for n, v in inputs.values.items()},
                               sizes)
            got = compare_outputs(wl, out, ref, inputs.values)
            assert all(c.passed for c in got), (name, got)
    finally:
        device.close()


def _one_valid_schedule_per_workload() -> list[Path]:
    first: dict[str, Path] = {}
    for path in sorted((CORPUS / "valid").rglob("*.cake")):
        first.setdefault(path.parent.name, path)
    return list(first.values())


@gpu
@needs_device
@pytest.mark.parametrize("path", _one_valid_schedule_per_workload(),
                         ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_a_valid_schedule_runs_correctly_on_a_tail_shape(rulebook, workloads, path):
    """One schedule per workload, on its smallest shape that is not the first (a tail
    shape); scripts/gpu_check.sh runs every valid schedule on every shape."""
    schedule = parse_bytes(path.read_bytes(), Checker(rulebook, workloads).vocabulary)
    wl = workloads[schedule.workload]
    shapes = select_shapes(wl, schedule.sizes, schedule.divisible)
    tail = min(shapes[1:] or shapes, key=lambda s: int(np.prod(list(s.values()))))
    outcome = run_file(path, RunOptions(shapes=(tail,), repeat=20, record=False), rulebook,
                       workloads)
    assert outcome.exit_code == 0, "\n".join(outcome.lines)
    assert outcome.results[0].passed and outcome.results[0].stats is not None
