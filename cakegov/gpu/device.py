"""The device the runner launches kernels on: a small interface, and its CuPy implementation.

The runner (cakegov/gpu/run.py) talks to a `Device` only: load a compiled kernel, execute
it once on given host buffers, time it over rotated buffer copies, and the same two for a
baseline. Tests substitute a fake device that computes outputs with numpy; `probe()` returns
the CuPy device or raises `NoDevice` with the reason, which the runner turns into exit 3."""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from cakegov.gpu.baselines import Baseline
from cakegov.gpu.records import Rotation, rotation_copies
from cakegov.gpu.tensormap import TensorMapError, TensorMapSpec, encode

STATIC_SMEM_LIMIT = 48 * 1024  # above this a kernel must opt in to dynamic shared memory
# CUfunction_attribute CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED (cuda.h, CUDA 12+)
NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14
POLL_S = 0.0005
TIMED_LOOP_TIMEOUT_S = 300.0  # a timed series that takes longer counts as hung


class NoDevice(Exception):
    """No usable CUDA device: CuPy missing, no driver, or no GPU."""


class KernelError(Exception):
    """Loading or launching the kernel failed; the device context may be unusable."""


class KernelTimeout(KernelError):
    """The kernel did not finish in time (likely a deadlock); the process must exit."""


@dataclass(frozen=True)
class DeviceInfo:
    name: str
    compute_capability: str
    cuda_driver_version: int  # cudaDriverGetVersion, e.g. 13000
    cuda_runtime_version: int  # cudaRuntimeGetVersion of the CuPy build
    driver: str | None  # NVIDIA driver version from NVML, where available
    cupy_version: str
    l2_bytes: int
    memory_bytes: int
    smem_optin_bytes: int
    sm_count: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class KernelArtifact:
    """A compiled kernel: a cubin, or CUDA C++ that CuPy's NVRTC compiles on load."""

    name: str  # extern "C" entry point
    cubin: bytes | None = None
    source: str | None = None
    options: tuple[str, ...] = ()
    compiler: str = ""  # how it was built, for the record
    details: dict[str, Any] = field(default_factory=dict)  # compiler statistics

    @property
    def form(self) -> str:
        return "cubin" if self.cubin is not None else "source"


@dataclass(frozen=True)
class LaunchConfig:
    """One launch under the kernel ABI: pointers in the workload's TENSORS order, then one
    `int` per workload size in SIZES order, then one `CUtensorMap` per tensor map (encoded
    for the buffers of each launch: cakegov/gpu/tensormap.py)."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem_bytes: int
    tensors: tuple[str, ...]
    sizes: tuple[int, ...]
    tensor_maps: tuple[TensorMapSpec, ...] = ()
    cluster_nonportable: bool = False  # set NON_PORTABLE_CLUSTER_SIZE_ALLOWED before launch

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"grid": list(self.grid), "block": list(self.block),
                               "smem_bytes": self.smem_bytes}
        if self.cluster_nonportable:
            out["cluster_nonportable"] = True
        if self.tensor_maps:
            out["tensor_maps"] = [t.to_json() for t in self.tensor_maps]
        return out


@dataclass(frozen=True)
class Timing:
    """A timed series: per-launch event times, the host wall time of the whole loop
    (including the final synchronisation: work the events missed shows up here), the
    warm-up count, the buffer rotation, and the outputs of the last timed launch."""

    samples_ms: tuple[float, ...]
    wall_ms: float
    warmup: int
    rotation: Rotation
    last_outputs: dict[str, np.ndarray] = field(default_factory=dict)
    # The outputs of every timed launch that was the last to use its rotation set, keyed
    # by timed-launch index (0 = first timed launch). Outputs are re-poisoned before every
    # launch, so each holds exactly what that launch wrote: a launch that failed or wrote
    # only part of its output shows as poison, never as an earlier launch's result.
    sampled_outputs: dict[int, dict[str, np.ndarray]] = field(default_factory=dict)


class Device(Protocol):
    info: DeviceInfo

    def load(self, artifact: KernelArtifact, launch: LaunchConfig) -> Any: ...

    def attributes(self, kernel: Any) -> dict[str, int]: ...

    def execute(self, kernel: Any, launch: LaunchConfig, inputs: Mapping[str, np.ndarray],
                outputs: Mapping[str, np.ndarray], timeout_s: float
                ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Upload, launch once, wait (KernelTimeout past `timeout_s`), and return the
        outputs and the inputs as the device holds them afterwards."""
        ...

    def time_kernel(self, kernel: Any, launch: LaunchConfig, inputs: Mapping[str, np.ndarray],
                    outputs: Mapping[str, np.ndarray], warmup: int, repeat: int) -> Timing: ...

    def execute_baseline(self, baseline: Baseline, arrays: Mapping[str, np.ndarray],
                         sizes: Mapping[str, int]) -> dict[str, np.ndarray]: ...

    def time_baseline(self, baseline: Baseline, arrays: Mapping[str, np.ndarray],
                      sizes: Mapping[str, int], warmup: int, repeat: int) -> Timing: ...

    def close(self) -> None: ...


