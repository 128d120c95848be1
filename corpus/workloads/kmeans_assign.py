"""k-means assignment: labels[n] = argmin_k ||X[n] - C[k]||^2 (first index on ties)."""

import numpy as np

NAME = "kmeans_assign"
SIZES = ("N", "K", "D")
TENSORS = {
    "X": ("f32", ("N", "D")),
    "C": ("f32", ("K", "D")),
    "labels": ("i32", ("N",)),
}
OUTPUTS = ("labels",)
SHAPES = (
    {"N": 4096, "K": 16, "D": 64},
    {"N": 1000, "K": 16, "D": 64},  # N not a multiple of the row tile
    {"N": 65536, "K": 64, "D": 64},
)
# Labels are exact; near-ties within this relative distance gap may legitimately differ.
TOLERANCE = {"i32": 0.0, "tie_gap": 1e-5}


def generate(sizes, rng):
    """Points scattered around random centroids so that assignments are well separated."""
    k, d, n = sizes["K"], sizes["D"], sizes["N"]
    centroids = rng.normal(0.0, 4.0, size=(k, d))
    owner = rng.integers(0, k, size=n)
    points = centroids[owner] + rng.normal(0.0, 1.0, size=(n, d))
    return {"X": points.astype(np.float32), "C": centroids.astype(np.float32)}


def reference(inputs, sizes):
    x = inputs["X"].astype(np.float64)
    c = inputs["C"].astype(np.float64)
    dist = (x * x).sum(1)[:, None] - 2.0 * x @ c.T + (c * c).sum(1)[None, :]
    return {"labels": np.argmin(dist, axis=1).astype(np.int32)}
