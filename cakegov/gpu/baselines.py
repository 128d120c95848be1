"""The baseline a user would pick instead of a generated kernel, per workload.

Each baseline is written against an array module `xp` (CuPy on the device, numpy in tests),
takes the exact input values the kernel received (bf16 inputs as their float32 values:
CuPy has no bf16 arrays), and is timed in the same run, with the same buffer rotation, as
the kernel. Its outputs are compared with the reference too, so a broken baseline cannot
make a kernel look fast."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from cakegov.corpus.workloads import Workload

ArrayFn = Callable[[Any, Mapping[str, Any], Mapping[str, int]], dict[str, Any]]


@dataclass(frozen=True)
class Baseline:
    """A library implementation of a workload."""

    name: str
    description: str
    fn: ArrayFn
    dtypes: Mapping[str, Any]  # input name -> numpy dtype the baseline reads

    def prepare(self, values: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Host arrays in the baseline's input types (exact for bf16 -> f32)."""
        return {n: np.ascontiguousarray(values[n], dtype=self.dtypes[n]) for n in self.dtypes}


def _gemm(xp: Any, a: Mapping[str, Any], sizes: Mapping[str, int]) -> dict[str, Any]:
    return {"C": xp.matmul(a["A"], a["B"].T)}


def _kmeans(xp: Any, a: Mapping[str, Any], sizes: Mapping[str, int]) -> dict[str, Any]:
    # ||x||^2 does not change the argmin: the cheapest correct formulation a user writes.
    x, c = a["X"], a["C"]
    dist = (c * c).sum(axis=1)[None, :] - 2.0 * xp.matmul(x, c.T)
    return {"labels": xp.argmin(dist, axis=1).astype(xp.int32)}


def _softmax(xp: Any, a: Mapping[str, Any], sizes: Mapping[str, int]) -> dict[str, Any]:
    x = a["X"]
    e = xp.exp(x - x.max(axis=1, keepdims=True))
    return {"Y": e / e.sum(axis=1, keepdims=True)}


def _knn(xp: Any, a: Mapping[str, Any], sizes: Mapping[str, int]) -> dict[str, Any]:
    # as for k-means, ||x||^2 does not change the order of a row's distances
    x, c = a["X"], a["C"]
    dist = (c * c).sum(axis=1)[None, :] - 2.0 * xp.matmul(x, c.T)
    return {"idx": xp.argsort(dist, axis=1)[:, :sizes["T"]].astype(xp.int32)}


def scale_alpha(workload: Workload) -> float:
    """The workload's alpha, read through its reference (the contract) on a probe input."""
    probe = {"X": np.ones((1, 1), dtype=np.float32)}
    return float(np.asarray(workload.reference(probe, {"M": 1, "N": 1})["Y"]).reshape(-1)[0])


def baseline_for(workload: Workload) -> Baseline | None:
    """The baseline of a workload, or None when cakegov knows none for it."""
    f32 = np.float32
    if workload.name == "gemm":
        return Baseline("cupy.matmul", "cuBLAS SGEMM via cupy.matmul(A, B.T) on the "
                        "bf16-rounded inputs as f32 (CuPy has no bf16 arrays)", _gemm,
                        {"A": f32, "B": f32})
    if workload.name == "kmeans_assign":
        return Baseline("cupy.matmul+argmin", "cuBLAS SGEMM for X @ C.T, centroid norms, "
                        "argmin over centroids (cupy)", _kmeans, {"X": f32, "C": f32})
    if workload.name == "softmax":
        return Baseline("cupy softmax", "row max, exp, row sum and division in CuPy",
                        _softmax, {"X": f32})
    if workload.name == "knn":
        return Baseline("cupy.matmul+argsort", "cuBLAS SGEMM for X @ C.T, centroid norms, "
                        "argsort over centroids (cupy)", _knn, {"X": f32, "C": f32})
    if workload.name == "scale":
        alpha = scale_alpha(workload)

        def _scale(xp: Any, a: Mapping[str, Any], sizes: Mapping[str, int]) -> dict[str, Any]:
            return {"Y": a["X"] * xp.float32(alpha)}

        return Baseline("cupy alpha*x", f"elementwise alpha * X in CuPy (alpha={alpha})",
                        _scale, {"X": f32})
    return None
