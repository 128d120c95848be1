"""Array helpers the analyses share.

`unique_sorted` stands in for a plain `numpy.unique`: since numpy 2, `np.unique` without
`return_index`/`return_counts` asks `np.ma.is_masked` about its argument, which imports
`numpy.ma` (about 22 ms, a tenth of a one-file `cakegov check`) for arrays that are never
masked."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cakegov.lazy import LazyModule

if TYPE_CHECKING:
    import numpy as np
else:  # imported by analysis/grid.py, which rules load before any grid is evaluated
    np = LazyModule("numpy")


def unique_sorted(values: np.ndarray) -> np.ndarray:
    """The distinct values of `values`, flattened and in ascending order (`np.unique`)."""
    a = np.sort(np.asarray(values).ravel())
    if a.size == 0:
        return a
    keep = np.empty(a.size, dtype=bool)
    keep[0] = True
    np.not_equal(a[1:], a[:-1], out=keep[1:])
    return a[keep]
