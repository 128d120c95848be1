"""One schedule, one small shape, two correctness launches: what scripts/gpu_check.sh runs
under `compute-sanitizer --tool racecheck` and `--tool synccheck`.

    python -m cakegov.gpu.sanitize FILE [--shape M=256,N=256,K=256]

The shape defaults to the smallest check shape the schedule accepts (by the elements of its
largest tensor). No baseline, no timing, no record: the sanitizer's own report and exit
status are the evidence; this prints the run's lines and exits with its code (0 correct,
1 wrong or rejected, 2 usage, 3 no device)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from cakegov.check.rulebook import Rulebook
from cakegov.corpus.workloads import Workload, load_workloads
from cakegov.gpu.data import DataError, parse_shape, select_shapes
from cakegov.gpu.run import RunOptions, run_file


def smallest_shape(workload: Workload, fixed: dict[str, int], divisible: dict[str, int]
                   ) -> dict[str, int]:
    def largest(shape: dict[str, int]) -> int:
        out = 0
        for _dtype, dims in workload.tensors.values():
            n = 1
            for d in dims:
                n *= shape[d]
            out = max(out, n)
        return out

    return min(select_shapes(workload, fixed, divisible), key=largest)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cakegov.gpu.sanitize")
    parser.add_argument("file", type=Path)
    parser.add_argument("--shape", default=None)
    parser.add_argument("--rules", type=Path, default=Path("rules"))
    parser.add_argument("--workloads", type=Path, default=Path("corpus/workloads"))
    args = parser.parse_args(argv)
    book = Rulebook.load(args.rules)
    workloads = load_workloads(args.workloads)
    from cakegov.lower.build import prepare
    from cakegov.lower.derive import LoweringError

    shapes: tuple[dict[str, int], ...] = ()
    try:
        schedule = prepare(args.file, book, workloads).schedule
        if schedule is not None:  # else run_file reports the verdict
            wl = workloads[schedule.workload]
            shapes = ((parse_shape(args.shape, wl.sizes),) if args.shape else
                      (smallest_shape(wl, dict(schedule.sizes), dict(schedule.divisible)),))
    except (DataError, OSError, LoweringError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    outcome = run_file(args.file, RunOptions(shapes=shapes, record=False,
                                             correctness_only=True), book, workloads)
    for line in outcome.lines:
        print(line)
    return outcome.exit_code


if __name__ == "__main__":
    sys.exit(main())
