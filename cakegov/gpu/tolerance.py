"""Error bounds derived from the arithmetic, not chosen: what a correct kernel may differ
from the float64 reference by, element by element.

GEMM (C = A B^T, K terms per element). The inputs are bf16/f16 values, so every product
a*b is exact in f32 (8 + 8 or 11 + 11 significand bits <= 24); the only rounding is in the
accumulation, in whatever order the kernel sums (per thread, per k16 wgmma step, split
over warps). For any order, the probabilistic bound of Higham & Mary ("A New Approach to
Probabilistic Rounding Error Analysis", SIAM J. Sci. Comput. 41(5), 2019, Theorem 3.1)
bounds the error of a sum of K terms by `lambda * sqrt(K) * u * sum|a_k b_k|` with
probability at least `1 - 2 exp(-lambda^2 (1 - u)^2 / 2)`; with lambda = 8 that is
`1 - 2.5e-14` per element, so a correct 4096^2 output fails with probability below 1e-6.
u is the unit roundoff of the accumulator: 2^-24 for f32 (round to nearest), 2^-11 for an
f16 accumulator. Storing the result in the output dtype adds `u_out * |c|`.

The bound is per element (an element whose terms are small gets a small bound), so a
kernel that drops one k-step (16 products), misses one product, or leaves a stale value
fails it: at K = 4096 with the gemm workload's inputs (|a|, |b| in [0.5, 1]) every single
product exceeds the largest possible bound (8 * 64 * 2^-24 * 4096 = 0.125 < 0.25), where
the former tolerance (2e-2 of max|C|) let errors of about 1.6 through. tests/test_tolerance.py
shows each of these failing and a correct f32-accumulated result passing, with numpy only.

k-means labels: exact, except near-ties (cakegov/gpu/compare.py `compare_labels`): a
label is accepted when its reference distance exceeds the reference label's by no more
than the two distances' f32 error bounds (`kmeans_slack`, the same probabilistic bound
over the 3D terms of `|x|^2 - 2 x.c + |c|^2`). Exact ties (duplicated centroids) are
therefore accepted either way; the generator makes them on purpose, next to near-ties."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

LAMBDA = 8.0  # probabilistic-bound confidence: 2 exp(-32) = 2.5e-14 per element
UNIT_ROUNDOFF = {"f32": 2.0**-24, "f16": 2.0**-11, "bf16": 2.0**-8, "f64": 2.0**-53}


def gemm_bound(a: np.ndarray, b: np.ndarray, accumulate: str = "f32", out: str = "f32",
               lam: float = LAMBDA) -> np.ndarray:
    """Per-element absolute bound for C = A @ B.T (A [M, K], B [N, K], exact inputs)."""
    if accumulate not in UNIT_ROUNDOFF or out not in UNIT_ROUNDOFF:
        raise ValueError(f"no unit roundoff for {accumulate!r} / {out!r}")
    a64 = np.abs(np.asarray(a, dtype=np.float64))
    b64 = np.abs(np.asarray(b, dtype=np.float64))
    k = a64.shape[1]
    magnitude = a64 @ b64.T  # sum_k |a_ik b_jk|, which also bounds |c_ij|
    u = UNIT_ROUNDOFF[accumulate]
    return lam * math.sqrt(max(k, 1)) * u * magnitude + UNIT_ROUNDOFF[out] * magnitude


def gemm_bounds(values: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The gemm workload's bounds: bf16 inputs, f32 accumulation, f32 output."""
    return {"C": gemm_bound(values["A"], values["B"])}


def kmeans_slack(values: Mapping[str, np.ndarray], lam: float = LAMBDA) -> np.ndarray:
    """Absolute error bound [N, K] of an f32 evaluation of every squared distance
    `|x|^2 - 2 x.c + |c|^2` (3D products and sums, each term exact-ish in f64 here): a
    kernel may order two centroids differently from the reference only when their
    reference distances are closer than the sum of their two bounds."""
    x = np.asarray(values["X"], dtype=np.float64)
    c = np.asarray(values["C"], dtype=np.float64)
    d = x.shape[1]
    magnitude = (x * x).sum(1)[:, None] + 2.0 * np.abs(x) @ np.abs(c).T + (c * c).sum(1)[None, :]
    return lam * math.sqrt(3.0 * max(d, 1)) * UNIT_ROUNDOFF["f32"] * magnitude


# Workloads whose floating outputs are compared against derived per-element bounds
# (cakegov/gpu/compare.py); keyed by workload name, reading the exact input values.
ELEMENT_BOUNDS = {"gemm": gemm_bounds}
# Workloads whose integer outputs are argmins: the absolute error bound of each distance.
TIE_SLACK = {"kmeans_assign": kmeans_slack}
