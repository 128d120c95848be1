"""The `cakegov` console entry point. A plain check whose result is remembered
(cakegov/check/result_cache.py) is answered here, before the command line module and
what it imports (typer, pydantic, numpy) are loaded; everything else goes to
`cakegov.cli.run_argv`."""

from __future__ import annotations

import os
import sys

# BLAS thread pools: numpy's OpenBLAS starts one thread per core when it is imported,
# which costs a one-file check about a sixth of its CPU time (benchmarks/bench_startup.py)
# and buys nothing: the checker, the simulator and the cost model multiply small tiles.
# `run` keeps the pools: it computes error bounds of whole GPU-sized products on the host.
# An explicit setting in the environment always wins.
BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
KEEPS_BLAS_THREADS = frozenset({"run"})


def limit_blas_threads(argv: list[str]) -> None:
    """One BLAS thread unless the command needs more (`run`) or the user said otherwise;
    before numpy is imported, which is when the pools start."""
    if argv and argv[0] in KEEPS_BLAS_THREADS:
        return
    for var in BLAS_THREADS:
        os.environ.setdefault(var, "1")


def main() -> None:
    argv = sys.argv[1:]
    limit_blas_threads(argv)
    from cakegov.check.result_cache import serve

    key = serve(argv)  # a remembered result is written out, and the process exits here
    from cakegov.cli import run_argv

    run_argv(argv, key)
