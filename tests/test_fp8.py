"""fp8 (E4M3, E5M2): the numpy emulation of `cvt.rn.satfinite` (cakegov/ir/fp8.py) that the
host encoding and the simulator share, the block-scaled `gemm_fp8` workload and the
`scale_accumulate` primitive. The lowering of fp8 operands compiles with NVRTC through
the valid corpus (tests/test_compile.py: corpus/valid/gemm/deepgemm_fp8_s2.cake)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from cakegov.gpu.data import decode as host_decode
from cakegov.gpu.data import encode as host_encode
from cakegov.gpu.data import poisoned
from cakegov.ir.fp8 import fp8_bits, fp8_round, table
from cakegov.sim.memory import decode, encode, round_to


def test_formats():
    e4, e5 = table("f8e4m3"), table("f8e5m2")
    assert np.nanmax(e4) == 448 and np.nanmin(e4) == -448 and not np.isinf(e4).any()
    assert np.nanmax(e5[np.isfinite(e5)]) == 57344 and np.isinf(e5).sum() == 2
    assert e4[1] == 2.0 ** -9 and e5[1] == 2.0 ** -16  # smallest subnormals
    assert np.isnan(e4).sum() == 2 and np.isnan(e5).sum() == 6


@pytest.mark.parametrize("dtype, x, want", [
    ("f8e4m3", 1.0625, 1.0),     # tie between 1 and 1.125: even mantissa
    ("f8e4m3", 1.1875, 1.25),    # tie between 1.125 and 1.25: even mantissa
    ("f8e4m3", 17.0, 16.0), ("f8e4m3", 19.0, 20.0),
    ("f8e4m3", 1000.0, 448.0), ("f8e4m3", -np.inf, -448.0),   # satfinite
    ("f8e4m3", 2.0 ** -10, 0.0), ("f8e4m3", 3 * 2.0 ** -10, 2.0 ** -8),
    ("f8e5m2", 1.125, 1.0), ("f8e5m2", 500.0, 512.0), ("f8e5m2", 1e6, 57344.0),
])
def test_rounding(dtype, x, want):
    assert fp8_round(np.array([x], np.float32), dtype)[0] == np.float32(want)


@pytest.mark.parametrize("dtype", ["f8e4m3", "f8e5m2"])
def test_codes_round_trip_and_nan(dtype):
    t = table(dtype)
    codes = np.arange(256, dtype=np.uint8)
    finite = np.isfinite(t)
    assert (fp8_bits(t[finite], dtype) == codes[finite]).all()
    assert np.isnan(fp8_round(np.array([np.nan], np.float32), dtype)).all()
    assert np.signbit(fp8_round(np.array([-1e-9], np.float32), dtype))[0]  # -0


@pytest.mark.parametrize("dtype", ["f8e4m3", "f8e5m2"])
def test_simulator_and_host_encodings_agree(dtype):
    x = np.random.default_rng(0).normal(0, 50, size=64).astype(np.float32)
    raw = encode(dtype, x)
    assert raw.dtype == np.uint8 and raw.size == 64
    assert np.array_equal(decode(dtype, raw), round_to(dtype, x))
    assert np.array_equal(host_encode(dtype, x), raw)
    assert np.array_equal(host_decode(dtype, raw), fp8_round(x, dtype))
    assert np.isnan(host_decode(dtype, poisoned(dtype, (4,)))).all()


def test_gemm_fp8_workload(workloads):
    wl = workloads["gemm_fp8"]
    sizes = {"M": 40, "N": 200, "K": 256, "KB": 2, "NB": 2}
    inputs = wl.generate(sizes, np.random.default_rng(3))
    assert np.array_equal(fp8_round(inputs["A"], "f8e4m3"), inputs["A"])
    assert inputs["SA"].shape == (2, 40) and inputs["SB"].shape == (2, 2)
    assert len(np.unique(inputs["SA"])) > 40  # scales differ by row and block
    # dequantised operands multiply to the reference
    a = inputs["A"].astype(np.float64) * np.repeat(inputs["SA"].T, 128, axis=1)
    sb = np.repeat(np.repeat(inputs["SB"], 128, axis=0), 128, axis=1)[:200]
    b = inputs["B"].astype(np.float64) * sb
    assert np.allclose(wl.reference(inputs, sizes)["C"], a @ b.T)


def test_scale_accumulate(rulebook):
    prim = rulebook.primitives["scale_accumulate"]
    acc = np.ones((2, 3), np.float32)
    src = np.arange(6, dtype=np.float32).reshape(2, 3)
    tiles = {"acc": acc, "src": src, "row_scale": np.array([[2.0, 3.0]], np.float32),
             "scale": np.array([[0.5, 4.0]], np.float32)}
    out: dict[str, np.ndarray] = {}
    sim = SimpleNamespace(tile=tiles.__getitem__, value=lambda n: 1, put=out.__setitem__)
    prim.simulate(None, sim)
    assert np.array_equal(out["acc"], acc + src * np.array([[8.0], [12.0]], np.float32))
