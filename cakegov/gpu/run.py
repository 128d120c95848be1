"""`cakegov run`: check, lower, compile, launch, compare and time one schedule on a GPU.

Order of work, each step refusing to go on when the previous one failed:
1. check the schedule with the rulebook; only a `clean` verdict reaches the GPU (exit 1);
2. pick the shapes: the workload's check shapes as the schedule accepts them (tail tiles
   included), or `--shape` (exit 2 on a shape the schedule cannot take);
3. find the device (exit 3 with one line when there is none: nothing is measured);
4. lower and compile the kernel, load it, set its dynamic shared-memory limit;
5. per shape, with a fresh seed: draw inputs, poison outputs, launch twice (fresh poison
   each time), compare with the float64 reference, check the inputs are unchanged, run the
   baseline and compare it too, then time kernel and baseline (warm-up, >= 20 launches,
   buffers rotated past L2, outputs re-poisoned before every launch) and check the outputs
   of every timed launch that was the last to use its buffer set (all of them when the
   rotation has at least as many sets as timed launches; else a sample, always including
   the last launch);
6. append one measurement record per shape (corpus/measurements/<workload>.jsonl).

Exit: 0 every shape correct; 1 rejected, failed to compile or load, or a wrong result;
2 usage or input error; 3 no CUDA device; 101 internal error."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cakegov import __version__
from cakegov.check.findings import (
    EXIT_CLEAN,
    EXIT_INCOMPLETE,
    EXIT_REJECTED,
    EXIT_USAGE,
    FileResult,
)
from cakegov.check.rulebook import Rulebook
from cakegov.corpus.workloads import Workload
from cakegov.gpu.baselines import Baseline, baseline_for
from cakegov.gpu.compare import Checks, Comparison, compare_outputs
from cakegov.gpu.data import (
    DataError,
    Inputs,
    draw_seed,
    format_shape,
    headline_shapes,
    make_inputs,
    make_outputs,
    select_shapes,
    shape_seed,
)
from cakegov.gpu.device import (
    Device,
    KernelArtifact,
    KernelError,
    KernelTimeout,
    LaunchConfig,
    NoDevice,
    Timing,
    probe,
)
from cakegov.gpu.peaks import throughput
from cakegov.gpu.records import (
    MIN_REPEAT,
    RECORD_SCHEMA,
    TimingStats,
    append_record,
    finite_or_none,
    measurement_path,
    timing_stats,
    utc_now,
)
from cakegov.gpu.tensormap import TensorMapError, specs
from cakegov.ir.expr import Env, EvalError, evaluate
from cakegov.lower.build import Prepared, prepare
from cakegov.lower.derive import LoweringError
from cakegov.lower.kernel import LoweredKernel

Compiler = Callable[[Prepared, Rulebook], KernelArtifact]
DEFAULT_REPEAT = 30
DEFAULT_WARMUP = 5
DEFAULT_TIMEOUT_S = 30.0


class CompileFailed(Exception):
    """The compiler refused the emitted kernel, or reported a blocking finding."""


def compile_artifact(prepared: Prepared, book: Rulebook) -> KernelArtifact:
    """Emit CUDA C++ for the lowered kernel and compile it to a cubin for its target with
    cakegov/gpu/compile.py: NVRTC when the wheels are installed, else nvcc. Raises
    CompilerUnavailable when neither exists, CompileFailed on an error or a blocking
    compile finding (e.g. registers over what the launch allows)."""
    from cakegov.gpu.compile import (
        CompilerUnavailable,
        compile_cuda,
        nvcc_path,
        nvrtc_available,
    )
    from cakegov.gpu.diagnose import compile_findings
    from cakegov.lower.emit import EmitError, emit_cuda

    kernel = prepared.kernel
    assert kernel is not None
    try:
        emitted = emit_cuda(kernel, book.primitives, verifier_digest=book.digest())
    except EmitError as exc:
        raise CompileFailed(f"cannot emit CUDA: {exc}") from None
    if nvrtc_available():
        compiler = "nvrtc"
    elif nvcc_path() is not None:
        compiler = "nvcc"
    else:
        raise CompilerUnavailable("neither NVRTC (cuda-bindings, nvidia-cuda-nvrtc) nor nvcc "
                                  "is installed")
    out = compile_cuda(emitted.source, kernel.target, compiler, name=f"{kernel.name}.cu")
    findings = compile_findings(out, emitted, prepared.result.file, prepared.schedule)
    blocking = [f for f in findings if f.severity == "blocking"]
    if blocking or out.cubin is None:
        reasons = [f"{f.code} {f.message}" for f in blocking][:3] or [
            out.log.strip().splitlines()[-1] if out.log.strip() else "no cubin"]
        raise CompileFailed(f"{out.version} for {out.arch}: " + "; ".join(reasons))
    stats = out.parsed.stats
    return KernelArtifact(
        name=emitted.entry, cubin=out.cubin, compiler=f"{out.version} {out.arch}",
        options=tuple(out.options),
        details={"registers": stats.registers, "spill_stores": stats.spill_stores,
                 "spill_loads": stats.spill_loads, "barriers": stats.barriers,
                 "launch_registers": kernel.launch_regs,
                 "findings": [f"{f.code} {f.message}" for f in findings]},
    )


@dataclass(frozen=True)
class RunOptions:
    shapes: tuple[dict[str, int], ...] = ()
    repeat: int = DEFAULT_REPEAT
    warmup: int = DEFAULT_WARMUP
    record: bool = True
    measurements: Path | None = None
    seed: int | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    headline: bool = False  # also run the workload's headline shapes the schedule accepts
    correctness_only: bool = False  # the two poisoned launches, no baseline, no timing


@dataclass
class ShapeResult:
    """Everything measured for one shape."""

    sizes: dict[str, int]
    seed: int
    launch: LaunchConfig | None = None
    comparisons: list[Comparison] = field(default_factory=list)
    timing: Timing | None = None
    stats: TimingStats | None = None
    baseline: Baseline | None = None
    baseline_comparisons: list[Comparison] = field(default_factory=list)
    baseline_timing: Timing | None = None
    baseline_stats: TimingStats | None = None
    error: str | None = None
    outputs: tuple[str, ...] = ()  # the workload's output tensors (inputs are checked too)
    timed_checked: tuple[int, ...] = ()  # timed launches whose outputs were compared

    @property
    def passed(self) -> bool:
        return self.error is None and bool(self.comparisons) and all(
            c.passed for c in self.comparisons)

    @property
    def max_error(self) -> float | None:
        """The largest error over the workload's outputs."""
        errs = [c.max_error for c in self.comparisons if c.tensor in self.outputs]
        return max(errs) if errs else None

    @property
    def tolerance(self) -> float | None:
        tols = [c.tolerance for c in self.comparisons if c.tensor in self.outputs]
        return min(tols) if tols else None


