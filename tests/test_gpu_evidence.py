"""The runner's evidence rules that need no GPU: every timed launch's output re-poisoned and
a sample (each rotation set's last launch) checked, sizes positive, headline shapes,
TFLOP/s and the roofline fraction. CupyDevice's own code runs on the numpy stand-in of
tests/test_gpu_runner.py; nothing here is a measurement."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from cakegov.corpus.workloads import check_positive
from cakegov.gpu.data import DataError, bf16_values, headline_shapes, select_shapes
from cakegov.gpu.peaks import peaks_for, throughput
from cakegov.gpu.run import RunOptions, launch_config, run_file
from tests.test_gpu_runner import SCALE, _cubin_compiler, _lowered, _NumpyCupy


def _scale_run(kernel, rulebook, workloads, tmp_path):
    from cakegov.gpu.device import CupyDevice

    cp = _NumpyCupy({"scale_tile": kernel})
    outcome = run_file(SCALE, RunOptions(shapes=({"M": 64, "N": 64},), repeat=20,
                                         measurements=tmp_path), rulebook, workloads,
                       find_device=lambda: CupyDevice(cp, cp.driver), compiler=_cubin_compiler)
    return outcome, cp


def test_every_rotation_sets_last_timed_launch_is_checked(rulebook, workloads, tmp_path):
    def good(x, y, m, n, *maps):
        y[...] = x * np.float32(2.5)

    outcome, _ = _scale_run(good, rulebook, workloads, tmp_path)
    assert outcome.exit_code == 0, outcome.lines
    shape = outcome.results[0]
    copies = shape.timing.rotation.copies
    # the stand-in's 64 KiB L2 needs 5 sets of 32 KiB: the last 5 of 20 timed launches
    assert shape.timed_checked == tuple(range(20 - min(copies, 20), 20))


@pytest.mark.parametrize("fail_at", [25, 27])  # 2 correctness + 5 warm-up + 20 timed
def test_a_timed_launch_that_writes_nothing_fails(rulebook, workloads, tmp_path, fail_at):
    calls = []

    def flaky(x, y, m, n, *maps):
        calls.append(1)
        if len(calls) != fail_at:  # one launch writes nothing: without re-poisoning its
            y[...] = x * np.float32(2.5)  # set would still hold an earlier launch's output

    outcome, _ = _scale_run(flaky, rulebook, workloads, tmp_path)
    assert outcome.exit_code == 1
    bad = next(c for c in outcome.results[0].comparisons if not c.passed)
    assert f"timed launch {fail_at - 7} of 20" in bad.reason and "NaN" in bad.reason


def test_a_zero_size_is_a_clear_error(rulebook, workloads):
    wl = workloads["gemm"]
    with pytest.raises(DataError, match="positive"):
        select_shapes(wl, {}, {"K": 64}, [{"M": 256, "N": 256, "K": 0}])
    with pytest.raises(DataError, match="positive"):
        select_shapes(wl, {}, {"K": 0})
    with pytest.raises(ValueError, match="positive"):
        wl.shapes_for({"K": 0}, {})
    with pytest.raises(ValueError, match="positive"):
        check_positive({"N": -1}, "a size")
    kernel = _lowered(rulebook, workloads, SCALE)
    with pytest.raises(DataError, match="sizes must be positive"):
        launch_config(kernel, workloads["scale"], {"M": 0, "N": 64})


def test_a_zero_size_in_run_options_is_a_usage_error(rulebook, workloads, tmp_path):
    outcome = run_file(SCALE, RunOptions(shapes=({"M": 0, "N": 64},), measurements=tmp_path),
                       rulebook, workloads, find_device=lambda: pytest.fail("probed"))
    assert outcome.exit_code == 2 and "positive" in outcome.lines[0]


def test_headline_shapes_the_schedule_accepts(workloads):
    gemm, km = workloads["gemm"], workloads["kmeans_assign"]
    assert gemm.headline == ({"M": 4096, "N": 4096, "K": 4096},)
    assert km.headline == ({"N": 65536, "K": 1024, "D": 128},)
    assert headline_shapes(gemm, {}, {"K": 64}) == ([{"M": 4096, "N": 4096, "K": 4096}], [])
    accepted, refused = headline_shapes(km, {"K": 16, "D": 64}, {})
    assert accepted == [] and "fixes K=16, D=64" in refused[0]
    assert "K % 3 == 0" in headline_shapes(gemm, {}, {"K": 3})[1][0]


def test_kmeans_check_shapes_reach_k64(workloads):
    shapes = workloads["kmeans_assign"].shapes
    assert sum(s["K"] >= 64 for s in shapes) >= 2 and shapes[-1]["N"] == 65536


def test_throughput_and_roofline_fraction_hand_worked():
    # 2 * 4096^3 = 137.44 GFLOP in 0.2 ms = 687.2 TFLOP/s; at 989 TFLOP/s the work needs
    # 0.13897 ms -> 69.5 % of the H200's bf16 peak
    got = throughput("gemm", {"M": 4096, "N": 4096, "K": 4096}, 0.2, "NVIDIA H200")
    assert got["tflops"] == pytest.approx(687.19, rel=1e-4)
    assert got["fraction_of_peak"] == pytest.approx(0.69484, rel=1e-4)
    # k-means headline: 17.18 GFLOP of f32 (67 TFLOP/s: 0.2564 ms) vs 33.6 MB (7 us)
    km = throughput("kmeans_assign", {"N": 65536, "K": 1024, "D": 128}, 0.5, "NVIDIA H200")
    assert km["fraction_of_peak"] == pytest.approx(2 * 65536 * 1024 * 128 / 67e12 / 0.5e-3)
    assert throughput("gemm", {"M": 1, "N": 1, "K": 1}, 0.1, "Tesla T4")["peaks"] is None
    assert throughput("gemm", {"M": 1, "N": 1, "K": 1}, None, "NVIDIA H200") is None
    assert peaks_for("NVIDIA H100 PCIe").memory_gbps == 2000.0


def test_sanitizer_runs_pick_the_smallest_shape_and_launch_twice(rulebook, workloads,
                                                                  tmp_path):
    from cakegov.gpu.device import CupyDevice
    from cakegov.gpu.sanitize import smallest_shape

    assert smallest_shape(workloads["gemm"], {}, {"K": 64}) == {"M": 256, "N": 256, "K": 256}
    assert smallest_shape(workloads["kmeans_assign"], {"K": 16, "D": 64}, {}) == {
        "N": 1000, "K": 16, "D": 64}

    def good(x, y, m, n, *maps):
        y[...] = x * np.float32(2.5)

    cp = _NumpyCupy({"scale_tile": good})
    outcome = run_file(SCALE, RunOptions(shapes=({"M": 64, "N": 64},), record=False,
                                         correctness_only=True), rulebook, workloads,
                       find_device=lambda: CupyDevice(cp, cp.driver), compiler=_cubin_compiler)
    assert outcome.exit_code == 0 and len(cp.launches) == 2
    assert outcome.results[0].timing is None and outcome.results[0].baseline_timing is None


class _DeviceArray(np.ndarray):
    """A numpy array with CuPy's `.data.ptr`, for the cuBLAS stand-in below."""

    @property
    def data(self):  # type: ignore[override]
        return SimpleNamespace(ptr=self.ctypes.data)


