"""Host side of the tensor-map copies: the `CUtensorMap` kernel parameters, encoded with
the CUDA driver's `cuTensorMapEncodeTiled` through `cuda-bindings`.

A lowered kernel lists its tensor maps (`LoweredKernel.tensor_maps`: tensor, 2-D view,
box, swizzle; cakegov/lower/tma.py); `specs` evaluates them at one shape, `encode` turns
one into the 128 opaque bytes the kernel takes by value (`const __grid_constant__
cg::TensorMap`), for one device address. Every documented requirement of
`cuTensorMapEncodeTiled` is checked here first (`problems`), so a tensor map the driver
would refuse is a clear `TensorMapError` naming the tensor, the shape and the rule, never a
launch with garbage and never a hang; the driver's own refusal is reported the same way.

Encoding: rank 2, innermost dimension first (`globalDim = {cols, rows}`, `globalStrides =
{cols * element bytes}`, `boxDim = {box_cols, box_rows}`), element strides 1, no
interleave, the swizzle of the buffers the map serves, L2 promotion 256 B, out-of-bounds
fill NONE (zeros: CUDA driver API, CUtensorMapFloatOOBfill), so a tail tile arrives
zero-padded and still completes its full bytes (docs/lowering.md, "Tail tiles")."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from cakegov.ir.dtypes import dtype_bytes
from cakegov.ir.expr import Env, EvalError, evaluate
from cakegov.lower.kernel import LoweredKernel
from cakegov.lower.swizzle import MODES
from cakegov.lower.tma import BOX_MAX, TENSOR_MAP_DTYPES

TENSOR_MAP_BYTES = 128  # sizeof(CUtensorMap): 16 x cuuint64_t, 64-byte aligned
# One CUtensorMap as a one-element numpy array of a 128-byte structured type: CuPy passes
# a numpy.ndarray of size one by value as a kernel argument (cupy/cuda/function.pyx,
# `CNumpyArray`: a pointer to its bytes in the launch's parameter list; the driver copies
# them to the parameter's offset).
TENSOR_MAP_DTYPE = np.dtype([("opaque", np.uint64, (TENSOR_MAP_BYTES // 8,))])
L2_PROMOTION_256B = 3  # CU_TENSOR_MAP_L2_PROMOTION_L2_256B
MAX_DIM = 1 << 32  # globalDim[i] <= 2^32
MAX_STRIDE = 1 << 40  # globalStrides[i] < 2^40


class TensorMapError(Exception):
    """A tensor map cannot be encoded (the message names the tensor, shape and rule)."""


@dataclass(frozen=True)
class TensorMapSpec:
    """One tensor map at one shape: everything `cuTensorMapEncodeTiled` needs but the
    device address."""

    name: str  # the kernel parameter
    tensor: str
    dtype: str
    rows: int
    cols: int
    box_rows: int
    box_cols: int
    swizzle: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def specs(kernel: LoweredKernel, sizes: Mapping[str, int]) -> tuple[TensorMapSpec, ...]:
    """The kernel's tensor maps at `sizes` (sizes the schedule fixes win)."""
    env = Env(sizes={**sizes, **kernel.sizes})
    out = []
    for t in kernel.tensor_maps:
        try:
            rows, cols = evaluate(t.rows, env), evaluate(t.cols, env)
        except EvalError as exc:
            raise TensorMapError(f"tensor map {t.name} ({t.tensor}): its extent cannot be "
                                 f"evaluated: {exc}") from None
        out.append(TensorMapSpec(t.name, t.tensor, t.dtype, int(rows), int(cols),
                                 t.box_rows, t.box_cols, t.swizzle))
    return tuple(out)