@dataclass
class RunOutcome:
    """What `cakegov run` did: the exit code, lines for the user, per-shape results."""

    exit_code: int
    lines: list[str] = field(default_factory=list)
    results: list[ShapeResult] = field(default_factory=list)
    record_path: Path | None = None
    run_id: str = ""
    hung: bool = False  # a kernel never finished: the process must exit without cleanup


# ---- pure pieces ---------------------------------------------------------------------


def launch_config(kernel: LoweredKernel, workload: Workload, sizes: Mapping[str, int]
                  ) -> LaunchConfig:
    """Grid from the kernel's grid expressions under `sizes`; block (threads, 1, 1);
    dynamic shared memory; argument order of the kernel ABI, tensor maps included."""
    bad = [f"{n}={v}" for n, v in sizes.items() if v <= 0]
    if bad:
        raise DataError(f"sizes must be positive ({', '.join(bad)}): a zero size passes "
                        "every divisibility and leaves loops with nothing to wait for")
    env = Env(sizes=dict(sizes))
    try:
        dims = [evaluate(e, env) for e in kernel.grid]
    except EvalError as exc:
        raise DataError(f"grid cannot be evaluated at {format_shape(sizes)}: {exc}") from None
    if not 1 <= len(dims) <= 3:
        raise DataError(f"grid has {len(dims)} dimensions; CUDA allows 1 to 3")
    grid = (*dims, *([1] * (3 - len(dims))))
    limits = (2**31 - 1, 65535, 65535)
    for axis, (n, limit) in enumerate(zip(grid, limits, strict=True)):
        if not 1 <= n <= limit:
            raise DataError(f"grid dimension {axis} is {n} at {format_shape(sizes)}; CUDA "
                            f"allows 1..{limit}")
    cluster = (*kernel.cluster, *([1] * (3 - len(kernel.cluster))))
    for axis, (n, c) in enumerate(zip(grid, cluster, strict=True)):
        if n % c:
            raise DataError(f"grid dimension {axis} ({n}) is not a multiple of the cluster "
                            f"dimension {c}")
    try:
        maps = specs(kernel, sizes)
    except TensorMapError as exc:
        raise DataError(str(exc)) from None
    return LaunchConfig(
        grid=(int(grid[0]), int(grid[1]), int(grid[2])),
        block=(kernel.threads, 1, 1),
        smem_bytes=kernel.smem_bytes,
        tensors=tuple(workload.tensors),
        sizes=tuple(int(sizes[s]) for s in workload.sizes),
        tensor_maps=maps,
        cluster_nonportable=kernel.cluster_nonportable,
    )


