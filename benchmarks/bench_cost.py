"""Benchmark: is ranking the valid corpus cheaper than checking it?

Runs `cakegov rank corpus/valid` (one ranked group per workload) and `cakegov check
corpus/valid` side by side, as subprocesses (the `cakegov` script beside this
interpreter), alternating, and prints the ratio of the medians (check over rank) with the
spread. Ratios, not bare times, are the
claim: the machine is shared. Usage:

    python benchmarks/bench_cost.py [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _time(args: list[str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run([str(Path(sys.executable).parent / "cakegov"), *args], cwd=ROOT,
                          capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1, 3):
        raise SystemExit(f"{' '.join(args)} failed ({proc.returncode}): {proc.stderr[-500:]}")
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    opts = ap.parse_args()
    rank, check = [], []
    for _ in range(opts.repeat):
        rank.append(_time(["rank", "corpus/valid", "--format", "json"]))
        check.append(_time(["check", "corpus/valid", "--format", "json"]))
    ratio = statistics.median(check) / statistics.median(rank)
    ratios = sorted(c / r for c, r in zip(check, rank, strict=True))
    print(f"cakegov check / cakegov rank over corpus/valid ({opts.repeat} alternating runs "
          f"each, process start included): median ratio {ratio:.2f}x "
          f"(per-run ratios {ratios[0]:.2f}x .. {ratios[-1]:.2f}x)")
    print("rank is cheaper than check" if ratio > 1 else "rank is NOT cheaper than check")


if __name__ == "__main__":
    main()
