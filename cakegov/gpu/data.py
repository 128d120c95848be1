"""Host-side data for a GPU run: element encodings, fresh inputs, poisoned outputs, shapes.

Everything here is pure numpy, so the evaluation rules the runner enforces (fresh random
non-degenerate inputs, poisoned outputs, several shapes including tail tiles) are tested on
machines without a GPU."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from cakegov.corpus.workloads import Workload
from cakegov.ir.fp8 import FORMATS as FP8
from cakegov.ir.fp8 import NAN_BITS as FP8_NAN
from cakegov.ir.fp8 import fp8_bits, fp8_values

# How each schedule dtype travels to the kernel. bf16 has no numpy type: the kernel gets the
# 16-bit patterns (ABI: `const uint16_t*` reinterpreted as `__nv_bfloat16`).
DEVICE_DTYPES: dict[str, type[np.generic]] = {
    "f64": np.float64,
    "f32": np.float32,
    "f16": np.float16,
    "bf16": np.uint16,
    "f8e4m3": np.uint8,  # 8-bit codes (ABI: `const uint8_t*` as cg::f8e4m3 / f8e5m2)
    "f8e5m2": np.uint8,
    "i32": np.int32,
    "u32": np.uint32,
    "i8": np.int8,
    "u8": np.uint8,
}
FLOAT_ENCODINGS = frozenset({"f64", "f32", "f16", "bf16", "f8e4m3", "f8e5m2"})

# Poison written into every output before a correctness launch: NaN for floats, a value no
# integer output of the workloads can take for integers. An element the kernel never wrote
# keeps it and fails the comparison.
BF16_QUIET_NAN = 0x7FC0
INT_POISON = {"i32": 0x7FFFFFFF, "u32": 0xFFFFFFFF, "i8": 0x7F, "u8": 0xFF}


class DataError(Exception):
    """A workload's generator broke the evaluation contract, or a shape is unusable."""


def bf16_bits(values: np.ndarray) -> np.ndarray:
    """Round to the nearest bf16 (ties to even) and return the 16-bit patterns.

    Mirrors `_bf16_round` of corpus/workloads/gemm.py; NaN stays a quiet NaN."""
    f32 = np.ascontiguousarray(values, dtype=np.float32)
    bits = f32.view(np.uint32).astype(np.uint64)
    rounding = ((bits >> 16) & 1) + 0x7FFF
    rounded = ((bits + rounding) >> 16).astype(np.uint16)
    return np.where(np.isnan(f32), np.uint16(BF16_QUIET_NAN), rounded).astype(np.uint16)


def bf16_values(bits: np.ndarray) -> np.ndarray:
    """The float32 values of bf16 bit patterns (exact)."""
    wide = np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16
    return wide.view(np.float32)


def encode(dtype: str, values: np.ndarray) -> np.ndarray:
    """`values` in the representation the kernel reads (C-contiguous)."""
    if dtype not in DEVICE_DTYPES:
        raise DataError(f"dtype {dtype} has no device encoding")
    if dtype == "bf16":
        return bf16_bits(values)
    if dtype in FP8:
        return fp8_bits(values, dtype)
    return np.ascontiguousarray(values, dtype=DEVICE_DTYPES[dtype])


def decode(dtype: str, raw: np.ndarray) -> np.ndarray:
    """The numeric values of a device array (bf16 patterns become float32)."""
    if dtype == "bf16":
        return bf16_values(raw)
    if dtype in FP8:
        return fp8_values(raw, dtype)
    return np.asarray(raw)