def inputs_unchanged(before: Mapping[str, np.ndarray], after: Mapping[str, np.ndarray]
                     ) -> list[Comparison]:
    """A failing comparison for every input the kernel overwrote."""
    out = []
    for name, arr in before.items():
        got = after.get(name)
        if got is None or got.shape != arr.shape or not np.array_equal(
                got.view(np.uint8), np.ascontiguousarray(arr).view(np.uint8)):
            out.append(Comparison(name, str(arr.dtype), False, float("inf"), 0.0,
                                  f"the kernel modified its input {name}"))
    return out


def _label(prefix: str, comparisons: Sequence[Comparison]) -> list[Comparison]:
    return [Comparison(f"{c.tensor}", c.dtype, c.passed, c.max_error, c.tolerance,
                       f"{prefix}: {c.reason}", c.details) for c in comparisons]


def _stats_json(timing: Timing | None, stats: TimingStats | None) -> dict[str, Any] | None:
    if timing is None or stats is None:
        return None
    per_iter = timing.wall_ms / max(stats.n, 1)
    return {**stats.to_json(), "warmup": timing.warmup,
            "wall_ms_per_launch": per_iter, "rotation": timing.rotation.to_json()}


def build_record(*, run_id: str, timestamp: str, schedule_file: str, result: FileResult,
                 verifier: str, workload: Workload, device: Device, artifact: KernelArtifact,
                 attributes: Mapping[str, int], shape: ShapeResult, repeat: int
                 ) -> dict[str, Any]:
    """One measurement record (JSON-safe: non-finite numbers become null)."""
    base = shape.baseline
    return {
        "schema": RECORD_SCHEMA,
        "run_id": run_id,
        "timestamp": timestamp,
        "engine_version": __version__,
        "verifier_digest": verifier,
        "schedule": {"file": schedule_file, "name": result.schedule, "sha256": result.sha256,
                     "target": result.target},
        "workload": workload.name,
        "workload_sha256": workload.sha256,
        "shape": dict(shape.sizes),
        "seed": shape.seed,
        "gpu": device.info.to_json(),
        "kernel": {"artifact": artifact.form, "compiler": artifact.compiler,
                   "entry": artifact.name, "attributes": dict(attributes),
                   "compile": dict(artifact.details),
                   "launch": shape.launch.to_json() if shape.launch else None},
        "passed": shape.passed,
        "error": shape.error,
        "max_error": finite_or_none(shape.max_error),
        "tolerance": finite_or_none(shape.tolerance),
        "comparisons": [_json_comparison(c) for c in shape.comparisons],
        "repeat": repeat,
        "times_ms": _stats_json(shape.timing, shape.stats),
        "timed_outputs_checked": [i + 1 for i in shape.timed_checked],
        "throughput": throughput(workload.name, shape.sizes,
                                 shape.stats.median_ms if shape.stats else None,
                                 device.info.name),
        "baseline": None if base is None else {
            "name": base.name,
            "description": base.description,
            "passed": bool(shape.baseline_comparisons) and all(
                c.passed for c in shape.baseline_comparisons),
            "max_error": finite_or_none(max((c.max_error for c in shape.baseline_comparisons),
                                            default=None)),
            "times_ms": _stats_json(shape.baseline_timing, shape.baseline_stats),
            "throughput": throughput(workload.name, shape.sizes,
                                     shape.baseline_stats.median_ms
                                     if shape.baseline_stats else None, device.info.name),
        },
    }


def _json_comparison(c: Comparison) -> dict[str, Any]:
    data = c.to_json()
    data["max_error"] = finite_or_none(c.max_error)
    data["tolerance"] = finite_or_none(c.tolerance)
    data["details"] = {k: (finite_or_none(v) if isinstance(v, float) else v)
                       for k, v in c.details.items()}
    return data


