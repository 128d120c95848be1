"""The derived tolerances (cakegov/gpu/tolerance.py) catch what the old ones let through,
and pass what a correct kernel computes. numpy only: the "kernels" here are f32
accumulations in the orders a GPU kernel may use, and their mutations."""

from __future__ import annotations

import numpy as np
import pytest

from cakegov.gpu.compare import compare_float, compare_outputs
from cakegov.gpu.data import make_inputs
from cakegov.gpu.tolerance import UNIT_ROUNDOFF, gemm_bound

SIZES = {"M": 64, "N": 48, "K": 4096}


@pytest.fixture(scope="module")
def gemm(workloads):
    wl = workloads["gemm"]
    inputs = make_inputs(wl, SIZES, 7)
    a, b = inputs.values["A"], inputs.values["B"]
    ref = wl.reference({n: v.astype(np.float64) for n, v in inputs.values.items()}, SIZES)
    return wl, inputs, a, b, ref


def _sequential_f32(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """One f32 accumulator per element, products added in k order (a CUDA-core kernel)."""
    c = np.zeros((a.shape[0], b.shape[0]), dtype=np.float32)
    for k in range(a.shape[1]):
        c += np.outer(a[:, k], b[:, k]).astype(np.float32)  # exact: bf16 x bf16 fits f32
    return c


def _k16_blocked_f32(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per k16 step a partial product, added to the f32 accumulator (wgmma's order)."""
    c = np.zeros((a.shape[0], b.shape[0]), dtype=np.float32)
    for k0 in range(0, a.shape[1], 16):
        c += (a[:, k0:k0 + 16] @ b[:, k0:k0 + 16].T).astype(np.float32)
    return c


def _check(wl, inputs, ref, c):
    return compare_outputs(wl, {"C": np.asarray(c, dtype=np.float32)}, ref, inputs.values)[0]


@pytest.mark.parametrize("order", [_sequential_f32, _k16_blocked_f32,
                                   lambda a, b: a @ b.T])  # numpy's f32 BLAS order
def test_correct_f32_accumulation_passes(gemm, order):
    wl, inputs, a, b, ref = gemm
    result = _check(wl, inputs, ref, order(a, b))
    assert result.passed, result.reason
    assert result.max_error < 0.5  # not at the edge: the bound has headroom


def test_the_bound_is_below_every_single_product_at_k4096(gemm):
    _, _, a, b, _ = gemm
    bound = gemm_bound(a, b)
    assert bound.max() < 0.125 + 4096 * UNIT_ROUNDOFF["f32"]
    assert np.abs(a).min() * np.abs(b).min() >= 0.25  # the generator's promise


def test_dropping_one_k_step_fails(gemm):
    wl, inputs, a, b, ref = gemm
    c = _k16_blocked_f32(a, b)
    k0 = 2048  # one k16 step missing in one 64x16 output tile
    c[:, :16] -= (a[:, k0:k0 + 16] @ b[:16, k0:k0 + 16].T).astype(np.float32)
    result = _check(wl, inputs, ref, c)
    assert not result.passed and "derived error bound" in result.reason
    assert result.details["over_bound"] > 0.9 * 64 * 16


@pytest.mark.parametrize("where", [(0, 0, 0), (17, 5, 4095), (63, 47, 1234)])
def test_one_missing_or_sign_flipped_product_fails(gemm, where):
    wl, inputs, a, b, ref = gemm
    i, j, k = where
    good = _k16_blocked_f32(a, b)
    for wrong in (0.0, -1.0):  # the product dropped, or added with the wrong sign
        c = good.copy()
        c[i, j] += np.float32((wrong - 1.0) * a[i, k] * b[j, k])
        result = _check(wl, inputs, ref, c)
        assert not result.passed and result.details["worst_index"] == [i, j], result.reason
        # the former bound (2e-2 of max|C|) accepted exactly this
        assert compare_float("C", "f32", c, ref["C"], 2e-2).passed


def test_stale_elements_fail(gemm, workloads):
    wl, inputs, a, b, ref = gemm
    other = make_inputs(wl, SIZES, 8).values  # the previous launch's inputs
    stale = _k16_blocked_f32(other["A"], other["B"])
    c = _k16_blocked_f32(a, b)
    c[5, 7], c[40, 40] = stale[5, 7], stale[40, 40]
    result = _check(wl, inputs, ref, c)
    assert not result.passed and result.details["over_bound"] == 2


def test_poison_left_in_the_output_fails(gemm):
    wl, inputs, a, b, ref = gemm
    c = _k16_blocked_f32(a, b)
    c[3, 3] = np.nan
    assert "NaN" in _check(wl, inputs, ref, c).reason


# ---- k-means ---------------------------------------------------------------------------

KM = {"N": 4096, "K": 64, "D": 64}


@pytest.fixture(scope="module")
def kmeans(workloads):
    wl = workloads["kmeans_assign"]
    inputs = make_inputs(wl, KM, 3)
    x, c = inputs.values["X"], inputs.values["C"]
    ref = wl.reference({n: v.astype(np.float64) for n, v in inputs.values.items()}, KM)
    return wl, inputs, x, c, ref


def _labels_f32(x: np.ndarray, c: np.ndarray, dims: slice = slice(None)) -> np.ndarray:
    x, c = x[:, dims].astype(np.float32), c[:, dims].astype(np.float32)
    dist = (c * c).sum(1)[None, :] - np.float32(2.0) * (x @ c.T)
    return np.argmin(dist, axis=1).astype(np.int32)


def test_kmeans_f32_labels_pass_with_ties_present(kmeans):
    wl, inputs, x, c, ref = kmeans
    d = ((x[:, None, :].astype(np.float64) - c[None, :, :]) ** 2).sum(-1)
    best = np.sort(d, axis=1)
    assert (best[:, 1] == best[:, 0]).sum() > 100  # exact ties (duplicated centroids)
    assert ((best[:, 1] - best[:, 0]) / best[:, 0] < 1e-4).sum() > 100  # and near ones
    result = compare_outputs(wl, {"labels": _labels_f32(x, c)}, ref, inputs.values)[0]
    assert result.passed, result.reason


def test_kmeans_tied_label_either_way_passes_a_clear_loser_fails(kmeans):
    wl, inputs, x, c, ref = kmeans
    labels = ref["labels"].copy()
    dup = {tuple(row): i for i, row in enumerate(c)}  # last index of every distinct row
    tied = next(n for n, lab in enumerate(labels) if dup[tuple(c[lab])] != lab)
    labels[tied] = dup[tuple(c[labels[tied]])]
    assert compare_outputs(wl, {"labels": labels}, ref, inputs.values)[0].passed
    d = ((x[tied].astype(np.float64) - c) ** 2).sum(-1)
    labels[tied] = int(np.argmax(d))
    assert not compare_outputs(wl, {"labels": labels}, ref, inputs.values)[0].passed


def test_kmeans_skipping_one_dimension_fails(kmeans):
    wl, inputs, x, c, ref = kmeans
    result = compare_outputs(wl, {"labels": _labels_f32(x, c, slice(0, -1))}, ref,
                             inputs.values)[0]
    assert not result.passed and result.details["wrong"] > 10, result.reason


def test_the_bound_holds_where_f32_accumulation_really_rounds():
    # bf16 inputs keep K=4096 partial sums exact in f32 (16-bit products, sums < 2^8);
    # 12-bit significands (products still exact in f32) make every addition round.
    rng = np.random.default_rng(0)

    def draw(rows):
        x = rng.uniform(0.5, 1.0, (rows, 4096)) * rng.choice([-1.0, 1.0], (rows, 4096))
        m, e = np.frexp(x)
        return np.ldexp(np.round(m * 4096) / 4096, e).astype(np.float32)

    a, b = draw(32), draw(24)
    exact = a.astype(np.float64) @ b.astype(np.float64).T
    bound = gemm_bound(a, b)
    for c in (_sequential_f32(a, b), _k16_blocked_f32(a, b)):
        err = np.abs(c - exact)
        assert err.max() > 0  # rounding happened
        assert (err <= bound).all() and (err / bound).max() < 0.5
