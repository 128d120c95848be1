"""Protocol-analysis timings, side by side in one run: every corpus schedule (lowering and
protocol analysis, apart from the rules), its median and p95 as ratios to compiling a
comparable kernel with nvcc and with NVRTC, and a scaling table of a warp-specialised
ring over S = 1..8 stages x 1..3 consumer warpgroups x trip counts 4..4096 and over
persistent tiles 1..8, a cluster-of-2 multicast GEMM (2 consumer warpgroups, 4 stages;
target under 2 s) and the same GEMM persistent (a grid-stride tile scheduler over 132 SMs,
the ring position carried across tiles by a running counter; target under 2 s). Every
point must end with a verdict (not `incomplete`); the table shows how time grows with each
dimension.

    python benchmarks/protocol_timing.py            # a few minutes on 2 cores
    python benchmarks/protocol_timing.py --quick    # fewer points, one repetition
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

# One loader warpgroup and C math warpgroups on one raw ring: each math warpgroup takes
# 64 rows of A through its own buffer and all of B; the empty barrier counts one arrive
# per math warp. TILES > 1 makes it persistent: the ring's phases carry over from tile to
# tile (iteration `tile * KT + k`). K is pinned with `sizes=`, so the trip count is a
# constant of the schedule.
TEMPLATE = '''"""Scaling point: S={stages}, C={consumers}, {trips} trips, {tiles} tiles."""
@cake.schedule(target="sm_90a", workload="gemm", sizes={{"K": {k}}})
def scale_s{stages}_c{consumers}_t{trips}_p{tiles}(lm, A, B, C):
    BH, BN, BK, S, KT, TILES = 64, 64, 32, {stages}, {trips}, {tiles}
    lm.launch(grid=(lm.cdiv(lm.M, {consumers} * BH * TILES), lm.cdiv(lm.N, BN)),
              warps={warps})
{buffers}
    b_s = lm.smem("bf16", (BN, BK), stages=S)
    full = lm.mbarrier(count=1, stages=S)
    empty = lm.mbarrier(count={empty}, stages=S)
    loader = lm.role(warps=range(0, 4), regs=40)
{roles}
    n0 = lm.block(1) * BN
    with loader:
        for tile in lm.range(0, TILES):
            m0 = (lm.block(0) * TILES + tile) * {consumers} * BH
            for k in lm.range(0, KT):
                empty[(tile * KT + k) % S].wait(parity=((tile * KT + k) // S + 1) % 2)
                full[(tile * KT + k) % S].arrive_expect_tx(bytes=lm.nbytes({all_bufs}))
{loads}
                b_s[(tile * KT + k) % S].load(B, at=(n0, k * BK),
                                              barrier=full[(tile * KT + k) % S], pad=True)
{bodies}'''

CONSUMER = '''    with math{i}:
        for tile in lm.range(0, TILES):
            m0 = (lm.block(0) * TILES + tile) * {consumers} * BH + {i} * BH
            for k in lm.range(0, KT):
                full[(tile * KT + k) % S].wait(parity=((tile * KT + k) // S) % 2)
                lm.mma(acc{i}, a{i}_s[(tile * KT + k) % S], b_s[(tile * KT + k) % S],
                       transpose_b=True, init=(k == 0))
                empty[(tile * KT + k) % S].arrive()
            lm.store(C, at=(m0, n0), src=acc{i}, mask=True)
'''


def scaling_schedule(stages: int, consumers: int, trips: int, tiles: int) -> str:
    bufs = "\n".join(f'    a{i}_s = lm.smem("bf16", (BH, BK), stages=S)'
                     for i in range(consumers))
    roles = "\n".join(
        f"    math{i} = lm.role(warps=range({4 + 4 * i}, {8 + 4 * i}), "
        f"regs={ {1: 232, 2: 208}.get(consumers, 152)})\n"
        f'    acc{i} = lm.fragment("f32", (BH, BN), role=math{i})' for i in range(consumers))
    loads = "\n".join(
        f"                a{i}_s[(tile * KT + k) % S].load(A, at=(m0 + {i} * BH, k * BK),\n"
        f"                                               barrier=full[(tile * KT + k) % S], "
        "pad=True)" for i in range(consumers))
    bodies = "".join(CONSUMER.format(i=i, consumers=consumers) for i in range(consumers))
    return TEMPLATE.format(
        stages=stages, consumers=consumers, trips=trips, tiles=tiles, k=32 * trips,
        warps=4 + 4 * consumers, buffers=bufs, empty=4 * consumers, roles=roles,
        all_bufs=", ".join([f"a{i}_s" for i in range(consumers)] + ["b_s"]), loads=loads,
        bodies=bodies)


# A cluster of 2 CTAs along M (thread-block cluster, TMA multicast): one loader warpgroup
# and two consumer warpgroups (one 8-warp math role, as CUTLASS's cooperative kernel) on a
# 4-stage raw ring. Rank 0 multicasts the shared B tile into both CTAs; every consumer
# warp releases its stage on its own CTA's empty barrier and on the peer's, so `empty`
# counts (cluster_x + cluster_y - 1) x 8 warps; all roles end at the cluster barrier. K is
# left to the workload's check shapes (up to 64 K tiles), so the exploration covers every
# CTA of every distinct cluster of each shape.
CLUSTER = '''"""Cluster point: 2 CTAs, 2 consumer warpgroups, 4 stages, multicast B."""
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def cluster2_c2_s4(lm, A, B, C):
    BM, BN, BK, S, CX = 128, 128, 64, 4, 2
    KT = lm.cdiv(lm.K, BK)
    lm.launch(grid=(CX * lm.cdiv(lm.M, CX * BM), lm.cdiv(lm.N, BN)), warps=12,
              cluster=(CX, 1, 1))
    a_s = lm.smem("bf16", (BM, BK), stages=S)
    b_s = lm.smem("bf16", (BN, BK), stages=S)
    full = lm.mbarrier(count=1, stages=S)
    empty = lm.mbarrier(count=CX * 8, stages=S)
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 12), regs=232)
    acc = lm.fragment("f32", (BM, BN), role=math)
    rank = lm.cluster_rank(0)
    m0, n0 = lm.block(0) * BM, lm.block(1) * BN
    with loader:
        for k in lm.range(0, KT):
            empty[k % S].wait(parity=(k // S + 1) % 2)
            full[k % S].arrive_expect_tx(bytes=lm.nbytes(a_s, b_s))
            a_s[k % S].load(A, at=(m0, k * BK), barrier=full[k % S], pad=True)
            for lead in lm.range(rank, 1):
                b_s[k % S].load(B, at=(n0, k * BK), barrier=full[k % S], pad=True,
                                multicast=0b11)
        lm.sync_cluster()
    with math:
        for k in lm.range(0, KT):
            full[k % S].wait(parity=(k // S) % 2)
            lm.mma(acc, a_s[k % S], b_s[k % S], transpose_b=True, init=(k == 0))
            empty[k % S].arrive()
            empty[k % S].arrive(cta=1 - rank)
        lm.store(C, at=(m0, n0), src=acc, mask=True)
        lm.sync_cluster()
'''


def cluster_schedule() -> str:
    return CLUSTER


# The cluster point made persistent (CUTLASS's cooperative kernel with its static
# persistent scheduler, corpus/valid/gemm/persistent_coop_cluster2_s4.cake): 132 SMs,
# cluster c takes cluster tiles c, c + G/2, ...; the ring position is the counter `it`,
# kept from tile to tile; the loader's tail acquires every stage once more, so no CTA
# exits while a peer's release may land in it. At M = N = K = 4096 a CTA runs 7 or 8
# tiles of 64 K blocks (up to 512 ring positions per role), and the exploration covers
# one cluster of every class of trip counts of every shape.
PERSISTENT_CLUSTER = '''"""Persistent cluster point: 2 CTAs, 2 consumer warpgroups, 4 stages."""
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def persistent_cluster2_c2_s4(lm, A, B, C):
    BM, BN, BK, S, CX, SMS = 128, 128, 64, 4, 2, 132
    KT = lm.cdiv(lm.K, BK)
    CTM = lm.cdiv(lm.M, CX * BM)
    TILES = CTM * lm.cdiv(lm.N, BN)
    lm.launch(grid=(CX * lm.min(SMS // CX, TILES),), warps=12, cluster=(CX, 1, 1))
    a_s = lm.smem("bf16", (BM, BK), stages=S)
    b_s = lm.smem("bf16", (BN, BK), stages=S)
    full = lm.mbarrier(count=1, stages=S)
    empty = lm.mbarrier(count=CX * 8, stages=S)
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 12), regs=232)
    acc = lm.fragment("f32", (BM, BN), role=math)
    rank = lm.cluster_rank(0)
    it = lm.counter()
    with loader:
        for t in lm.range(lm.block(0) // CX, TILES, lm.grid(0) // CX):
            m0, n0 = ((t % CTM) * CX + rank) * BM, (t // CTM) * BN
            for k in lm.range(0, KT, counter=it):
                empty[it % S].wait(parity=(it // S + 1) % 2)
                full[it % S].arrive_expect_tx(bytes=lm.nbytes(a_s, b_s))
                a_s[it % S].load(A, at=(m0, k * BK), barrier=full[it % S], pad=True)
                for lead in lm.range(rank, 1):
                    b_s[it % S].load(B, at=(n0, k * BK), barrier=full[it % S], pad=True,
                                     multicast=0b11)
        for tail in lm.range(0, S, counter=it):
            empty[it % S].wait(parity=(it // S + 1) % 2)
    with math:
        for t in lm.range(lm.block(0) // CX, TILES, lm.grid(0) // CX):
            m0, n0 = ((t % CTM) * CX + rank) * BM, (t // CTM) * BN
            for k in lm.range(0, KT, counter=it):
                full[it % S].wait(parity=(it // S) % 2)
                lm.mma(acc, a_s[it % S], b_s[it % S], transpose_b=True, init=(k == 0))
                empty[it % S].arrive()
                empty[it % S].arrive(cta=1 - rank)
            lm.store(C, at=(m0, n0), src=acc, mask=True)
'''


def persistent_cluster_schedule() -> str:
    return PERSISTENT_CLUSTER


def cluster_point(chk, reps: int, persistent: bool = False) -> tuple[float, object]:
    """(median seconds, result) of the cluster-of-2 multicast GEMM's exploration (its
    persistent form with `persistent`)."""
    source = persistent_cluster_schedule() if persistent else cluster_schedule()
    name = "persistent_cluster2_c2_s4" if persistent else "cluster2_c2_s4"
    median, result = analyse(chk, source.encode(), name, reps)
    if result is None:
        raise SystemExit(f"the {name} schedule does not parse")
    if result.anomalies:
        raise SystemExit(f"the {name} schedule has an anomaly: "
                         f"{result.anomalies[0].message}")
    return median, result


@dataclass
class Point:
    stages: int
    consumers: int
    trips: int
    tiles: int
    seconds: float
    events: int  # unrolled events executed (after the window)
    steps: int
    verdict: str


@dataclass
class FileTiming:
    file: str
    median_s: float
    events: int
    runs: int
    complete: bool


def checker():
    from cakegov.check.rulebook import Rulebook
    from cakegov.check.runner import Checker
    from cakegov.corpus.workloads import load_workloads

    return Checker(Rulebook.load(ROOT / "rules"), load_workloads(ROOT / "corpus" / "workloads"))


def analyse(chk, data: bytes, name: str, reps: int):
    """(median seconds, result) of parsing excluded: lowering + protocol analysis."""
    from cakegov.ir.errors import InputError
    from cakegov.ir.parse import parse_bytes

    try:
        schedule = parse_bytes(data, chk.vocabulary)
    except InputError:
        return None, None
    samples, result = [], None
    for _ in range(reps):
        ctx = chk.context(schedule, name)
        t0, c0 = time.perf_counter(), time.process_time()
        result = ctx.protocol
        samples.append(time.perf_counter() - t0)
        CPU.setdefault(name, []).append(time.process_time() - c0)
    return statistics.median(samples), result


CPU: dict[str, list[float]] = {}  # processor seconds of each analysis, by schedule name


def time_protocol(chk, reps: int) -> list[FileTiming]:
    out = []
    for path in sorted((ROOT / "corpus").rglob("*.cake")):
        median, result = analyse(chk, path.read_bytes(), path.name, reps)
        if result is None:
            continue
        out.append(FileTiming(path.relative_to(ROOT).as_posix(), median, result.events,
                              len(result.runs), not result.incomplete))
    return out


def scaling(chk, stages, consumers, trips, tiles, reps: int) -> list[Point]:
    points = []
    for s in stages:
        for c in consumers:
            for t in trips:
                for p in tiles:
                    src = scaling_schedule(s, c, t, p).encode()
                    median, result = analyse(chk, src, f"s{s}c{c}t{t}p{p}", reps)
                    if result is None:
                        raise SystemExit(f"scaling schedule s={s} c={c} t={t} p={p} does "
                                         "not parse")
                    if result.anomalies:
                        raise SystemExit(f"scaling schedule s={s} c={c} t={t} p={p} has an "
                                         f"anomaly: {result.anomalies[0].message}")
                    verdict = "incomplete" if result.incomplete else "clean"
                    points.append(Point(s, c, t, p, median, result.events, result.states,
                                        verdict))
    return points


def main(argv: list[str] | None = None) -> int:
    from bench_check import KERNEL, fmt_time, p95, time_nvcc, time_nvrtc

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer points, 1 repetition")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    reps = 1 if args.quick else args.reps
    chk = checker()
    compiles = [c for c in (time_nvcc(KERNEL, 2), time_nvrtc(KERNEL, 2)) if c]
    rows = time_protocol(chk, reps)
    times = [r.median_s for r in rows]
    median, tail = statistics.median(times), p95(times)
    print(f"corpus: {len(rows)} schedules, protocol analysis median {fmt_time(median)}, "
          f"p95 {fmt_time(tail)} (target p95 < 100 ms: {'MET' if tail < 0.1 else 'NOT MET'})")
    for c in compiles:
        print(f"  {c.compiler} ({c.version}) compiles {KERNEL.name} in {fmt_time(c.median_s)}: "
              f"{c.median_s / median:,.0f}x the analysis median, {c.median_s / tail:,.0f}x "
              "its p95")
    if not compiles:
        print("  no nvcc and no NVRTC here: no compile ratio")
    seconds, result = cluster_point(chk, reps)
    verdict = "incomplete" if result.incomplete else "clean"
    print(f"\ncluster of 2 CTAs, 2 consumer warpgroups, 4 stages, TMA multicast: "
          f"{fmt_time(seconds)} for {len(result.runs)} cluster program(s), "
          f"{result.events} events, {result.states} steps, {verdict} "
          f"(target < 2 s with a verdict: "
          f"{'MET' if seconds < 2 and verdict == 'clean' else 'NOT MET'})")
    p_seconds, p_result = cluster_point(chk, reps, persistent=True)
    p_verdict = "incomplete" if p_result.incomplete else "clean"
    longest = max(r.program.events for r in p_result.runs)
    print(f"persistent, same cluster (132 SMs, grid-stride tiles, counter-carried phases): "
          f"{fmt_time(p_seconds)} for {len(p_result.runs)} cluster program(s) (one per class "
          f"of trip counts), {p_result.events} events (longest program {longest}), "
          f"{p_result.states} steps, {p_verdict}; "
          f"{fmt_time(statistics.median(CPU['persistent_cluster2_c2_s4']))} of processor "
          f"time (target < 2 s with a verdict: "
          f"{'MET' if p_seconds < 2 and p_verdict == 'clean' else 'NOT MET'})")
    trips = (4, 64, 4096) if args.quick else (4, 16, 64, 256, 1024, 4096)
    points = scaling(chk, range(1, 9), (1, 2, 3), trips, (1,), reps)
    points += scaling(chk, (4,), (2,), (64,), range(1, 9), reps)
    base = points[0].seconds
    print("\nscaling (raw ring, 1 loader + C math warpgroups; time x the first point):")
    print(f"  {'S':>2} {'C':>2} {'trips':>6} {'tiles':>5} {'time':>9} {'x':>6} {'events':>7} "
          f"{'steps':>7}  verdict")
    for pt in points:
        print(f"  {pt.stages:>2} {pt.consumers:>2} {pt.trips:>6} {pt.tiles:>5} "
              f"{fmt_time(pt.seconds):>9} {pt.seconds / base:>5.1f}x {pt.events:>7} "
              f"{pt.steps:>7}  {pt.verdict}")
    worst = max(points, key=lambda p: p.seconds)
    slow = [p for p in points if p.seconds >= 1.0 or p.verdict != "clean"]
    print(f"\nslowest point: S={worst.stages} C={worst.consumers} trips={worst.trips} "
          f"tiles={worst.tiles}: {fmt_time(worst.seconds)}; points over 1 s or without a "
          f"verdict: {len(slow)} (target 0: {'MET' if not slow else 'NOT MET'})")
    by_trips = {t: statistics.median(p.seconds for p in points if p.trips == t and
                                     p.tiles == 1) for t in trips}
    print("median time by trip count: " + ", ".join(
        f"{t}: {fmt_time(s)} ({s / by_trips[trips[0]]:.1f}x)" for t, s in by_trips.items()))
    if args.json:
        args.json.write_text(json.dumps({
            "corpus": [asdict(r) for r in rows], "median_s": median, "p95_s": tail,
            "compilers": [asdict(c) for c in compiles],
            "cluster_s": seconds, "persistent_cluster_s": p_seconds,
            "scaling": [asdict(p) for p in points]}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
