"""The FA3 bisection (issue 36): which change makes the FlashAttention-3 transcriptions with
two math warpgroups correct on a GPU, measured per math warpgroup.

On an H200 (corpus/measurements/h200-2026-12-04-gpu_check.txt) `attention/fa3_mainloop_d128`,
`fa3_persistent_causal_d128` and `fa3_producer_warp_d128` gave 2-22 % relative error,
intermittently, while the checker, the simulator and compute-sanitizer called them clean.
The review found one unmodelled hand-off: generic reads of a K or V stage released to a
TMA refill without `fence.proxy.async` (axiom A19, docs/checker.md). The lowering now emits
that fence; this harness runs each schedule as four kernels, derived from the one lowered
kernel so that nothing else differs:

- `lowered`: the kernel the lowering emits today (a proxy fence before every K/V release);
- `unfenced`: the same with the lowering's proxy fences removed (what ran on 2026-12-04);
- `synced`: unfenced, with a barrier over the releasing warpgroup before every release
  instead (orders every warp's reads for the generic proxy, not for the async proxy);
- `other-leads`: unfenced, with the warp-scheduler start-up arrive made by math0 on its own
  barrier, as the transcriptions had it before they followed FA3 (`mma_init`: the second
  MMA warpgroup arrives on `WarpSchedulerWG1`).

If A19 is the cause, `lowered` is correct on every launch and `unfenced`, `synced` and
`other-leads` are wrong on some. Each launch draws fresh inputs; the error of the rows each
math warpgroup owns (rows 0-63 and 64-127 of every 128-row query tile) is reported apart.

`python -m cakegov.gpu.fa3 [--repeat N] [--shape S ...] [--variant V ...] [--measurements
DIR] [SCHEDULE ...]` prints one row per schedule, variant and shape and appends the records
to DIR/fa3_bisect.jsonl. Exit 0 when it ran (whatever it found), 2 usage or a schedule
that is not clean, 3 no CUDA device or no compiler (nothing measured).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cakegov import __version__
from cakegov.check.rulebook import Rulebook
from cakegov.corpus.workloads import Workload
from cakegov.lower.build import Prepared, prepare
from cakegov.lower.kernel import (
    LArrive,
    LFence,
    LFor,
    LNamedSync,
    LOp,
    LoweredKernel,
    LRole,
    free_barrier_ids,
    role_barrier_id,
)

SCHEDULES = ("corpus/valid/attention/fa3_mainloop_d128.cake",
             "corpus/valid/attention/fa3_persistent_causal_d128.cake",
             "corpus/valid/attention/fa3_producer_warp_d128.cake")
# the shapes every one of the three failed at on the H200 (M=200,N=328 passed once)
SHAPES = ({"M": 256, "N": 256, "D": 128}, {"M": 1024, "N": 1024, "D": 128})
VARIANTS = ("lowered", "unfenced", "synced", "other-leads")
RELEASES = ("mbarrier_arrive", "pipeline_release")
TILE_ROWS, WARPGROUP_ROWS = 128, 64
RECORDS = "fa3_bisect.jsonl"


class VariantError(Exception):
    """The kernel has no place for the variant's change (not an FA3 transcription)."""


# ---- kernel variants ----------------------------------------------------------------------

def _map_body(body: tuple[LOp, ...], fn: Callable[[LOp], list[LOp]]) -> tuple[LOp, ...]:
    out: list[LOp] = []
    for op in body:
        if isinstance(op, LFor):
            out.append(op.model_copy(update={"body": _map_body(op.body, fn)}))
        else:
            out.extend(fn(op))
    return tuple(out)


def _with_roles(kernel: LoweredKernel, roles: Iterable[LRole]) -> LoweredKernel:
    return kernel.model_copy(update={"roles": tuple(roles)})


def unfenced(kernel: LoweredKernel) -> LoweredKernel:
    """The kernel without the proxy fences the lowering derived (axiom A19)."""
    def drop(op: LOp) -> list[LOp]:
        derived = isinstance(op, LFence) and op.scope == "proxy_async" and op.derived
        return [] if derived else [op]
    return _with_roles(kernel, (r.model_copy(update={"body": _map_body(r.body, drop)})
                                for r in kernel.roles))


