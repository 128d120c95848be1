"""`cakegov corpus crosscheck --jobs J`: the cross-check (cakegov/sim/crosscheck.py) over J
worker processes, with the rows one process gives, in the same order, for every J.

A row depends on its schedule, the rulebook, the workloads and the seeds alone (the
checker is deterministic and the simulator's runs are seeded), never on which process
computed it or what that process computed before. The schedules are handed out one at a
time, the largest file first, so that a long schedule (a persistent cluster GEMM whose
defect the repair search diagnoses) does not hold back a fixed share of the corpus behind
it: a static split left one CPU idle for minutes."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from cakegov.sim.crosscheck import Row

_WORKER: dict[str, Any] = {}  # this worker process's rulebook, workloads and options


def _init_worker(rules: Path, workloads: Path, seeds: int, root: Path | None) -> None:
    """Load the rulebook and workloads once per worker (plugins are modules, not data to
    send between processes)."""
    from cakegov.check.rulebook import Rulebook
    from cakegov.corpus.workloads import load_workloads

    _WORKER.update(book=Rulebook.load(rules), wls=load_workloads(workloads), seeds=seeds,
                   root=root)


def _row(path: Path) -> Row:
    from cakegov.sim.crosscheck import crosscheck

    w = _WORKER
    rows = crosscheck([path], w["book"], w["wls"], seeds=w["seeds"], root=w["root"])
    if len(rows) != 1:
        raise RuntimeError(f"the cross-check of {path} gave {len(rows)} rows, not 1")
    return rows[0]


def crosscheck_jobs(paths: Iterable[Path], rules: Path, workloads: Path, *, jobs: int,
                    seeds: int = 3, root: Path | None = None,
                    advance: Callable[[int], None] | None = None) -> list[Row]:
    """One row per schedule under `paths`, in `expand_paths` order, computed by `jobs`
    worker processes; `advance(1)` as each row arrives (progress only)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    from cakegov.check.runner import expand_paths

    files = expand_paths(paths)
    if not files:
        return []
    order = sorted(range(len(files)), key=lambda i: (-files[i].stat().st_size, i))
    rows: dict[int, Row] = {}
    context = multiprocessing.get_context("spawn")  # no state of this process is shared
    with ProcessPoolExecutor(max_workers=max(1, min(jobs, len(files))), mp_context=context,
                             initializer=_init_worker,
                             initargs=(rules, workloads, seeds, root)) as pool:
        futures = {pool.submit(_row, files[i]): i for i in order}
        for future in as_completed(futures):
            rows[futures[future]] = future.result()
            if advance is not None:
                advance(1)
    return [rows[i] for i in range(len(files))]
