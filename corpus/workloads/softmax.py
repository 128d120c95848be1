"""Row softmax: Y[m, n] = exp(X[m, n] - max_j X[m, j]) / sum_j exp(X[m, j] - max_j X[m, j])."""

import numpy as np

NAME = "softmax"
SIZES = ("M", "N")
TENSORS = {"X": ("f32", ("M", "N")), "Y": ("f32", ("M", "N"))}
OUTPUTS = ("Y",)
SHAPES = (
    {"M": 256, "N": 128},
    {"M": 1000, "N": 128},  # M not a multiple of any row tile
    {"M": 4096, "N": 1024},
)
# Relative to max |Y|. A kernel computes in f32: exp within a few ulps, a left-to-right
# sum of N terms within N * u of the exact sum (u = 2^-24; N = 1024 gives 6.1e-5), one
# rounded division. 1e-4 covers that bound with margin and is far below the error of a
# wrong row (a row softmax sums to 1, so a misplaced or unnormalised row is off by O(1/N)
# or more) or of a missing max subtraction (the generator's row offsets overflow exp).
TOLERANCE = {"f32": 1e-4}


def generate(sizes, rng):
    """Rows with distinct logits around a per-row offset in [-100, 100]: the offsets make
    exp overflow f32 without the max subtraction, the spread (sigma 3) makes every row's
    distribution far from uniform and from one-hot."""
    m, n = sizes["M"], sizes["N"]
    offset = rng.uniform(-100.0, 100.0, size=(m, 1))
    return {"X": (offset + rng.normal(0.0, 3.0, size=(m, n))).astype(np.float32)}


def reference(inputs, sizes):
    x = inputs["X"].astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return {"Y": e / e.sum(axis=1, keepdims=True)}