def synced(kernel: LoweredKernel) -> LoweredKernel:
    """Unfenced, with `bar.sync` over the releasing role before every release arrive."""
    base = unfenced(kernel)
    named = [b.id for b in base.named_barriers]
    shape = [(r.name, r.warp_stop - r.warp_start) for r in base.roles]
    roles = []
    for r in base.roles:
        warps = r.warp_stop - r.warp_start
        ident = role_barrier_id(named, shape, r.name) if warps > 1 else None
        if ident is None and warps > 1:
            free = free_barrier_ids(named, shape)
            if not free:
                raise VariantError(f"no named barrier is free for role {r.name}")
            ident = free[-1]

        def add(op: LOp, r: LRole = r, ident: int | None = ident, warps: int = warps
                ) -> list[LOp]:
            if not (isinstance(op, LArrive) and op.source in RELEASES) or ident is None:
                return [op]
            sync = LNamedSync(path=op.path, span=op.span, subset=op.subset,
                              barrier=f"role {r.name}", id=ident, threads=32 * warps,
                              wait=True, derived="fa3 bisection: synced")
            return [sync, op]
        roles.append(r.model_copy(update={"body": _map_body(r.body, add)}))
    return _with_roles(base, roles)


def other_leads(kernel: LoweredKernel) -> LoweredKernel:
    """Unfenced, with the start-up arrive on math0's scheduler barrier (`sched0`) moved
    from the start of math1 to the start of math0."""
    base = unfenced(kernel)
    by_name = {r.name: r for r in base.roles}
    if "math0" not in by_name or "math1" not in by_name:
        raise VariantError("no roles math0 and math1")
    math1 = list(by_name["math1"].body)
    at = next((i for i, op in enumerate(math1) if isinstance(op, LNamedSync)
               and op.barrier == "sched0" and not op.wait), None)
    if at is None:
        raise VariantError("math1 makes no start-up arrive on sched0")
    arrive = math1.pop(at)
    math0 = (arrive, *by_name["math0"].body)
    return _with_roles(base, (
        r.model_copy(update={"body": math0}) if r.name == "math0" else
        r.model_copy(update={"body": tuple(math1)}) if r.name == "math1" else r
        for r in base.roles))


TRANSFORMS: dict[str, Callable[[LoweredKernel], LoweredKernel]] = {
    "lowered": lambda k: k, "unfenced": unfenced, "synced": synced, "other-leads": other_leads}


# ---- measuring -----------------------------------------------------------------------------

def warpgroup_errors(out: np.ndarray, ref: np.ndarray) -> tuple[float, float]:
    """Max |out - ref| over the rows of math0 and of math1, relative to max |ref| (the
    workload's tolerance is relative to max |O| too); a non-finite output is infinite."""
    scale = float(np.max(np.abs(ref))) or 1.0
    rows = np.arange(out.shape[0]) % TILE_ROWS // WARPGROUP_ROWS
    diff = np.abs(out.astype(np.float64) - ref)
    diff = np.where(np.isfinite(diff), diff, np.inf)
    return tuple(float(diff[rows == g].max(initial=0.0)) / scale  # type: ignore[return-value]
                 for g in (0, 1))


@dataclasses.dataclass
class Row:
    schedule: str
    variant: str
    sizes: dict[str, int]
    launches: int = 0
    wrong: list[int] = dataclasses.field(default_factory=lambda: [0, 0])
    max_error: list[float] = dataclasses.field(default_factory=lambda: [0.0, 0.0])
    error: str = ""

    def line(self) -> str:
        shape = ",".join(f"{k}={v}" for k, v in sorted(self.sizes.items()))
        if self.error:
            return f"{self.schedule:<48} {self.variant:<12} {shape:<22} {self.error}"
        return (f"{self.schedule:<48} {self.variant:<12} {shape:<22} {self.launches:>3} "
                f"{self.wrong[0]:>6} {self.max_error[0]:>10.3e} {self.wrong[1]:>6} "
                f"{self.max_error[1]:>10.3e}")


HEADER = (f"{'schedule':<48} {'variant':<12} {'shape':<22} {'n':>3} {'wrong0':>6} "
          f"{'maxerr0':>10} {'wrong1':>6} {'maxerr1':>10}")


