"""The two 8-bit float formats of the schedule language, emulated in numpy.

`f8e4m3` (E4M3: exponent bias 7, 3 mantissa bits, no infinities, largest finite 448, NaN
S.1111.111) and `f8e5m2` (E5M2: bias 15, 2 mantissa bits, IEEE-like, largest finite
57344). Conversion from f32 follows `cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32` (PTX ISA, cvt):
round to nearest, ties to even; a finite value beyond the largest finite one saturates
to it (also for infinities); NaN stays NaN. Every code decodes exactly to f32. The host
encoding (gpu/data.py) and the simulator (sim/memory.py) share these functions, so the
simulator rounds like the kernel's cvt."""

from __future__ import annotations

from functools import cache

import numpy as np

FORMATS = {"f8e4m3": (4, 3, 7), "f8e5m2": (5, 2, 15)}  # exponent bits, mantissa bits, bias
NAN_BITS = {"f8e4m3": 0x7F, "f8e5m2": 0x7F}


def _decode_code(code: int, dtype: str) -> float:
    e_bits, m_bits, bias = FORMATS[dtype]
    sign = -1.0 if code & 0x80 else 1.0
    e = (code >> m_bits) & ((1 << e_bits) - 1)
    m = code & ((1 << m_bits) - 1)
    top = (1 << e_bits) - 1
    if dtype == "f8e4m3" and e == top and m == (1 << m_bits) - 1:
        return float("nan")
    if dtype == "f8e5m2" and e == top:
        return sign * float("inf") if m == 0 else float("nan")
    if e == 0:
        return sign * m * 2.0 ** (1 - bias - m_bits)
    return sign * (1 + m / (1 << m_bits)) * 2.0 ** (e - bias)


@cache
def table(dtype: str) -> np.ndarray:
    """The f32 value of each of the 256 codes."""
    return np.array([_decode_code(c, dtype) for c in range(256)], dtype=np.float32)


@cache
def _positive(dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """Finite non-negative values in increasing order with their codes."""
    t = table(dtype)[:128]
    codes = np.flatnonzero(np.isfinite(t))
    order = np.argsort(t[codes], kind="stable")
    return t[codes][order].astype(np.float64), codes[order].astype(np.uint8)


def fp8_bits(values: np.ndarray, dtype: str) -> np.ndarray:
    """Round f32 values to `dtype` (nearest even, saturating) and return the codes."""
    x = np.asarray(values, dtype=np.float32).astype(np.float64)
    vals, codes = _positive(dtype)
    a = np.minimum(np.abs(np.nan_to_num(x, nan=0.0, posinf=np.inf, neginf=-np.inf)),
                   vals[-1])
    hi = np.clip(np.searchsorted(vals, a, side="left"), 0, len(vals) - 1)
    lo = np.clip(hi - 1, 0, len(vals) - 1)
    d_lo, d_hi = a - vals[lo], vals[hi] - a
    even_hi = (codes[hi] & 1) == 0
    pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & even_hi)
    out = np.where(pick_hi, codes[hi], codes[lo]).astype(np.uint8)
    out = np.where(np.signbit(x), out | np.uint8(0x80), out)  # -0 for a negative underflow
    return np.where(np.isnan(x), np.uint8(NAN_BITS[dtype]), out).astype(np.uint8)


def fp8_values(bits: np.ndarray, dtype: str) -> np.ndarray:
    """The exact f32 values of `dtype` codes."""
    return table(dtype)[np.asarray(bits, dtype=np.uint8)]


def fp8_round(values: np.ndarray, dtype: str) -> np.ndarray:
    """`values` rounded to `dtype`, as f32."""
    return fp8_values(fp8_bits(values, dtype), dtype)
