"""k nearest centroids: idx[n, j] is the index of the j-th nearest centroid C[k] to X[n]
(squared Euclidean distance), j = 0 .. T-1.

Ties are defined: neighbours are ordered by (distance, centroid index), so of two centroids
at the same distance the lower index comes first (a stable sort of the distances)."""

import numpy as np

NAME = "knn"
SIZES = ("N", "K", "D", "T")
TENSORS = {
    "X": ("f32", ("N", "D")),
    "C": ("f32", ("K", "D")),
    "idx": ("i32", ("N", "T")),
}
OUTPUTS = ("idx",)
SHAPES = (
    {"N": 4096, "K": 16, "D": 64, "T": 4},
    {"N": 1000, "K": 16, "D": 64, "T": 4},  # N not a multiple of the row tile
    {"N": 65536, "K": 64, "D": 64, "T": 8},
)
# Indices are exact; a neighbour whose distance is within this relative gap of the
# reference's neighbour at the same rank is a near-tie that f32 arithmetic may order
# differently from the float64 reference (gpu/compare.py, compare_labels).
TOLERANCE = {"i32": 0.0, "tie_gap": 1e-5}


def generate(sizes, rng):
    """Points near random centroids, with the centroids spread at several radii, so the
    T nearest of each point are well separated from each other, not only the nearest."""
    k, d, n = sizes["K"], sizes["D"], sizes["N"]
    radii = rng.uniform(1.0, 6.0, size=(k, 1))
    centroids = rng.normal(0.0, 1.0, size=(k, d)) * radii
    owner = rng.integers(0, k, size=n)
    points = centroids[owner] + rng.normal(0.0, 1.0, size=(n, d))
    return {"X": points.astype(np.float32), "C": centroids.astype(np.float32)}


def reference(inputs, sizes):
    x = inputs["X"].astype(np.float64)
    c = inputs["C"].astype(np.float64)
    dist = (x * x).sum(1)[:, None] - 2.0 * x @ c.T + (c * c).sum(1)[None, :]
    order = np.argsort(dist, axis=1, kind="stable")[:, :sizes["T"]]
    return {"idx": order.astype(np.int32)}
