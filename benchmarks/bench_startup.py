"""Benchmark: how long `cakegov` takes to start, as a ratio to a bare interpreter.

Times, in fresh processes, `python -c pass`, `cakegov --help`, `cakegov version` and
`cakegov check FILE` (one valid corpus schedule) twice: cold (`--no-cache`: parse, check,
render) and remembered (the same plain, piped check again: its result comes from the
result cache, cakegov/check/result_cache.py, after every input was hashed), interleaved
round by round so that load on the machine hits every command alike, and prints each
command's median wall time and its ratio to the median of `python -c pass` measured in
the same run. The targets (issue 11): `--help` at most 5x, a one-file check at most 8x;
both check rows are held to it. The cache lives in a temporary directory of this run. A
reference row shows the floor the dependency stack sets before any cakegov code runs:
`import numpy, pydantic, typer` (and typer's parameter adapters, which `check` needs to
parse its options) — the libraries a cold one-file check cannot do without (the IR is
pydantic models, the protocol analysis computes footprints with numpy, the CLI is
typer). A cold check cannot start faster than that row.

The commands run as `python -m cakegov ...` with the interpreter that runs this script,
so the console-script wrapper is not counted and no PATH lookup is involved. Bytecode
caching is on (PYTHONDONTWRITEBYTECODE is dropped from the environment), as on a user's
machine: the warm-up round writes the `__pycache__` files. Usage:

    python benchmarks/bench_startup.py [--repeat N] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FILE = ROOT / "corpus" / "valid" / "scale" / "ring_1stage.cake"
TARGETS = {"--help": 5.0, "check FILE, cold": 8.0, "check FILE, remembered": 8.0}


def commands(file: Path) -> dict[str, list[str]]:
    py = sys.executable
    return {
        "python -c pass": [py, "-c", "pass"],
        "--help": [py, "-m", "cakegov", "--help"],
        "floor: libraries": [py, "-c", "import numpy, pydantic, typer.main, typer._adapters"],
        "version": [py, "-m", "cakegov", "version"],
        "check FILE, cold": [py, "-m", "cakegov", "check", "--no-cache", str(file)],
        "check FILE, remembered": [py, "-m", "cakegov", "check", str(file)],
    }


def time_once(argv: list[str], cache: Path) -> float:
    env = {k: v for k, v in os.environ.items()
           if k != "PYTHONDONTWRITEBYTECODE" and k != "CAKEGOV_NO_CACHE"}
    env["CAKEGOV_CACHE_DIR"] = str(cache)
    env["COLUMNS"] = "100"
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: "
                         f"{done.stderr.decode(errors='replace')[-400:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15, help="rounds (default 15)")
    parser.add_argument("--file", type=Path, default=FILE, help="schedule for `check FILE`")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    cmds = commands(args.file)
    with tempfile.TemporaryDirectory(prefix="cakegov-bench-") as cache:
        for argv in cmds.values():  # warm the page and bytecode caches; store the result
            time_once(argv, Path(cache))
        times: dict[str, list[float]] = {name: [] for name in cmds}
        for _ in range(args.repeat):
            for name, argv in cmds.items():
                times[name].append(time_once(argv, Path(cache)))
    medians = {name: statistics.median(ts) for name, ts in times.items()}
    base = medians["python -c pass"]
    rows = []
    print(f"{'command':<24} {'median ms':>10} {'ratio':>7}  target")
    for name, median in medians.items():
        ratio = median / base
        target = TARGETS.get(name)
        verdict = "" if target is None else (f"<= {target:g}x "
                                             + ("met" if ratio <= target else "NOT met"))
        print(f"{name:<24} {median * 1000:>10.1f} {ratio:>6.1f}x  {verdict}")
        rows.append({"command": name, "median_s": median, "ratio": ratio, "target": target,
                     "samples_s": times[name]})
    print(f"({args.repeat} rounds, fresh processes, {sys.executable})")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