def summary_line(shape: ShapeResult) -> str:
    """One line per shape for the terminal."""
    head = f"{format_shape(shape.sizes)} (seed {shape.seed}):"
    if shape.error is not None:
        return f"{head} FAILED: {shape.error}"
    if not shape.passed:
        bad = next(c for c in shape.comparisons if not c.passed)
        return f"{head} WRONG {bad.tensor}: {bad.reason}"
    text = f"{head} correct (max error {shape.max_error:.2e} <= {shape.tolerance:.1e})"
    if shape.stats is not None:
        text += f"; kernel {shape.stats.median_ms:.4f} ms (p10 {shape.stats.p10_ms:.4f}, " \
                f"p90 {shape.stats.p90_ms:.4f}, n={shape.stats.n})"
    if shape.baseline is not None and shape.baseline_stats is not None:
        text += f"; {shape.baseline.name} {shape.baseline_stats.median_ms:.4f} ms"
        if shape.stats is not None and shape.baseline_stats.median_ms > 0:
            ratio = shape.stats.median_ms / shape.baseline_stats.median_ms
            text += f"; kernel/baseline {ratio:.2f}"
    return text


# ---- one shape -----------------------------------------------------------------------


def run_shape(device: Device, kernel: Any, launch: LaunchConfig, workload: Workload,
              inputs: Inputs, baseline: Baseline | None, options: RunOptions) -> ShapeResult:
    """Correctness (two poisoned launches), baseline, timing, post-timing check."""
    shape = ShapeResult(sizes=dict(inputs.sizes), seed=inputs.seed, launch=launch,
                        baseline=baseline, outputs=tuple(workload.outputs))
    reference = workload.reference(
        {n: v.astype(np.float64) if v.dtype.kind == "f" else v
         for n, v in inputs.values.items()}, dict(inputs.sizes))
    checks = Checks(workload, inputs.values)  # bounds and distances, once per shape
    for attempt in (1, 2):
        outs, ins_after = device.execute(kernel, launch, inputs.device,
                                         make_outputs(workload, inputs.sizes),
                                         options.timeout_s)
        found = compare_outputs(workload, outs, reference, inputs.values, checks)
        found += inputs_unchanged(inputs.device, ins_after)
        shape.comparisons = found if attempt == 1 else _merge(shape.comparisons, found)
        if not shape.passed:
            if attempt == 2:
                shape.comparisons = _label("second launch", shape.comparisons)
            return shape
    if options.correctness_only:  # e.g. under compute-sanitizer, where timing means nothing
        return shape
    if baseline is not None:
        arrays = baseline.prepare(inputs.values)
        base_out = device.execute_baseline(baseline, arrays, inputs.sizes)
        shape.baseline_comparisons = compare_outputs(workload, base_out, reference,
                                                     inputs.values, checks)
    shape.timing = device.time_kernel(kernel, launch, inputs.device,
                                      make_outputs(workload, inputs.sizes),
                                      options.warmup, options.repeat)
    shape.stats = timing_stats(shape.timing.samples_ms)
    sampled = shape.timing.sampled_outputs or {options.repeat - 1: shape.timing.last_outputs}
    shape.timed_checked = tuple(sampled)
    for index, outs in sampled.items():
        after = compare_outputs(workload, outs, reference, inputs.values, checks)
        if not all(c.passed for c in after):
            shape.comparisons = _label(f"timed launch {index + 1} of {options.repeat}", after)
            return shape
    if baseline is not None:
        shape.baseline_timing = device.time_baseline(baseline, baseline.prepare(inputs.values),
                                                     inputs.sizes, options.warmup,
                                                     options.repeat)
        shape.baseline_stats = timing_stats(shape.baseline_timing.samples_ms)
    return shape


def _merge(first: list[Comparison], second: list[Comparison]) -> list[Comparison]:
    """Per tensor, the worse of two launches' comparisons."""
    by_tensor = {c.tensor: c for c in first}
    out = []
    for c in second:
        prev = by_tensor.get(c.tensor)
        if prev is None or (c.passed, -c.max_error) < (prev.passed, -prev.max_error):
            out.append(c)
        else:
            out.append(prev)
    return out


# ---- the command ---------------------------------------------------------------------


def _relative(path: Path, root: Path | None) -> str:
    if root is not None:
        try:
            return path.resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            pass
    return str(path)


