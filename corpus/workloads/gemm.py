"""GEMM: C[M, N] = A[M, K] @ B[N, K]^T with bf16 inputs and f32 accumulation."""

import numpy as np

NAME = "gemm"
SIZES = ("M", "N", "K")
TENSORS = {
    "A": ("bf16", ("M", "K")),
    "B": ("bf16", ("N", "K")),
    "C": ("f32", ("M", "N")),
}
OUTPUTS = ("C",)
SHAPES = (
    {"M": 256, "N": 256, "K": 256},
    {"M": 1000, "N": 520, "K": 320},  # M and N are not tile multiples
    {"M": 4096, "N": 4096, "K": 4096},
)
HEADLINE = ({"M": 4096, "N": 4096, "K": 4096},)  # performance is reported here
# Relative to max |C|; only for comparisons without the inputs. The GPU runner holds C to
# the per-element bound derived from K and f32 accumulation (cakegov/gpu/tolerance.py,
# docs/gpu.md "Tolerances"), far tighter than this.
TOLERANCE = {"f32": 2e-2}


def _bf16_round(x):
    """Round float32 values to the nearest bf16 (round to nearest even), kept as f32."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32)
    rounding = ((bits >> 16) & 1) + 0x7FFF
    return ((bits + rounding) & 0xFFFF0000).astype(np.uint32).view(np.float32)


def generate(sizes, rng):
    """Random bf16-representable inputs with magnitudes in [0.5, 1] and random signs: every
    product has magnitude >= 0.25, above the derived error bound at K = 4096 (0.125), so a
    missing or wrong product cannot hide in the accumulation error."""
    def draw(rows, cols):
        x = rng.uniform(0.5, 1.0, size=(rows, cols)) * rng.choice([-1.0, 1.0], (rows, cols))
        return _bf16_round(x.astype(np.float32))

    return {"A": draw(sizes["M"], sizes["K"]), "B": draw(sizes["N"], sizes["K"])}


def reference(inputs, sizes):
    a = inputs["A"].astype(np.float64)
    b = inputs["B"].astype(np.float64)
    return {"C": a @ b.T}