def bisect(paths: Sequence[Path], variants: Sequence[str], shapes: Sequence[dict[str, int]],
           repeat: int, book: Rulebook, workloads: dict[str, Workload], device: Any,
           compiler: Callable[[Prepared, Rulebook], Any], *, seed: int = 0,
           timeout_s: float = 30.0, emit: Callable[[str], None] = print,
           root: Path | None = None) -> list[Row]:
    """Run every variant of every schedule at every shape `repeat` times on `device`."""
    from cakegov.gpu.data import make_inputs, make_outputs, shape_seed
    from cakegov.gpu.run import launch_config

    rows: list[Row] = []
    emit(HEADER)
    for path in paths:
        prepared = prepare(path, book, workloads)
        name = path.resolve().relative_to(root.resolve()).as_posix() if root else str(path)
        if prepared.kernel is None or prepared.schedule is None:
            raise VariantError(f"{name}: verdict {prepared.result.verdict}; only clean "
                               "schedules run")
        workload = workloads[prepared.schedule.workload]
        tol = workload.tolerance.get(workload.tensors["O"][0], 1e-2)
        for variant in variants:
            kernel = TRANSFORMS[variant](prepared.kernel)
            artifact = compiler(dataclasses.replace(prepared, kernel=kernel), book)
            for index, base in enumerate(shapes):
                sizes = {**base, **prepared.schedule.sizes}
                row = Row(name, variant, sizes)
                rows.append(row)
                try:
                    launch = launch_config(kernel, workload, sizes)
                    loaded = device.load(artifact, launch)
                    for r in range(repeat):
                        inputs = make_inputs(workload, sizes,
                                             shape_seed(seed, index * 1000 + r, sizes))
                        ref = workload.reference(
                            {n: v.astype(np.float64) for n, v in inputs.values.items()},
                            dict(sizes))["O"]
                        outs, _ = device.execute(loaded, launch, inputs.device,
                                                 make_outputs(workload, sizes), timeout_s)
                        errors = warpgroup_errors(np.asarray(outs["O"]), ref)
                        row.launches += 1
                        for g in (0, 1):
                            row.wrong[g] += errors[g] > tol
                            row.max_error[g] = max(row.max_error[g], errors[g])
                except Exception as exc:  # a hung or failed launch is a row, not a stop
                    row.error = f"{type(exc).__name__}: {str(exc)[:120]}"
                emit(row.line())
    return rows


def record(rows: Sequence[Row], path: Path, *, device: str, compiler: str,
           timestamp: str, repeat: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps({
                "kind": "fa3-bisect", "timestamp": timestamp, "engine": __version__,
                "device": device, "compiler": compiler, "schedule": row.schedule,
                "variant": row.variant, "sizes": row.sizes, "repeat": repeat,
                "launches": row.launches, "wrong": {"math0": row.wrong[0],
                                                    "math1": row.wrong[1]},
                "max_error": {"math0": row.max_error[0], "math1": row.max_error[1]},
                "error": row.error}, sort_keys=True) + "\n")


def main(argv: Sequence[str] | None = None, *, find_device: Callable[[], Any] | None = None,
         compiler: Callable[[Prepared, Rulebook], Any] | None = None) -> int:
    from cakegov.corpus.workloads import load_workloads
    from cakegov.gpu.compile import CompilerUnavailable
    from cakegov.gpu.data import DataError, parse_shape
    from cakegov.gpu.device import NoDevice, probe
    from cakegov.gpu.records import utc_now
    from cakegov.gpu.run import compile_artifact
    from cakegov.project import project_root

    ap = argparse.ArgumentParser(prog="python -m cakegov.gpu.fa3", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("schedules", nargs="*", type=Path)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--shape", action="append", default=[])
    ap.add_argument("--variant", action="append", choices=VARIANTS, default=[])
    ap.add_argument("--measurements", type=Path, default=None)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    root = project_root() or Path.cwd()
    if args.repeat < 1:
        print("fa3: --repeat must be at least 1", file=sys.stderr)
        return 2
    try:
        shapes = [parse_shape(s, ("M", "N", "D")) for s in args.shape] or list(SHAPES)
    except DataError as exc:
        print(f"fa3: {exc}", file=sys.stderr)
        return 2
    paths = args.schedules or [root / s for s in SCHEDULES]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        print(f"fa3: no such schedule: {', '.join(missing)}", file=sys.stderr)
        return 2
    book = Rulebook.load(root / "rules")
    workloads = load_workloads(root / "corpus" / "workloads")
    try:
        device = (find_device or probe)()
    except NoDevice as exc:
        print(f"fa3: no CUDA device: {exc}; nothing measured")
        return 3
    compilers: list[str] = []

    def compile_once(prepared: Prepared, rulebook: Rulebook) -> Any:
        artifact = (compiler or compile_artifact)(prepared, rulebook)
        compilers.append(artifact.compiler)
        return artifact

    print(f"fa3 bisection on {device.info.name} (driver "
          f"{device.info.driver or device.info.cuda_driver_version}), engine {__version__}")
    try:
        rows = bisect(paths, args.variant or list(VARIANTS), shapes, args.repeat, book,
                      workloads, device, compile_once, seed=args.seed, root=root)
    except CompilerUnavailable as exc:
        print(f"fa3: no compiler: {exc}; nothing measured")
        return 3
    except VariantError as exc:
        print(f"fa3: {exc}", file=sys.stderr)
        return 2
    finally:
        device.close()
    print(f"compiler: {compilers[0] if compilers else '-'}")
    measurements = args.measurements or root / "corpus" / "measurements"
    record(rows, measurements / RECORDS, device=device.info.name,
           compiler=compilers[0] if compilers else "", timestamp=utc_now(),
           repeat=args.repeat)
    print(f"recorded {len(rows)} row(s) in {measurements / RECORDS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