def run_file(path: Path, options: RunOptions, book: Rulebook, workloads: dict[str, Workload],
             *, root: Path | None = None, find_device: Callable[[], Device] | None = None,
             compiler: Compiler | None = None) -> RunOutcome:
    """`cakegov run FILE`: see the module docstring for the steps and exit codes."""
    if options.repeat < MIN_REPEAT:
        return RunOutcome(EXIT_USAGE, [f"error: --repeat must be at least {MIN_REPEAT} "
                                       "(the median of fewer launches is not reported)"])
    try:
        prepared = prepare(path, book, workloads)
    except LoweringError as exc:
        return RunOutcome(EXIT_REJECTED, [f"{path}: cannot lower: {exc}"])
    result = prepared.result
    if prepared.kernel is None or prepared.schedule is None:
        lines = [f"{path}: verdict {result.verdict}; only clean schedules run on a GPU"]
        lines += [f"  {f.code} line {f.span.line if f.span else '?'}: {f.message}"
                  for f in result.findings if f.severity == "blocking"][:10]
        lines += [f"  incomplete: {reason}" for reason in result.incomplete_reasons][:5]
        code = EXIT_USAGE if result.verdict == "error" else EXIT_REJECTED
        return RunOutcome(code, lines)
    workload = workloads[prepared.schedule.workload]
    schedule = prepared.schedule
    try:
        shapes = select_shapes(workload, schedule.sizes, schedule.divisible, options.shapes)
    except DataError as exc:
        return RunOutcome(EXIT_USAGE, [f"error: {exc}"])
    notes: list[str] = []
    if options.headline:
        extra, notes = headline_shapes(workload, schedule.sizes, schedule.divisible)
        shapes += [s for s in extra if s not in shapes]

    try:
        device = (find_device or probe)()
    except NoDevice as exc:
        return RunOutcome(EXIT_INCOMPLETE, [f"no CUDA device: {exc}; nothing measured"])
    try:
        outcome = _run_on_device(path, options, book, workload, prepared, shapes, device,
                                 root, compiler or compile_artifact)
        outcome.lines[1:1] = [f"  {note}" for note in notes]
        return outcome
    finally:
        device.close()


def _run_on_device(path: Path, options: RunOptions, book: Rulebook, workload: Workload,
                   prepared: Prepared, shapes: list[dict[str, int]], device: Device,
                   root: Path | None, compiler: Compiler) -> RunOutcome:
    from cakegov.gpu.compile import CompilerUnavailable

    kernel, result = prepared.kernel, prepared.result
    assert kernel is not None
    try:
        artifact = compiler(prepared, book)
    except CompilerUnavailable as exc:
        return RunOutcome(EXIT_INCOMPLETE, [f"no compiler: {exc}; nothing measured"])
    except Exception as exc:
        return RunOutcome(EXIT_REJECTED, [f"{path}: compile failed: {exc}"])

    run_seed = options.seed if options.seed is not None else draw_seed()
    outcome = RunOutcome(EXIT_CLEAN, run_id=uuid.uuid4().hex)
    outcome.lines.append(f"{path}: {kernel.name} on {device.info.name} "
                         f"(driver {device.info.driver or device.info.cuda_driver_version}, "
                         f"cupy {device.info.cupy_version}); run seed {run_seed}")
    if options.record:
        directory = options.measurements or (root or Path.cwd()) / "corpus" / "measurements"
        outcome.record_path = measurement_path(directory, workload.name)
    baseline = baseline_for(workload)
    loaded: Any = None
    attributes: dict[str, int] = {}
    for index, sizes in enumerate(shapes):
        shape = ShapeResult(sizes=dict(sizes), seed=shape_seed(run_seed, index, sizes),
                            baseline=baseline, outputs=tuple(workload.outputs))
        try:
            shape.launch = launch_config(kernel, workload, sizes)
            if loaded is None:
                loaded = device.load(artifact, shape.launch)
                attributes = device.attributes(loaded)
            inputs = make_inputs(workload, sizes, shape.seed)
            shape = run_shape(device, loaded, shape.launch, workload, inputs, baseline,
                              options)
        except KernelTimeout as exc:
            shape.error, outcome.hung, stop = str(exc), True, True
        except TensorMapError as exc:  # nothing was launched: the next shape may encode
            shape.error, stop = str(exc), False
        except KernelError as exc:  # the context may be gone: later shapes would only
            shape.error, stop = str(exc), True  # report the same failure
        except DataError as exc:
            shape.error, stop = str(exc), False
        else:
            stop = False
        outcome.results.append(shape)
        outcome.lines.append("  " + summary_line(shape))
        if outcome.record_path is not None:
            append_record(outcome.record_path, build_record(
                run_id=outcome.run_id, timestamp=utc_now(),
                schedule_file=_relative(path, root), result=result,
                verifier=book.digest(), workload=workload, device=device, artifact=artifact,
                attributes=attributes, shape=shape, repeat=options.repeat))
        if stop:
            break
    if outcome.record_path is not None:
        outcome.lines.append(f"recorded {len(outcome.results)} measurement(s) in "
                             f"{_relative(outcome.record_path, root)} (run {outcome.run_id})")
    if not all(r.passed for r in outcome.results) or len(outcome.results) < len(shapes):
        outcome.exit_code = EXIT_REJECTED
    return outcome