def poisoned(dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """An output buffer filled with the poison of `dtype`."""
    if dtype == "bf16":
        return np.full(shape, BF16_QUIET_NAN, dtype=np.uint16)
    if dtype in FP8:
        return np.full(shape, FP8_NAN[dtype], dtype=np.uint8)
    if dtype in FLOAT_ENCODINGS:
        return np.full(shape, np.nan, dtype=DEVICE_DTYPES[dtype])
    if dtype in INT_POISON:
        return np.full(shape, INT_POISON[dtype], dtype=DEVICE_DTYPES[dtype])
    raise DataError(f"dtype {dtype} has no poison value")


def input_names(workload: Workload) -> list[str]:
    return [name for name in workload.tensors if name not in workload.outputs]


def tensor_shape(workload: Workload, name: str, sizes: Mapping[str, int]) -> tuple[int, ...]:
    return tuple(int(sizes[d]) for d in workload.tensors[name][1])


def draw_seed() -> int:
    """A fresh 63-bit seed from the operating system (recorded, so a run can be replayed)."""
    return secrets.randbits(63)


def shape_seed(run_seed: int, index: int, sizes: Mapping[str, int]) -> int:
    """The seed of one shape of a run: distinct per shape, reproducible from the run seed."""
    key = f"{run_seed}:{index}:" + ",".join(f"{k}={sizes[k]}" for k in sorted(sizes))
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") >> 1


@dataclass(frozen=True)
class Inputs:
    """One shape's inputs: `device` in the kernel's encoding, `values` the exact numbers the
    kernel sees (the reference and the baseline are computed from these, so rounding to the
    device encoding can never separate the two)."""

    sizes: dict[str, int]
    seed: int
    device: dict[str, np.ndarray]
    values: dict[str, np.ndarray]


def check_non_degenerate(name: str, values: np.ndarray) -> None:
    """Refuse inputs that let a wrong kernel pass: non-finite, constant, or mostly zeros."""
    if values.size == 0:
        raise DataError(f"input {name} is empty")
    v = np.asarray(values, dtype=np.float64)
    if not np.isfinite(v).all():
        raise DataError(f"input {name} holds non-finite values")
    if values.size > 1 and v.min() == v.max():
        raise DataError(f"input {name} is constant ({v.flat[0]!r})")
    zeros = float(np.count_nonzero(v == 0)) / v.size
    if zeros > 0.01:
        raise DataError(f"input {name} is {zeros:.1%} exact zeros (at most 1% allowed)")


# Elements of all of a workload's tensors at one shape that this process will generate
# (the generators draw float64 first: 2^28 of them are 2 GiB). A larger shape, e.g. one a
# schedule pins to test a launch limit, is refused as data, never attempted.
GENERATE_CAP = 1 << 28


def make_inputs(workload: Workload, sizes: Mapping[str, int], seed: int) -> Inputs:
    """Draw fresh inputs from the workload's generator and encode them for the device."""
    total = 0
    for name in workload.tensors:
        count = 1
        for extent in tensor_shape(workload, name, sizes):
            count *= max(int(extent), 0)
        total += count
    if total > GENERATE_CAP:
        raise DataError(f"the tensors of {workload.name} at {dict(sizes)} hold {total:,} "
                        f"elements, over the {GENERATE_CAP:,} generated here")
    rng = np.random.default_rng(seed)
    drawn = workload.generate(dict(sizes), rng)
    device: dict[str, np.ndarray] = {}
    values: dict[str, np.ndarray] = {}
    for name in input_names(workload):
        if name not in drawn:
            raise DataError(f"{workload.name}.generate did not produce input {name}")
        dtype = workload.tensors[name][0]
        want = tensor_shape(workload, name, sizes)
        arr = np.asarray(drawn[name])
        if arr.shape != want:
            raise DataError(f"{workload.name}.generate: {name} has shape {arr.shape}, "
                            f"expected {want}")
        check_non_degenerate(name, arr)
        device[name] = encode(dtype, arr)
        values[name] = decode(dtype, device[name])
    return Inputs(sizes=dict(sizes), seed=seed, device=device, values=values)


def make_outputs(workload: Workload, sizes: Mapping[str, int]) -> dict[str, np.ndarray]:
    """Freshly poisoned output buffers."""
    return {name: poisoned(workload.tensors[name][0], tensor_shape(workload, name, sizes))
            for name in workload.outputs}


def parse_shape(text: str, sizes: Sequence[str] | None = None) -> dict[str, int]:
    """`M=1000,N=520,K=320` -> {"M": 1000, ...}; with `sizes`, every name must be one."""
    out: dict[str, int] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep or not name.isidentifier() or (sizes is not None and name not in sizes):
            expected = f" with NAME one of {', '.join(sizes)}" if sizes is not None else ""
            raise DataError(f"bad shape item {part!r}: expected NAME=INT{expected}")
        try:
            number = int(value.strip())
        except ValueError:
            raise DataError(f"bad shape item {part!r}: {value.strip()!r} is not an "
                            "integer") from None
        if number <= 0:
            raise DataError(f"bad shape item {part!r}: sizes must be positive")
        out[name] = number
    if not out:
        raise DataError(f"empty shape {text!r}: expected NAME=INT,NAME=INT,...")
    return out


def select_shapes(workload: Workload, fixed: Mapping[str, int], divisible: Mapping[str, int],
                  requested: Sequence[Mapping[str, int]] = ()) -> list[dict[str, int]]:
    """The shapes to run: the workload's check shapes as the schedule accepts them, or the
    requested ones completed with the schedule's fixed sizes and validated against them."""
    for sizes, what in ((fixed, "fixed size"), (divisible, "divisibility"),
                        *((r, "size") for r in requested)):
        for name, value in sizes.items():
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise DataError(f"{name}={value!r}: a {what} must be a positive integer "
                                "(a zero size is a multiple of every tile)")
    if not requested:
        return workload.shapes_for(fixed, divisible)
    shapes: list[dict[str, int]] = []
    for req in requested:
        unknown = [n for n in req if n not in workload.sizes]
        if unknown:
            raise DataError(f"workload {workload.name} has no size {', '.join(unknown)}; its "
                            f"sizes are {', '.join(workload.sizes)}")
        shape = dict(req)
        for name, value in fixed.items():
            if name in shape and shape[name] != value:
                raise DataError(f"the schedule fixes {name}={value}; shape asks {name}="
                                f"{shape[name]}")
            shape[name] = value
        missing = [s for s in workload.sizes if s not in shape]
        if missing:
            raise DataError(f"shape {_fmt(shape)} lacks {', '.join(missing)}")
        for name, mult in divisible.items():
            if name in shape and shape[name] % mult:
                raise DataError(f"the schedule requires {name} to be a multiple of {mult}; "
                                f"shape asks {name}={shape[name]}")
        if shape not in shapes:
            shapes.append(shape)
    return shapes


def headline_shapes(workload: Workload, fixed: Mapping[str, int],
                    divisible: Mapping[str, int]) -> tuple[list[dict[str, int]], list[str]]:
    """The workload's headline shapes the schedule accepts, and why each other one is not
    run (a fixed size that differs, a size the schedule's divisibility excludes)."""
    accepted: list[dict[str, int]] = []
    refused: list[str] = []
    for shape in workload.headline:
        clash = [f"{n}={fixed[n]}" for n in fixed if shape.get(n) != fixed[n]]
        bad = [f"{n} % {m}" for n, m in divisible.items() if shape.get(n, 0) % m]
        if clash or bad:
            why = (f"the schedule fixes {', '.join(clash)}" if clash else
                   f"the schedule requires {', '.join(bad)} == 0")
            refused.append(f"headline shape {_fmt(shape)} not run: {why}")
        elif shape not in accepted:
            accepted.append(dict(shape))
    return accepted, refused


def _fmt(shape: Mapping[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in shape.items())


def format_shape(shape: Mapping[str, int]) -> str:
    """`M=256,N=256,K=256` (the spelling `--shape` accepts)."""
    return _fmt(shape)


def nbytes(arrays: Mapping[str, np.ndarray]) -> int:
    return int(sum(a.nbytes for a in arrays.values()))
