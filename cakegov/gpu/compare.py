"""Compare a kernel's outputs with the workload's float64 reference.

Floating outputs: the largest absolute error relative to the largest reference magnitude
(`max|out - ref| / max|ref|`) must stay within the workload's bound for the output dtype.
The bound is relative, so a constant or zero output cannot satisfy it the way it can
satisfy an absolute tolerance; a constant output is also refused explicitly when the
reference is not constant, and any NaN or infinity (poison the kernel never overwrote)
fails outright. Integer outputs are exact, except that a workload with a `tie_gap` and a
distance function below (k-means labels) accepts a different label whose distance is
within `tie_gap` (relative) of the reference label's: f32 arithmetic may legitimately
order near-ties differently from the float64 reference.

Workloads with derived bounds (cakegov/gpu/tolerance.py) are held to them instead: GEMM
outputs element by element against `lambda sqrt(K) u sum|a b|` (`compare_bounded`; the
error reported is the worst ratio of error to bound, passing at <= 1), k-means labels
against the f32 error bounds of the two distances (`compare_labels` with `slack`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from cakegov.corpus.workloads import Workload
from cakegov.gpu.data import FLOAT_ENCODINGS, decode
from cakegov.gpu.tolerance import ELEMENT_BOUNDS, TIE_SLACK


@dataclass(frozen=True)
class Comparison:
    """The verdict on one output tensor."""

    tensor: str
    dtype: str
    passed: bool
    max_error: float
    tolerance: float
    reason: str
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def kmeans_distances(values: Mapping[str, np.ndarray]) -> np.ndarray:
    """Squared distances [N, K] from every point to every centroid, in float64."""
    x = np.asarray(values["X"], dtype=np.float64)
    c = np.asarray(values["C"], dtype=np.float64)
    return (x * x).sum(1)[:, None] - 2.0 * (x @ c.T) + (c * c).sum(1)[None, :]


# Workloads whose integer outputs are argmins of a distance: the distance, for the
# tie-aware comparison. Keyed by workload name; the function reads the exact inputs.
TIE_DISTANCES: dict[str, Callable[[Mapping[str, np.ndarray]], np.ndarray]] = {
    "kmeans_assign": kmeans_distances,
    "knn": kmeans_distances,
}


def compare_float(tensor: str, dtype: str, raw: np.ndarray, reference: np.ndarray,
                  tolerance: float) -> Comparison:
    """Relative max-error comparison of one floating output."""
    out = np.asarray(decode(dtype, raw), dtype=np.float64)
    ref = np.asarray(reference, dtype=np.float64)

    def fail(reason: str, error: float = float("inf"), **details: Any) -> Comparison:
        return Comparison(tensor, dtype, False, error, tolerance, reason, details)

    if out.shape != ref.shape:
        return fail(f"shape {out.shape} differs from the reference's {ref.shape}")
    bad = ~np.isfinite(out)
    if bad.any():
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        return fail(f"{int(bad.sum())} of {out.size} elements are NaN or infinite (first at "
                    f"{first}): the kernel left poison or produced non-finite values",
                    non_finite=int(bad.sum()), first_non_finite=list(first))
    scale = float(np.abs(ref).max()) if ref.size else 0.0
    diff = np.abs(out - ref)
    error = float(diff.max() / scale) if scale > 0 else float(diff.max())
    worst = tuple(int(i) for i in np.unravel_index(int(diff.argmax()), diff.shape))
    details = {"scale": scale, "worst_index": list(worst),
               "worst_value": float(out[worst]), "worst_reference": float(ref[worst])}
    if ref.size > 1 and ref.max() > ref.min() and out.max() == out.min():
        return fail(f"output is constant ({float(out.flat[0]):.6g}) but the reference is not",
                    error, **details)
    if error > tolerance:
        return fail(f"max relative error {error:.3e} at {worst} exceeds {tolerance:.1e} "
                    f"(got {float(out[worst]):.6g}, expected {float(ref[worst]):.6g})", error,
                    **details)
    return Comparison(tensor, dtype, True, error, tolerance,
                      f"max relative error {error:.3e} <= {tolerance:.1e}", details)


def compare_bounded(tensor: str, dtype: str, raw: np.ndarray, reference: np.ndarray,
                    bound: np.ndarray) -> Comparison:
    """Element-wise comparison against a derived absolute bound per element."""
    out = np.asarray(decode(dtype, raw), dtype=np.float64)
    ref = np.asarray(reference, dtype=np.float64)

    def fail(reason: str, error: float = float("inf"), **details: Any) -> Comparison:
        return Comparison(tensor, dtype, False, error, 1.0, reason, details)

    if out.shape != ref.shape or np.shape(bound) != ref.shape:
        return fail(f"shape {out.shape} differs from the reference's {ref.shape}")
    bad = ~np.isfinite(out)
    if bad.any():
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        return fail(f"{int(bad.sum())} of {out.size} elements are NaN or infinite (first at "
                    f"{first}): the kernel left poison or produced non-finite values",
                    non_finite=int(bad.sum()), first_non_finite=list(first))
    diff = np.abs(out - ref)
    ratio = diff / np.maximum(bound, np.finfo(np.float64).tiny)
    worst = tuple(int(i) for i in np.unravel_index(int(ratio.argmax()), ratio.shape))
    error = float(ratio[worst])
    over = int((ratio > 1.0).sum())
    details = {"worst_index": list(worst), "worst_value": float(out[worst]),
               "worst_reference": float(ref[worst]), "worst_bound": float(bound[worst]),
               "over_bound": over, "max_abs_error": float(diff.max()),
               "max_bound": float(np.max(bound))}
    if ref.size > 1 and ref.max() > ref.min() and out.max() == out.min():
        return fail(f"output is constant ({float(out.flat[0]):.6g}) but the reference is not",
                    error, **details)
    if over:
        return fail(f"{over} of {out.size} elements exceed their derived error bound (worst "
                    f"at {worst}: got {float(out[worst]):.7g}, expected "
                    f"{float(ref[worst]):.7g}, error {float(diff[worst]):.3e} = "
                    f"{error:.3g} x its bound {float(bound[worst]):.3e})", error, **details)
    return Comparison(tensor, dtype, True, error, 1.0,
                      f"every element within its derived bound (worst at {error:.3f} of it)",
                      details)


def compare_labels(tensor: str, raw: np.ndarray, reference: np.ndarray, distances: np.ndarray,
                   tie_gap: float, tolerance: float = 0.0,
                   slack: np.ndarray | None = None) -> Comparison:
    """Exact label comparison that accepts near-ties: a label other than the reference's
    passes when its distance exceeds the reference label's by at most `tie_gap` relative,
    or, given `slack` (absolute error bounds [N, K] of the distances), by at most the sum
    of the two labels' bounds.

    `max_error` is the fraction of rows with a wrong (non-tie) label; the output passes when
    it is at most `tolerance` (0: every label right or a tie)."""
    out = np.asarray(raw)
    ref = np.asarray(reference)
    dtype = "i32"

    def fail(reason: str, error: float = 1.0, **details: Any) -> Comparison:
        return Comparison(tensor, dtype, False, error, tolerance, reason, details)

    if out.shape != ref.shape:
        return fail(f"shape {out.shape} differs from the reference's {ref.shape}")
    rows, k = distances.shape
    invalid = (out < 0) | (out >= k)
    if invalid.any():
        first = int(np.argwhere(invalid)[0][0])
        return fail(f"{int(invalid.sum())} of {rows} labels are outside [0, {k}) (first row "
                    f"{first} holds {np.asarray(out[first]).tolist()}): the kernel left "
                    "poison or wrote garbage", invalid=int(invalid.sum()),
                    first_invalid=first)
    if out.ndim == 2:
        return _compare_ranked(tensor, out, ref, distances, tie_gap, tolerance)
    idx = np.arange(rows)
    mismatch = out != ref
    d_ref = distances[idx, ref]
    d_out = distances[idx, out]
    gap = (d_out - d_ref) / np.maximum(np.abs(d_ref), np.finfo(np.float64).tiny)
    if slack is not None:
        allowed = slack[idx, ref] + slack[idx, out]
        tie = mismatch & (d_out - d_ref <= allowed)
        gap = (d_out - d_ref) / np.maximum(allowed, np.finfo(np.float64).tiny)
        tie_gap = 1.0  # reported in units of the allowed slack
    else:
        tie = mismatch & (gap <= tie_gap)
    wrong = mismatch & ~tie
    error = float(wrong.sum()) / rows if rows else 0.0
    details = {"mismatches": int(mismatch.sum()), "ties_accepted": int(tie.sum()),
               "wrong": int(wrong.sum()), "tie_gap": tie_gap,
               "first_wrong_rows": [int(i) for i in np.flatnonzero(wrong)[:5]]}
    if error > tolerance:
        first = int(np.flatnonzero(wrong)[0])
        return fail(f"{int(wrong.sum())} of {rows} labels are wrong (first row {first}: got "
                    f"{int(out[first])}, expected {int(ref[first])}, distance gap "
                    f"{gap[first]:.3e} > tie gap {tie_gap:.1e})", error, **details)
    return Comparison(tensor, dtype, True, error, tolerance,
                      f"all {rows} labels right ({int(tie.sum())} near-ties accepted)", details)


def _compare_ranked(tensor: str, out: np.ndarray, ref: np.ndarray, distances: np.ndarray,
                    tie_gap: float, tolerance: float) -> Comparison:
    """Ranked neighbour lists (rows, T), in range already: a row is right when its indices
    are distinct and the neighbour at every rank is the reference's or lies within
    `tie_gap` (relative) of the reference's distance at that rank (near-ties may swap
    places). `max_error` is the fraction of wrong rows."""
    rows = out.shape[0]
    idx = np.arange(rows)[:, None]
    d_ref = distances[idx, ref]
    d_out = distances[idx, out]
    gap = np.abs(d_out - d_ref) / np.maximum(np.abs(d_ref), np.finfo(np.float64).tiny)
    mismatch = out != ref
    srt = np.sort(out, axis=1)
    repeated = (srt[:, 1:] == srt[:, :-1]).any(axis=1) if out.shape[1] > 1 else \
        np.zeros(rows, dtype=bool)
    wrong_cell = mismatch & (gap > tie_gap)
    wrong = wrong_cell.any(axis=1) | repeated
    error = float(wrong.sum()) / rows if rows else 0.0
    ties = int((mismatch & ~wrong_cell).sum())
    details = {"mismatches": int(mismatch.sum()), "ties_accepted": ties,
               "wrong": int(wrong.sum()), "tie_gap": tie_gap,
               "first_wrong_rows": [int(i) for i in np.flatnonzero(wrong)[:5]]}
    if error > tolerance:
        first = int(np.flatnonzero(wrong)[0])
        why = ("repeats a neighbour" if repeated[first] else
               f"distance gap {float(gap[first].max()):.3e} > tie gap {tie_gap:.1e}")
        return Comparison(tensor, "i32", False, error, tolerance,
                          f"{int(wrong.sum())} of {rows} neighbour lists are wrong (first row "
                          f"{first}: got {out[first].tolist()}, expected "
                          f"{ref[first].tolist()}, {why})", details)
    return Comparison(tensor, "i32", True, error, tolerance,
                      f"all {rows} neighbour lists right ({ties} near-ties accepted)", details)


def compare_exact(tensor: str, dtype: str, raw: np.ndarray, reference: np.ndarray
                  ) -> Comparison:
    out = np.asarray(raw)
    ref = np.asarray(reference)
    if out.shape != ref.shape:
        return Comparison(tensor, dtype, False, 1.0, 0.0,
                          f"shape {out.shape} differs from the reference's {ref.shape}")
    wrong = out != ref.astype(out.dtype)
    error = float(wrong.sum()) / out.size if out.size else 0.0
    if wrong.any():
        first = tuple(int(i) for i in np.argwhere(wrong)[0])
        return Comparison(tensor, dtype, False, error, 0.0,
                          f"{int(wrong.sum())} of {out.size} elements differ (first at "
                          f"{first}: got {out[first].item()!r}, expected {ref[first].item()!r})")
    return Comparison(tensor, dtype, True, 0.0, 0.0, "exact match")


class Checks:
    """What comparing one shape's outputs needs beyond the reference, computed once per
    shape (a 4096^3 GEMM bound is a float64 matmul) and shared by every launch checked."""

    def __init__(self, workload: Workload, values: Mapping[str, np.ndarray]):
        self.workload, self.values = workload, values

    @cached_property
    def bounds(self) -> dict[str, np.ndarray] | None:
        fn = ELEMENT_BOUNDS.get(self.workload.name)
        return fn(self.values) if fn else None

    @cached_property
    def distances(self) -> np.ndarray | None:
        fn = TIE_DISTANCES.get(self.workload.name)
        return fn(self.values) if fn else None

    @cached_property
    def slack(self) -> np.ndarray | None:
        fn = TIE_SLACK.get(self.workload.name)
        return fn(self.values) if fn else None


def compare_outputs(workload: Workload, outputs: Mapping[str, np.ndarray],
                    reference: Mapping[str, np.ndarray], values: Mapping[str, np.ndarray],
                    checks: Checks | None = None) -> list[Comparison]:
    """Compare every output of `workload`; `values` are the exact inputs (for bounds and
    tie checks); pass one `Checks` to compare several launches of a shape cheaply."""
    checks = checks or Checks(workload, values)
    results = []
    for name in workload.outputs:
        dtype = workload.tensors[name][0]
        if name not in outputs:
            results.append(Comparison(name, dtype, False, float("inf"), 0.0,
                                      "output was not returned by the device"))
            continue
        raw, ref = outputs[name], reference[name]
        if dtype in FLOAT_ENCODINGS and checks.bounds is not None and name in checks.bounds:
            results.append(compare_bounded(name, dtype, raw, ref, checks.bounds[name]))
        elif dtype in FLOAT_ENCODINGS:
            if dtype not in workload.tolerance:
                raise KeyError(f"workload {workload.name} has no TOLERANCE for {dtype}")
            results.append(compare_float(name, dtype, raw, ref, workload.tolerance[dtype]))
        elif "tie_gap" in workload.tolerance and checks.distances is not None:
            results.append(compare_labels(name, raw, ref, checks.distances,
                                          float(workload.tolerance["tie_gap"]),
                                          float(workload.tolerance.get(dtype, 0.0)),
                                          checks.slack))
        else:
            results.append(compare_exact(name, dtype, raw, ref))
    return results
