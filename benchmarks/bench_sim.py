"""CPU-simulator throughput, side by side with nvcc in one run: every valid corpus schedule
is simulated once at its smallest check shape (round-robin, seed 0, every CTA of the
sample), and the same lowered kernel is emitted and compiled with nvcc
(`-gencode arch=compute_90a,code=sm_90a`); the table shows simulated CTAs/s, events/s,
the simulation's wall time and its ratio to the nvcc compile of that kernel.

    python benchmarks/bench_sim.py              # every valid schedule (a few minutes)
    python benchmarks/bench_sim.py --quick      # the first schedule of each workload
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(ROOT))
    from cakegov.analysis.footprint import Footprints
    from cakegov.check.rulebook import Rulebook
    from cakegov.corpus.workloads import load_workloads
    from cakegov.gpu.compile import CompilerUnavailable, compile_nvcc, nvcc_path
    from cakegov.lower.emit import emit_cuda
    from cakegov.sim.evidence import lower_any, plan_shapes
    from cakegov.sim.placement import Placement
    from cakegov.sim.run import Options, simulate_run

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one schedule per workload")
    args = ap.parse_args(argv)
    book = Rulebook.load(ROOT / "rules")
    wls = load_workloads(ROOT / "corpus" / "workloads")
    files = sorted((ROOT / "corpus" / "valid").rglob("*.cake"))
    if args.quick:
        firsts: dict[str, Path] = {}
        for f in files:
            firsts.setdefault(f.parent.name, f)
        files = list(firsts.values())
    have_nvcc = nvcc_path() is not None
    print(f"{'schedule':44} {'shape':22} {'CTAs':>4} {'events':>7} {'sim s':>6} "
          f"{'CTA/s':>7} {'event/s':>8} {'nvcc s':>7} {'sim/nvcc':>8}")
    ratios, rates = [], []
    for f in files:
        kernel, workload, schedule, why = lower_any(f.read_bytes(), str(f), book, wls)
        if kernel is None:
            print(f"{f.name}: {why}")
            continue
        shape = plan_shapes(kernel, workload, schedule)[0]
        placement = Placement(kernel, Footprints(kernel))
        t0 = time.perf_counter()
        run = simulate_run(kernel, workload, book.primitives, shape,
                           Options(strategy="round-robin", seed=0), placement)
        sim_s = time.perf_counter() - t0
        nvcc_s = None
        if have_nvcc:
            source = emit_cuda(kernel, book.primitives, verifier_digest=book.digest()).source
            t0 = time.perf_counter()
            try:
                out = compile_nvcc(source)
                nvcc_s = time.perf_counter() - t0 if out.cubin else None
            except CompilerUnavailable:
                nvcc_s = None
        ctas = len(run.ctas)
        rates.append(run.events / sim_s)
        ratio = f"{sim_s / nvcc_s:8.2f}" if nvcc_s else "       -"
        if nvcc_s:
            ratios.append(sim_s / nvcc_s)
        shape_text = ",".join(f"{k}={v}" for k, v in shape.items())
        print(f"{f.parent.name + '/' + f.stem:44} {shape_text:22} {ctas:4d} {run.events:7d} "
              f"{sim_s:6.2f} {ctas / sim_s:7.1f} {run.events / sim_s:8.0f} "
              f"{(f'{nvcc_s:7.2f}') if nvcc_s else '      -'} {ratio}"
              + ("" if run.outcome == "correct" else f"  ({run.outcome}: {run.detail[:60]})"))
    print(f"\nmedian events/s {statistics.median(rates):.0f}" if rates else "")
    if ratios:
        print(f"simulation / nvcc compile: median {statistics.median(ratios):.2f}, "
              f"max {max(ratios):.2f} over {len(ratios)} kernels")
    else:
        print("nvcc is not available: no compile ratio")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
