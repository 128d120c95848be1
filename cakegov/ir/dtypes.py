"""Element types the schedule language knows, with their sizes."""

from __future__ import annotations

DTYPE_BYTES: dict[str, int] = {
    "f64": 8,
    "f32": 4,
    "tf32": 4,
    "f16": 2,
    "bf16": 2,
    "f8e4m3": 1,
    "f8e5m2": 1,
    "i32": 4,
    "u32": 4,
    "i8": 1,
    "u8": 1,
}

FLOAT_DTYPES = frozenset({"f64", "f32", "tf32", "f16", "bf16", "f8e4m3", "f8e5m2"})


def dtype_bytes(dtype: str) -> int:
    """Size of one element of `dtype` in bytes."""
    return DTYPE_BYTES[dtype]