def _column_major_gemm_ex(registry):
    """cublasGemmEx's column-major contract on numpy buffers found by pointer."""
    import ctypes

    def decode(buf, dtype_code):
        return bf16_values(buf) if dtype_code == 14 else np.asarray(buf, np.float64)

    def gemm_ex(handle, transa, transb, m, n, k, alpha, a, atype, lda, b, btype, ldb, beta,
                c, ctype, ldc, compute, algo):
        assert (atype, btype, ctype, compute) == (14, 14, 0, 68)  # bf16, bf16, f32, 32F
        col_a = decode(registry[a], atype).reshape(-1, lda).T
        col_b = decode(registry[b], btype).reshape(-1, ldb).T
        op_a = col_a[:m, :k] if transa == 0 else col_a[:k, :m].T
        op_b = col_b[:k, :n] if transb == 0 else col_b[:n, :k].T
        col_c = registry[c].reshape(-1, ldc).T
        scale = ctypes.c_float.from_address(alpha).value
        keep = ctypes.c_float.from_address(beta).value
        prod = scale * (op_a @ op_b)  # beta == 0: C is not read (cuBLAS documentation)
        col_c[:m, :n] = prod if keep == 0 else prod + keep * col_c[:m, :n]

    return gemm_ex


def test_the_cublas_bf16_baseline_issues_a_b_transposed_gemm(monkeypatch, workloads):
    """The argument mapping of the cuBLAS baseline (row-major C = A B^T as column-major
    C^T = op_T(B^T) A^T) against a stand-in with cublasGemmEx's column-major semantics.
    Not cuBLAS: the call itself only runs on a device (tests marked gpu)."""
    import sys

    from cakegov.gpu.baselines import baseline_for
    from cakegov.gpu.compare import compare_outputs
    from cakegov.gpu.data import make_inputs

    registry: dict[int, np.ndarray] = {}

    def device(host):
        arr = np.ascontiguousarray(host).view(_DeviceArray)
        registry[arr.ctypes.data] = arr
        return arr

    modes = []
    cublas = SimpleNamespace(gemmEx=_column_major_gemm_ex(registry),
                             setStream=lambda h, s: None, getPointerMode=lambda h: 1,
                             setPointerMode=lambda h, m: modes.append(m))
    for name, mod in (("cupy_backends", SimpleNamespace()),
                      ("cupy_backends.cuda", SimpleNamespace()),
                      ("cupy_backends.cuda.libs", SimpleNamespace(cublas=cublas)),
                      ("cupy_backends.cuda.libs.cublas", cublas)):
        monkeypatch.setitem(sys.modules, name, mod)
    xp = SimpleNamespace(
        float32=np.float32,
        empty=lambda shape, dtype: device(np.full(shape, np.nan, dtype=dtype)),
        cuda=SimpleNamespace(device=SimpleNamespace(get_cublas_handle=lambda: 7),
                             get_current_stream=lambda: SimpleNamespace(ptr=0)))
    wl = workloads["gemm"]
    sizes = {"M": 40, "N": 24, "K": 64}
    base = baseline_for(wl)
    inputs = make_inputs(wl, sizes, 5)
    arrays = {n: device(a) for n, a in base.prepare(inputs.values).items()}
    assert arrays["A"].dtype == np.uint16  # bf16 patterns, not f32 values
    out = base.fn(xp, arrays, sizes)
    ref = wl.reference({n: v.astype(np.float64) for n, v in inputs.values.items()}, sizes)
    got = compare_outputs(wl, {"C": np.asarray(out["C"])}, ref, inputs.values)
    assert got[0].passed, got[0].reason
    assert modes == [0, 1]  # host pointer mode for the call, the caller's restored
