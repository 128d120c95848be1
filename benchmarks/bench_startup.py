"""Benchmark: how long `cakegov` takes to start, as a ratio to a bare interpreter.

Times, in fresh processes, `python -c pass`, `cakegov --help`, `cakegov version`,
`cakegov check FILE` (one valid corpus schedule) twice: cold (`--no-cache`: parse, check,
render) and remembered (the same plain, piped check again: its result comes from the
result cache, cakegov/check/result_cache.py, after every input was hashed), and a cold
check of a corpus GEMM (warp-specialised, four stages: the protocol analysis runs in
full), interleaved round by round so that load on the machine hits every command alike.
It prints each command's median wall time and median CPU time (user + system of the
process and its threads, from getrusage), each as a ratio to `python -c pass` measured in
the same run. CPU time is the measure the targets use (issues 11 and 44): it counts the
work a command makes the machine do, threads included, and moves less with load. The
targets: `--help` at most 5x, a one-file check at most 8x; every check row is held to
it. The cache lives in a temporary directory of this run. A
reference row shows the floor the dependency stack sets before any cakegov code runs:
`import numpy, pydantic, typer` (and typer's parameter adapters, which `check` needs to
parse its options) — the libraries a cold one-file check cannot do without (the IR is
pydantic models, the protocol analysis computes footprints with numpy, the CLI is
typer). A cold check cannot start faster than that row.

The commands run as `python -m cakegov ...` with the interpreter that runs this script,
so the console-script wrapper is not counted and no PATH lookup is involved. Bytecode
caching is on (PYTHONDONTWRITEBYTECODE is dropped from the environment), as on a user's
machine: the warm-up round writes the `__pycache__` files. Usage:

    python benchmarks/bench_startup.py [--repeat N] [--json PATH] [--against DIR]

`--against DIR` (another checkout of cakegov, e.g. a `git worktree` of an earlier commit)
adds each cakegov row run from that checkout, marked `@base`, in the same rounds: a
before-and-after comparison whose ratios share one `python -c pass`.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FILE = ROOT / "corpus" / "valid" / "scale" / "ring_1stage.cake"
GEMM = ROOT / "corpus" / "valid" / "gemm" / "ws_pipeline_s4.cake"
TARGETS = {"--help": 5.0, "check FILE, cold": 8.0, "check FILE, remembered": 8.0,
           "check GEMM, cold": 8.0}


def commands(file: Path) -> dict[str, list[str]]:
    py = sys.executable
    return {
        "python -c pass": [py, "-c", "pass"],
        "--help": [py, "-m", "cakegov", "--help"],
        "floor: libraries": [py, "-c", "import os; os.environ.setdefault("
                             "'OPENBLAS_NUM_THREADS', '1'); import numpy, pydantic, "
                             "typer.main, typer._adapters"],
        "version": [py, "-m", "cakegov", "version"],
        "check FILE, cold": [py, "-m", "cakegov", "check", "--no-cache", str(file)],
        "check FILE, remembered": [py, "-m", "cakegov", "check", str(file)],
        "check GEMM, cold": [py, "-m", "cakegov", "check", "--no-cache", str(GEMM)],
    }


def time_once(argv: list[str], cache: Path, cwd: Path = ROOT) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system, all threads) of one run."""
    env = {k: v for k, v in os.environ.items()
           if k != "PYTHONDONTWRITEBYTECODE" and k != "CAKEGOV_NO_CACHE"}
    env["CAKEGOV_CACHE_DIR"] = str(cache)
    env["COLUMNS"] = "100"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, check=False)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: "
                         f"{done.stderr.decode(errors='replace')[-400:]}")
    return elapsed, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15, help="rounds (default 15)")
    parser.add_argument("--file", type=Path, default=FILE, help="schedule for `check FILE`")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--against", type=Path, help="another cakegov checkout: its rows "
                        "run in the same rounds, marked @base")
    args = parser.parse_args()
    # name -> (argv, working directory: `python -m cakegov` imports the package there)
    cmds = {name: (argv, ROOT) for name, argv in commands(args.file).items()}
    if args.against is not None:
        base_dir = args.against.resolve()
        if not (base_dir / "cakegov" / "__init__.py").is_file():
            raise SystemExit(f"--against {args.against}: not a cakegov checkout")
        for name, (argv, _) in list(cmds.items()):
            if argv[1:3] == ["-m", "cakegov"]:
                cmds[f"{name} @base"] = (argv, base_dir)
    with tempfile.TemporaryDirectory(prefix="cakegov-bench-") as cache:
        for argv, cwd in cmds.values():  # warm the page and bytecode caches; store results
            time_once(argv, Path(cache), cwd)
        times: dict[str, list[float]] = {name: [] for name in cmds}
        cpus: dict[str, list[float]] = {name: [] for name in cmds}
        for _ in range(args.repeat):
            for name, (argv, cwd) in cmds.items():
                wall, cpu = time_once(argv, Path(cache), cwd)
                times[name].append(wall)
                cpus[name].append(cpu)
    medians = {name: statistics.median(ts) for name, ts in times.items()}
    cpu_medians = {name: statistics.median(ts) for name, ts in cpus.items()}
    base, cpu_base = medians["python -c pass"], cpu_medians["python -c pass"]
    rows = []
    print(f"{'command':<30} {'wall ms':>8} {'ratio':>7} {'CPU ms':>8} {'ratio':>7}  "
          "target (CPU)")
    for name, median in medians.items():
        ratio, cpu_ratio = median / base, cpu_medians[name] / cpu_base
        target = TARGETS.get(name.removesuffix(" @base"))
        verdict = "" if target is None else (f"<= {target:g}x "
                                             + ("met" if cpu_ratio <= target else "NOT met"))
        print(f"{name:<30} {median * 1000:>8.1f} {ratio:>6.1f}x "
              f"{cpu_medians[name] * 1000:>8.1f} {cpu_ratio:>6.1f}x  {verdict}")
        rows.append({"command": name, "median_s": median, "ratio": ratio,
                     "cpu_median_s": cpu_medians[name], "cpu_ratio": cpu_ratio,
                     "target": target, "samples_s": times[name], "cpu_samples_s": cpus[name]})
    print(f"({args.repeat} rounds, fresh processes, {sys.executable})")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
