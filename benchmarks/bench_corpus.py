"""Benchmark: `cakegov corpus run` (items, and items plus the mutation suite) against a
cold `cakegov propose-rule` of the README's example proposal, measured in the same run.

Prints the wall time of each, the time per item (corpus items, then items plus mutants,
in one process and with `--jobs` = the CPU count) and each as a ratio to the
propose-rule run. Each command is a fresh process; the
propose-rule run has an empty cache ($CAKEGOV_CACHE_DIR), `--no-record` and `--gpu off`.
Target (issue 14): the whole corpus plus the suite within 5 minutes on the 2-core
development machine.

    python benchmarks/bench_corpus.py [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = "examples/proposals/fragment-owner.py"
TARGET_S = 300.0


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        sys.exit(f"{' '.join(cmd)} failed with exit {proc.returncode}:\n{proc.stderr[-800:]}")
    return elapsed, proc.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, CAKEGOV_CACHE_DIR=cache)
        propose, _ = timed([py, "-m", "cakegov", "propose-rule", EXAMPLE, "--no-record",
                            "--gpu", "off", "--report-dir", str(Path(cache) / "reports")], env)
    items_s, out = timed([py, "-m", "cakegov", "corpus", "run", "-q", "-f", "json"],
                         dict(os.environ))
    n_items = json.loads(out)["summary"]["items"]
    full_s, out = timed([py, "-m", "cakegov", "corpus", "run", "--mutants", "-q", "-f",
                         "json", "--max-benign-rejected", "1000000"], dict(os.environ))
    summary = json.loads(out)["summary"]
    n_mutants = summary["mutation"]["mutants"]
    jobs = min(os.cpu_count() or 1, 8)
    par_s, out = timed([py, "-m", "cakegov", "corpus", "run", "--mutants", "-q", "-f",
                        "json", "--max-benign-rejected", "1000000", "--jobs", str(jobs)],
                       dict(os.environ))
    rows = [("propose-rule (cold)", propose, None), ("corpus run", items_s, n_items),
            ("corpus run --mutants", full_s, n_items + n_mutants),
            (f"  the same, --jobs {jobs}", par_s, n_items + n_mutants)]
    print(f"{'run':<22} {'wall s':>8} {'items':>6} {'ms/item':>8} {'vs propose':>11}")
    for name, wall, n in rows:
        per = f"{1000 * wall / n:8.0f}" if n else f"{'-':>8}"
        print(f"{name:<22} {wall:8.1f} {n or '-':>6} {per} {wall / propose:10.2f}x")
    for name, wall in (("one process", full_s), (f"--jobs {jobs}", par_s)):
        verdict = "met" if wall <= TARGET_S else "NOT met"
        print(f"target: corpus plus mutants <= {TARGET_S:.0f} s, {name}: {verdict}")
    if args.json:
        args.json.write_text(json.dumps([{"run": r, "wall_s": w, "items": n}
                                         for r, w, n in rows], indent=2) + "\n")


if __name__ == "__main__":
    main()
