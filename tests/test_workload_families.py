"""The softmax and knn workloads (corpus/workloads/softmax.py, knn.py), the `rowwise`
primitive they need, and the ranked, tie-aware comparison of neighbour lists: the
contracts hold (non-degenerate inputs, tails in the check shapes), and the simulator
runs every valid schedule of the families against the reference and reproduces every
invalid one."""

from __future__ import annotations

import numpy as np
import pytest

from cakegov.gpu.compare import compare_labels, compare_outputs, kmeans_distances
from cakegov.sim.crosscheck import summary

from .conftest import CORPUS

FAMILIES = ("softmax", "knn", "attention")


def test_softmax_contract(workloads):
    wl = workloads["softmax"]
    assert any(s["M"] % 64 for s in wl.shapes)  # a tail along the rows
    sizes = {"M": 300, "N": 128}
    x = wl.generate(sizes, np.random.default_rng(0))["X"]
    y = wl.reference({"X": x}, sizes)["Y"]
    assert np.allclose(y.sum(axis=1), 1.0)
    assert 0.05 < y.max(axis=1).mean() < 0.95  # neither uniform nor one-hot
    with np.errstate(over="ignore", invalid="ignore"):
        naive = np.exp(x) / np.exp(x).sum(axis=1, keepdims=True)  # no max subtraction
    assert not np.isfinite(naive).all() or np.abs(naive - y).max() > wl.tolerance["f32"]


def test_knn_contract_and_ties(workloads):
    wl = workloads["knn"]
    assert any(s["N"] % 64 for s in wl.shapes)
    sizes = {"N": 200, "K": 16, "D": 8, "T": 4}
    inputs = wl.generate(sizes, np.random.default_rng(1))
    ref = wl.reference(inputs, sizes)["idx"]
    assert ref.shape == (200, 4) and (np.sort(ref, axis=1)[:, 1:] !=
                                      np.sort(ref, axis=1)[:, :-1]).all()
    # two centroids at the same distance: the lower index comes first
    tied = {"X": np.zeros((1, 2), np.float32),
            "C": np.array([[2, 0], [1, 0], [0, 1], [-1, 0]], np.float32)}
    got = wl.reference(tied, {"N": 1, "K": 4, "D": 2, "T": 3})["idx"]
    assert got.tolist() == [[1, 2, 3]]


def test_ranked_comparison():
    x = np.array([[0.0, 0.0], [5.0, 0.0]])
    c = np.array([[1.0, 0.0], [1.0 + 1e-7, 0.0], [3.0, 0.0], [9.0, 0.0]])
    dist = kmeans_distances({"X": x, "C": c})
    ref = np.array([[0, 1, 2], [2, 1, 0]], dtype=np.int32)
    assert compare_labels("idx", ref.copy(), ref, dist, 1e-5).passed
    near = np.array([[1, 0, 2], [2, 0, 1]], dtype=np.int32)  # near-ties swapped
    got = compare_labels("idx", near, ref, dist, 1e-5)
    assert got.passed and got.details["ties_accepted"] == 4
    far = np.array([[0, 2, 1], [2, 1, 0]], dtype=np.int32)
    got = compare_labels("idx", far, ref, dist, 1e-5)
    assert not got.passed and "row 0" in got.reason
    repeated = np.array([[0, 0, 2], [2, 1, 0]], dtype=np.int32)
    got = compare_labels("idx", repeated, ref, dist, 1e-5)
    assert not got.passed and "repeats a neighbour" in got.reason
    poison = np.full_like(ref, 7)
    assert not compare_labels("idx", poison, ref, dist, 1e-5).passed


def test_knn_outputs_use_the_ranked_comparison(workloads):
    wl = workloads["knn"]
    sizes = {"N": 64, "K": 16, "D": 8, "T": 4}
    inputs = wl.generate(sizes, np.random.default_rng(2))
    ref = wl.reference(inputs, sizes)
    out = {"idx": ref["idx"][:, ::-1].copy()}  # right neighbours, wrong order
    (c,) = compare_outputs(wl, out, ref, inputs)
    assert not c.passed and "neighbour lists are wrong" in c.reason


