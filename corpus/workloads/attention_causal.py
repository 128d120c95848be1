"""Causal attention forward (one head): O = softmax(mask(Q @ K^T / sqrt(D))) @ V, with bf16
Q, K, V and an f32 output; query i attends to keys 0 .. i (top-left aligned: key j is
masked when j > i, so every query keeps at least key 0).

The non-causal variant is the workload `attention` (attention.py): the same tensors and
generator, tolerance and reasoning; this file repeats them because a workload file is one
self-contained module of the evaluation contract."""

import numpy as np

NAME = "attention_causal"
SIZES = ("M", "N", "D")
TENSORS = {
    "Q": ("bf16", ("M", "D")),
    "K": ("bf16", ("N", "D")),
    "V": ("bf16", ("N", "D")),
    "O": ("f32", ("M", "D")),
}
OUTPUTS = ("O",)
SHAPES = (
    {"M": 256, "N": 256, "D": 64},
    {"M": 200, "N": 328, "D": 64},  # neither M nor N a multiple of a 64-row tile
    {"M": 1024, "N": 1024, "D": 128},
)
# Relative to max |O|. A kernel rounds the probabilities P to bf16 before P @ V (relative
# error <= 2^-9 per element, so |dO| <= 2^-9 * max|V| per row) and otherwise computes in
# f32 (exp, running max and sum, the rescaling, the final division: ~1e-6). The generator
# keeps max|O| above a third of max|V| (peaked rows, V with a common offset), so the bound
# relative to max|O| is 3 * 2^-9 = 5.9e-3; 1e-2 adds margin for the bf16 rounding of the
# rescaled partial sums. A wrong row normalisation or a skipped key tile is off by far more.
TOLERANCE = {"f32": 1e-2}


def _bf16_round(x):
    """Round float32 values to the nearest bf16 (round to nearest even), kept as f32."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32)
    rounding = ((bits >> 16) & 1) + 0x7FFF
    return ((bits + rounding) & 0xFFFF0000).astype(np.uint32).view(np.float32)


def generate(sizes, rng):
    """Q and K with unit-variance entries scaled so that scores / sqrt(D) spread over a
    few units (each row's softmax is peaked but not one-hot); V with a positive offset
    per column, so outputs are far from zero and differ from row to row."""
    m, n, d = sizes["M"], sizes["N"], sizes["D"]
    q = rng.normal(0.0, 1.5, size=(m, d))
    k = rng.normal(0.0, 1.5, size=(n, d))
    v = rng.uniform(-1.0, 1.0, size=(n, d)) + rng.uniform(0.5, 1.0, size=(1, d))
    return {"Q": _bf16_round(q.astype(np.float32)), "K": _bf16_round(k.astype(np.float32)),
            "V": _bf16_round(v.astype(np.float32))}


def attend(inputs, causal):
    """The float64 reference; `causal` masks key j for query i when j > i."""
    q = inputs["Q"].astype(np.float64)
    k = inputs["K"].astype(np.float64)
    v = inputs["V"].astype(np.float64)
    s = q @ k.T / np.sqrt(q.shape[1])
    if causal:
        s = np.where(np.arange(k.shape[0])[None, :] > np.arange(q.shape[0])[:, None],
                     -np.inf, s)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)) @ v


def reference(inputs, sizes):
    return {"O": attend(inputs, causal=True)}
