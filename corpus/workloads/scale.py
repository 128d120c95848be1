"""Elementwise scale: Y = alpha * X over a 2-D f32 array (alpha is a schedule constant)."""

import numpy as np

NAME = "scale"
SIZES = ("M", "N")
TENSORS = {"X": ("f32", ("M", "N")), "Y": ("f32", ("M", "N"))}
OUTPUTS = ("Y",)
SHAPES = (
    {"M": 256, "N": 256},
    {"M": 1000, "N": 333},  # not a multiple of any tile
    {"M": 4096, "N": 4096},
)
TOLERANCE = {"f32": 1e-6, "f16": 1e-3, "bf16": 1e-2}
ALPHA = 2.5


def generate(sizes, rng):
    """Fresh random inputs, never zeros: uniform in [-2, -0.5] U [0.5, 2]."""
    mag = rng.uniform(0.5, 2.0, size=(sizes["M"], sizes["N"]))
    sign = rng.choice([-1.0, 1.0], size=mag.shape)
    return {"X": (mag * sign).astype(np.float32)}


def reference(inputs, sizes, alpha=ALPHA):
    return {"Y": inputs["X"].astype(np.float64) * alpha}