def probe() -> CupyDevice:
    """The first CUDA device through CuPy, or NoDevice with a one-phrase reason."""
    try:
        import cupy
    except Exception as exc:  # ImportError, or CuPy failing to find CUDA libraries
        raise NoDevice(f"CuPy is not importable ({_short(exc)})") from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        raise NoDevice(f"CUDA is not usable ({_short(exc)})") from None
    if count < 1:
        raise NoDevice("CuPy sees no CUDA device")
    try:
        return CupyDevice(cupy)
    except Exception as exc:
        raise NoDevice(f"CUDA device could not be opened ({_short(exc)})") from None


@cache
def cuda_available() -> bool:
    """Whether CuPy and a CUDA device are present (for skipping `gpu` tests)."""
    try:
        probe()
    except NoDevice:
        return False
    return True


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _nvml_driver() -> str | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        version = pynvml.nvmlSystemGetDriverVersion()
        return version.decode() if isinstance(version, bytes) else str(version)
    except Exception:
        return None


class CupyDevice:
    """A CUDA device through CuPy. All work runs on one stream the device owns."""

    def __init__(self, cupy: Any, driver: Any = None):
        self.cp = cupy
        self._driver = driver  # the CUDA driver API bindings (None: cuda.bindings.driver)
        rt = cupy.cuda.runtime
        dev = rt.getDevice()
        props = rt.getDeviceProperties(dev)
        name = props["name"]
        _free, total = rt.memGetInfo()
        self.info = DeviceInfo(
            name=name.decode() if isinstance(name, bytes) else str(name),
            compute_capability=f"{props['major']}.{props['minor']}",
            cuda_driver_version=int(rt.driverGetVersion()),
            cuda_runtime_version=int(rt.runtimeGetVersion()),
            driver=_nvml_driver(),
            cupy_version=str(cupy.__version__),
            l2_bytes=int(props["l2CacheSize"]),
            memory_bytes=int(total),
            smem_optin_bytes=int(props.get("sharedMemPerBlockOptin", STATIC_SMEM_LIMIT)),
            sm_count=int(props["multiProcessorCount"]),
        )
        self.stream = cupy.cuda.Stream(non_blocking=False)
        self._tmp = tempfile.TemporaryDirectory(prefix="cakegov-cubin-")
        self._modules: list[Any] = []  # keep loaded modules alive
        self._hung = False  # a kernel never finished: freeing memory would block forever
        self._maps: dict[tuple[TensorMapSpec, int], np.ndarray] = {}  # encoded per buffer

    # ---- kernels ---------------------------------------------------------------------

    def load(self, artifact: KernelArtifact, launch: LaunchConfig) -> Any:
        cp = self.cp
        if launch.smem_bytes > self.info.smem_optin_bytes:
            raise KernelError(f"kernel needs {launch.smem_bytes} B of shared memory; "
                              f"{self.info.name} allows {self.info.smem_optin_bytes} B per block")
        try:
            if artifact.cubin is not None:
                path = Path(self._tmp.name) / f"{artifact.name}-{len(self._modules)}.cubin"
                path.write_bytes(artifact.cubin)
                module = cp.RawModule(path=str(path))
            elif artifact.source is not None:
                module = cp.RawModule(code=artifact.source, options=artifact.options,
                                      backend="nvrtc")
            else:
                raise KernelError("artifact holds neither a cubin nor source")
            fn = module.get_function(artifact.name)
            if launch.smem_bytes > STATIC_SMEM_LIMIT:
                fn.max_dynamic_shared_size_bytes = launch.smem_bytes
            if launch.cluster_nonportable:  # cuda.h: a cluster above the portable size
                cp.cuda.driver.funcSetAttribute(
                    fn.ptr, NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)
            threads = launch.block[0] * launch.block[1] * launch.block[2]
            if fn.max_threads_per_block < threads:
                raise KernelError(f"kernel can run at most {fn.max_threads_per_block} threads "
                                  f"per block ({fn.num_regs} registers/thread); the launch "
                                  f"asks {threads}")
        except KernelError:
            raise
        except Exception as exc:
            raise KernelError(f"loading {artifact.name} failed: {_short(exc)}") from None
        self._modules.append(module)
        return fn

    def attributes(self, kernel: Any) -> dict[str, int]:
        out: dict[str, int] = {}
        for attr in ("num_regs", "local_size_bytes", "shared_size_bytes",
                     "max_threads_per_block", "max_dynamic_shared_size_bytes"):
            with contextlib.suppress(Exception):
                out[attr] = int(getattr(kernel, attr))
        return out

    def _args(self, launch: LaunchConfig, arrays: Mapping[str, Any]) -> tuple[Any, ...]:
        for value in launch.sizes:
            if not 0 < value < 2**31:
                raise KernelError(f"size {value} does not fit the kernel's int parameters")
        return (*(arrays[name] for name in launch.tensors),
                *(np.int32(v) for v in launch.sizes),
                *(self._tensor_map(spec, arrays[spec.tensor]) for spec in launch.tensor_maps))

    def _tensor_map(self, spec: TensorMapSpec, array: Any) -> np.ndarray:
        """The encoded tensor map of `spec` over `array` (cached per device address: the
        timed loop never encodes)."""
        key = (spec, int(array.data.ptr))
        if key not in self._maps:
            self._maps[key] = encode(spec, key[1], self._driver)
        return self._maps[key]

    def _launch(self, kernel: Any, launch: LaunchConfig, arrays: Mapping[str, Any]) -> None:
        kernel(launch.grid, launch.block, self._args(launch, arrays),
               shared_mem=launch.smem_bytes)

    def _wait(self, event: Any, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not event.done:
            if time.monotonic() > deadline:
                self._hung = True
                raise KernelTimeout(f"kernel did not finish within {timeout_s:g} s "
                                    "(deadlock or runaway loop)")
            time.sleep(POLL_S)
        event.synchronize()  # raises the launch's error, if any

    def execute(self, kernel: Any, launch: LaunchConfig, inputs: Mapping[str, np.ndarray],
                outputs: Mapping[str, np.ndarray], timeout_s: float
                ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        cp = self.cp
        try:
            with self.stream:
                d = {n: cp.asarray(a) for n, a in {**inputs, **outputs}.items()}
                self.stream.synchronize()
                self._launch(kernel, launch, d)
                done = cp.cuda.Event()
                done.record(self.stream)
            self._wait(done, timeout_s)
            outs = {n: cp.asnumpy(d[n], stream=self.stream) for n in outputs}
            ins = {n: cp.asnumpy(d[n], stream=self.stream) for n in inputs}
            self.stream.synchronize()
        except (KernelError, TensorMapError):
            raise
        except Exception as exc:
            raise KernelError(f"launch failed: {_short(exc)}") from None
        return outs, ins

    def time_kernel(self, kernel: Any, launch: LaunchConfig, inputs: Mapping[str, np.ndarray],
                    outputs: Mapping[str, np.ndarray], warmup: int, repeat: int) -> Timing:
        """Time `repeat` launches after `warmup`, re-poisoning the outputs of the rotation
        set before every launch (outside the timed events), and bring back the outputs of
        each set's last timed launch for checking (`Timing.sampled_outputs`)."""
        cp = self.cp
        rotation = self._rotation(_set_bytes(inputs, outputs))
        sets: list[dict[str, Any]] = []
        try:
            with self.stream:
                sets = self._rotation_sets({**inputs, **outputs}, rotation)
                poison = {n: cp.asarray(a) for n, a in outputs.items()}

            def repoison(s: dict[str, Any]) -> None:
                for n, p in poison.items():
                    s[n][...] = p

            for s in sets:  # encode every set's tensor maps before the clock starts
                self._args(launch, s)

            timing = self._timed(lambda s: self._launch(kernel, launch, s), sets,
                                 warmup, repeat, rotation, before=repoison)
            sampled: dict[int, dict[str, np.ndarray]] = {}
            for j in range(len(sets)):
                uses = [t for t in range(warmup + repeat) if t % len(sets) == j]
                if uses and uses[-1] >= warmup:
                    sampled[uses[-1] - warmup] = {
                        n: cp.asnumpy(sets[j][n], stream=self.stream) for n in outputs}
            outs = sampled[repeat - 1]
            self.stream.synchronize()
        except (KernelError, TensorMapError):
            raise
        except Exception as exc:
            raise KernelError(f"timed launch failed: {_short(exc)}") from None
        finally:
            sets.clear()
            self._release()
        return Timing(timing.samples_ms, timing.wall_ms, warmup, rotation, outs,
                      dict(sorted(sampled.items())))

    # ---- baselines -------------------------------------------------------------------

    def execute_baseline(self, baseline: Baseline, arrays: Mapping[str, np.ndarray],
                         sizes: Mapping[str, int]) -> dict[str, np.ndarray]:
        cp = self.cp
        with self.stream:
            d = {n: cp.asarray(a) for n, a in arrays.items()}
            out = baseline.fn(cp, d, sizes)
            host = {n: cp.asnumpy(v, stream=self.stream) for n, v in out.items()}
        self.stream.synchronize()
        self._release()
        return host

    def time_baseline(self, baseline: Baseline, arrays: Mapping[str, np.ndarray],
                      sizes: Mapping[str, int], warmup: int, repeat: int) -> Timing:
        out_bytes = sum(a.nbytes for a in self.execute_baseline(baseline, arrays,
                                                                sizes).values())
        rotation = self._rotation(sum(a.nbytes for a in arrays.values()) + out_bytes)
        sets: list[dict[str, Any]] = []
        try:
            with self.stream:
                sets = self._rotation_sets(arrays, rotation)
            timing = self._timed(lambda s: baseline.fn(self.cp, s, sizes), sets,
                                 warmup, repeat, rotation)
        finally:
            sets.clear()
            self._release()
        return timing

    # ---- shared ----------------------------------------------------------------------

    def _rotation(self, set_bytes: int) -> Rotation:
        free, _ = self.cp.cuda.runtime.memGetInfo()
        return rotation_copies(set_bytes, self.info.l2_bytes, free_bytes=int(free))

    def _rotation_sets(self, arrays: Mapping[str, np.ndarray], rotation: Rotation
                       ) -> list[dict[str, Any]]:
        first = {n: self.cp.asarray(a) for n, a in arrays.items()}
        return [first] + [{n: a.copy() for n, a in first.items()}
                          for _ in range(rotation.copies - 1)]

    def _timed(self, step: Callable[[dict[str, Any]], Any], sets: Sequence[dict[str, Any]],
               warmup: int, repeat: int, rotation: Rotation,
               before: Callable[[dict[str, Any]], Any] | None = None) -> Timing:
        """`before` (re-poisoning) runs on the stream ahead of each launch and outside its
        event pair: its time is not in the samples (it is in the wall time)."""
        cp = self.cp
        with self.stream:
            for i in range(warmup):
                if before is not None:
                    before(sets[i % len(sets)])
                step(sets[i % len(sets)])
            self.stream.synchronize()
            cp.cuda.Device().synchronize()  # nothing else in flight when the clock starts
            starts = [cp.cuda.Event() for _ in range(repeat)]
            ends = [cp.cuda.Event() for _ in range(repeat)]
            t0 = time.perf_counter()
            for i in range(repeat):
                if before is not None:
                    before(sets[(warmup + i) % len(sets)])
                starts[i].record(self.stream)
                step(sets[(warmup + i) % len(sets)])
                ends[i].record(self.stream)
            self._wait(ends[-1], TIMED_LOOP_TIMEOUT_S)
            cp.cuda.Device().synchronize()  # and nothing left over when it stops
            wall_ms = (time.perf_counter() - t0) * 1e3
        samples = tuple(float(cp.cuda.get_elapsed_time(s, e)) for s, e in zip(starts, ends,
                                                                              strict=True))
        return Timing(samples, wall_ms, warmup, rotation)

    def _release(self) -> None:
        if self._hung:
            return
        with contextlib.suppress(Exception):
            self.cp.get_default_memory_pool().free_all_blocks()

    def close(self) -> None:
        self._maps.clear()
        self._release()
        with contextlib.suppress(Exception):
            self._tmp.cleanup()


def _set_bytes(*groups: Mapping[str, np.ndarray]) -> int:
    return int(sum(a.nbytes for g in groups for a in g.values()))