def problems(spec: TensorMapSpec, address: int) -> list[str]:
    """Every requirement of `cuTensorMapEncodeTiled` (CUDA driver API, "Tensor Map Object
    Management") that `spec` at `address` breaks."""
    out = []
    if spec.dtype not in TENSOR_MAP_DTYPES:
        return [f"{spec.dtype} has no CUtensorMapDataType"]
    if spec.swizzle not in MODES:
        return [f"unknown swizzle {spec.swizzle!r}"]
    elem = dtype_bytes(spec.dtype)
    if address % 16:
        out.append(f"globalAddress {address:#x} is not 16-byte aligned")
    for what, n in (("rows", spec.rows), ("cols", spec.cols)):
        if not 0 < n <= MAX_DIM:
            out.append(f"globalDim ({what}) {n} is not in 1..2^32")
    stride = spec.cols * elem
    if stride % 16 or stride >= MAX_STRIDE:
        out.append(f"globalStrides[0] (the row pitch) {stride} bytes is not a multiple of "
                   "16 below 2^40")
    for what, n in (("rows", spec.box_rows), ("cols", spec.box_cols)):
        if not 0 < n <= BOX_MAX:
            out.append(f"boxDim ({what}) {n} is not in 1..{BOX_MAX}")
    inner = spec.box_cols * elem
    if inner % 16:
        out.append(f"the box's inner extent {inner} bytes is not a multiple of 16")
    width = MODES[spec.swizzle].width
    if spec.swizzle != "none" and inner > width:
        out.append(f"the box's inner extent {inner} bytes exceeds the {spec.swizzle} "
                   f"swizzle ({width} bytes)")
    return out


def _driver() -> Any:
    try:
        from cuda.bindings import driver
    except ImportError:
        try:  # cuda-python before the cuda.bindings namespace (12.5 and older)
            from cuda import cuda as driver  # type: ignore[no-redef]
        except ImportError:
            raise TensorMapError("tensor maps need the CUDA driver API through cuda-bindings "
                                 "(pip install cuda-bindings)") from None
    return driver


def encode(spec: TensorMapSpec, address: int, driver: Any = None) -> np.ndarray:
    """The 128 bytes of `spec` over the tensor at device address `address`, as a
    one-element array of TENSOR_MAP_DTYPE (a kernel argument passed by value). Raises
    TensorMapError."""
    where = f"tensor map {spec.name} ({spec.tensor} {spec.dtype}[{spec.rows}, {spec.cols}], " \
            f"box {spec.box_rows} x {spec.box_cols}, swizzle {spec.swizzle})"
    bad = problems(spec, address)
    if bad:
        raise TensorMapError(f"{where}: " + "; ".join(bad))
    drv = driver if driver is not None else _driver()
    elem = dtype_bytes(spec.dtype)
    try:
        drv.cuInit(0)
        err, tmap = drv.cuTensorMapEncodeTiled(
            drv.CUtensorMapDataType(TENSOR_MAP_DTYPES[spec.dtype]), 2, address,
            [drv.cuuint64_t(spec.cols), drv.cuuint64_t(spec.rows)],
            [drv.cuuint64_t(spec.cols * elem)],
            [drv.cuuint32_t(spec.box_cols), drv.cuuint32_t(spec.box_rows)],
            [drv.cuuint32_t(1), drv.cuuint32_t(1)],
            drv.CUtensorMapInterleave(0),
            drv.CUtensorMapSwizzle(MODES[spec.swizzle].tensor_map_code),
            drv.CUtensorMapL2promotion(L2_PROMOTION_256B),
            drv.CUtensorMapFloatOOBfill(0))
    except TensorMapError:
        raise
    except Exception as exc:  # the driver library missing, a binding mismatch
        raise TensorMapError(f"{where}: cuTensorMapEncodeTiled could not be called: "
                             f"{type(exc).__name__}: {exc}") from None
    if int(err) != 0:
        raise TensorMapError(f"{where}: cuTensorMapEncodeTiled failed with {err!r}")
    words = np.array([int(w) for w in tmap.opaque], dtype=np.uint64)
    if words.size * 8 != TENSOR_MAP_BYTES:
        raise TensorMapError(f"{where}: the driver returned {words.size * 8} bytes, not "
                             f"{TENSOR_MAP_BYTES}")
    return words.view(TENSOR_MAP_DTYPE)
