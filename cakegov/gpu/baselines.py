"""The baseline a user would pick instead of a generated kernel, per workload.

Each baseline is written against an array module `xp` (CuPy on the device, numpy in tests),
takes the exact input values the kernel received, in the kernel's own encoding where that
matters (bf16 GEMM inputs as their 16-bit patterns), and is timed in the same run, with the
same buffer rotation, as the kernel. Its outputs are compared with the reference too, so a
broken baseline cannot make a kernel look fast.

GEMM: cuBLAS `cublasGemmEx` with bf16 A and B, f32 C and CUBLAS_COMPUTE_32F (the
tensor-core path cuBLAS picks for bf16 on sm_90; cuBLAS documentation, "cublasGemmEx"),
called through CuPy's bindings (`cupy_backends.cuda.libs.cublas.gemmEx`; CuPy has no
bf16 array type, so the pointers of the uint16 pattern arrays are passed with the type
CUDA_R_16BF). The earlier baseline, `cupy.matmul` in f32, was an SGEMM without tensor
cores: a slow bf16 kernel could look faster than "cuBLAS". On numpy (tests) the same
contract is computed as an f32 matmul of the exact values.

k-means assignment: the formulation a library user writes, on cuBLAS: `-2 X C^T + |c|^2`
by one SGEMM (`cupy.matmul`, f32) plus a broadcast add, then `argmin` over centroids
(cupy's reduction); `|x|^2` does not change the argmin and is skipped."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cakegov.corpus.workloads import Workload
from cakegov.gpu.data import bf16_values, encode

ArrayFn = Callable[[Any, Mapping[str, Any], Mapping[str, int]], dict[str, Any]]


@dataclass(frozen=True)
class Baseline:
    """A library implementation of a workload."""

    name: str
    description: str
    fn: ArrayFn
    dtypes: Mapping[str, Any]  # input name -> numpy dtype the baseline reads
    encodings: Mapping[str, str] = field(default_factory=dict)  # input -> device encoding
    flops: Callable[[Mapping[str, int]], float] | None = None  # useful work of one call

    def prepare(self, values: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Host arrays in the baseline's input types: a schedule dtype in `encodings`
        (e.g. bf16 bit patterns), else the numpy dtype (exact for bf16 -> f32)."""
        out = {}
        for n in self.dtypes:
            if n in self.encodings:
                out[n] = encode(self.encodings[n], values[n])
            else:
                out[n] = np.ascontiguousarray(values[n], dtype=self.dtypes[n])
        return out


# cuBLAS / CUDA enumerators (cublas_api.h, library_types.h)
CUBLAS_OP_N, CUBLAS_OP_T = 0, 1
CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF = 0, 2, 14
CUBLAS_COMPUTE_32F = 68
CUBLAS_GEMM_DEFAULT = -1
CUBLAS_POINTER_MODE_HOST = 0


def gemm_flops(sizes: Mapping[str, int]) -> float:
    return 2.0 * sizes["M"] * sizes["N"] * sizes["K"]


def _gemm_bf16(xp: Any, a: Mapping[str, Any], sizes: Mapping[str, int]) -> dict[str, Any]:
    """C[M, N] = A[M, K] B[N, K]^T, A and B bf16 patterns (uint16), C f32."""
    m, n, k = int(sizes["M"]), int(sizes["N"]), int(sizes["K"])
    if not hasattr(xp, "cuda") or not hasattr(xp.cuda, "device"):  # numpy: same contract
        af = bf16_values(np.asarray(a["A"]))
        bf = bf16_values(np.asarray(a["B"]))
        return {"C": xp.matmul(af, bf.T)}
    from cupy_backends.cuda.libs import cublas

    c = xp.empty((m, n), dtype=xp.float32)
    alpha = np.ones(1, dtype=np.float32)
    beta = np.zeros(1, dtype=np.float32)
    handle = xp.cuda.device.get_cublas_handle()
    cublas.setStream(handle, xp.cuda.get_current_stream().ptr)
    # Row-major C = A B^T is column-major C^T (N x M) = op_T(B^T) A^T: B's buffer read as
    # a K x N column-major matrix and transposed, A's as K x M untransposed.
    mode = cublas.getPointerMode(handle)
    cublas.setPointerMode(handle, CUBLAS_POINTER_MODE_HOST)  # alpha, beta: host scalars
    try:
        cublas.gemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, alpha.ctypes.data,
                      a["B"].data.ptr, CUDA_R_16BF, k, a["A"].data.ptr, CUDA_R_16BF, k,
                      beta.ctypes.data, c.data.ptr, CUDA_R_32F, n, CUBLAS_COMPUTE_32F,
                      CUBLAS_GEMM_DEFAULT)
    finally:
        cublas.setPointerMode(handle, mode)
    return {"C": c}


def _kmeans(xp: Any, a: Mapping[str, Any], sizes: Mapping[str, int]) -> dict[str, Any]:
    # ||x||^2 does not change the argmin: the cheapest correct formulation a user writes.
    x, c = a["X"], a["C"]
    dist = (c * c).sum(axis=1)[None, :] - 2.0 * xp.matmul(x, c.T)
    return {"labels": xp.argmin(dist, axis=1).astype(xp.int32)}


def kmeans_flops(sizes: Mapping[str, int]) -> float:
    return 2.0 * sizes["N"] * sizes["K"] * sizes["D"]


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
        return Baseline("cublasGemmEx bf16", "cuBLAS cublasGemmEx, bf16 A and B, f32 C, "
                        "CUBLAS_COMPUTE_32F (tensor cores), via cupy_backends", _gemm_bf16,
                        {"A": np.uint16, "B": np.uint16}, {"A": "bf16", "B": "bf16"},
                        gemm_flops)
    if workload.name == "kmeans_assign":
        return Baseline("cupy.matmul+argmin", "cuBLAS SGEMM for X @ C.T, centroid norms, "
                        "argmin over centroids (cupy)", _kmeans, {"X": f32, "C": f32},
                        flops=kmeans_flops)
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