@pytest.fixture(scope="module")
def rows(crosscheck_rows):
    return crosscheck_rows([CORPUS / kind / fam for kind in ("valid", "invalid")
                            for fam in FAMILIES])


@pytest.mark.slow
def test_families_crosscheck(rows):
    s = summary(rows)
    assert s["valid"] >= 2 * len(FAMILIES) and s["dynamic"] >= 3 * len(FAMILIES)
    assert s["valid_matched"] == s["valid"] and s["dynamic_reproduced"] == s["dynamic"]
    assert s["disagreements"] == []


def test_rowwise_broadcasts_per_row(rulebook):
    from types import SimpleNamespace

    prim = rulebook.primitives["rowwise"]
    src = np.arange(6, dtype=np.float32).reshape(2, 3)
    vec = np.array([[1.0], [2.0]], dtype=np.float32)
    out: dict[str, np.ndarray] = {}
    for op, want in (("sub", src - vec), ("div", src / vec), ("mul", src * vec),
                     ("add", src + vec)):
        sim = SimpleNamespace(tile=lambda n: {"src": src, "vec": vec}[n],
                              value=lambda n, op=op: op, put=out.__setitem__)
        prim.simulate(None, sim)
        assert np.array_equal(out["dst"], want.astype(np.float32))


# ---- a running argmin across centroid tiles (lm.argmin_update) ---------------------------


class _Tiles:
    """The part of the simulator's `sim` object a primitive's `simulate` uses."""

    def __init__(self, **tiles):
        self.tiles = {k: np.asarray(v) for k, v in tiles.items()}
        self.out = {}

    def tile(self, name):
        return self.tiles[name]

    def value(self, name):
        return self.tiles[name].item()

    def put(self, name, values):
        self.out[name] = np.asarray(values)


def test_argmin_update_over_tiles_is_the_first_argmin_of_the_whole_row(rulebook):
    """Merging 64-column tiles in order gives numpy's argmin of the whole row, ties to
    the lower index: exact duplicates across tiles and within one tile are planted, so a
    merge with `<=` (the later tile wins) or one that ignores `base` fails."""
    merge = rulebook.primitives["argmin_update"].simulate
    rng = np.random.default_rng(7)
    rows, width, tile = 16, 256, 64
    x = rng.normal(size=(rows, width)).astype(np.float32)
    x[0, 200] = x[0, 3] = x[0].min() - 1.0                # tie across tiles
    x[1, 70] = x[1, 71] = x[1].min() - 1.0                # tie within a tile
    x[2, :] = 5.0                                          # every column ties
    best = np.full((rows, 1), 1e30, dtype=np.float32)
    index = np.zeros((rows, 1), dtype=np.int32)
    for c in range(width // tile):
        sim = _Tiles(src=x[:, c * tile:(c + 1) * tile], best=best, index=index,
                     base=c * tile)
        merge(None, sim)
        best, index = sim.out["best"], sim.out["index"]
    assert index.dtype == np.int32
    np.testing.assert_array_equal(index.ravel(), np.argmin(x, axis=1))
    np.testing.assert_array_equal(best.ravel(), x.min(axis=1))
    assert index[0, 0] == 3 and index[1, 0] == 70 and index[2, 0] == 0


def test_derived_sizes_are_recomputed_and_must_agree_with_the_shapes(workloads, tmp_path):
    """gemm_fp8's KB and NB are functions of K and N: a shape the tools grow (a persistent
    kernel's carried shape) gets them recomputed, and a workload whose own shapes
    disagree with its `derive` is refused when loaded."""
    from cakegov.corpus.workloads import WorkloadError, load_workload

    fp8 = workloads["gemm_fp8"]
    grown = fp8.derive({"M": 512, "N": 600, "K": 512, "KB": 4, "NB": 2})
    assert grown["NB"] == 5 and grown["KB"] == 4 and grown["N"] == 600
    text = (CORPUS / "workloads" / "gemm_fp8.py").read_text()
    bad = tmp_path / "gemm_fp8.py"
    bad.write_text(text.replace('"N": 320, "K": 512, "KB": 4, "NB": 3',
                                '"N": 320, "K": 512, "KB": 4, "NB": 2'))
    with pytest.raises(WorkloadError, match="derive changes"):
        load_workload(bad)
