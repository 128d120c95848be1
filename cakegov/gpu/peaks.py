"""Peak rates of the GPUs the runner reports against, and the work of each workload, so a
time becomes TFLOP/s, GB/s and a fraction of the roofline.

Peaks belong to a product, not to the sm_90a target (an H100 PCIe and an H200 share the
ISA but not clocks or memory), so they are keyed by the device name CUDA reports. Values
are NVIDIA's published dense (non-sparse) figures:
- H200 SXM: "NVIDIA H200 Tensor Core GPU" datasheet: BF16/FP16 Tensor Core 1,979 TFLOPS
  with sparsity (989 dense), FP32 67 TFLOPS, TF32 Tensor Core 989 with sparsity (494
  dense), GPU memory bandwidth 4.8 TB/s.
- H100 SXM5: "NVIDIA H100 Tensor Core GPU" datasheet: BF16 1,979 with sparsity (989
  dense), FP32 67 TFLOPS, 3.35 TB/s. H100 PCIe: BF16 1,513 with sparsity (756 dense),
  FP32 51 TFLOPS, 2 TB/s.

The fraction of peak is the roofline's: the time the work needs at peak (the larger of
flops / compute peak and bytes / bandwidth, the compute peak being the one of the
arithmetic the workload's contract prescribes) divided by the measured time. Unknown
devices get TFLOP/s and GB/s but no fraction."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Peaks:
    name: str
    bf16_tensor_tflops: float
    f32_tflops: float
    memory_gbps: float
    source: str


PEAKS: tuple[tuple[str, Peaks], ...] = (  # (substring of the CUDA device name, peaks)
    ("H200", Peaks("H200 SXM", 989.0, 67.0, 4800.0, "NVIDIA H200 datasheet (dense)")),
    ("H100 PCIe", Peaks("H100 PCIe", 756.0, 51.0, 2000.0, "NVIDIA H100 datasheet (dense)")),
    ("H100", Peaks("H100 SXM5", 989.0, 67.0, 3350.0, "NVIDIA H100 datasheet (dense)")),
)


def peaks_for(device_name: str) -> Peaks | None:
    for key, peaks in PEAKS:
        if key in device_name:
            return peaks
    return None


@dataclass(frozen=True)
class Work:
    """Useful work of one launch: flops, compulsory DRAM bytes, which compute peak."""

    flops: float
    bytes: float
    compute: str  # "bf16_tensor" or "f32"


def work_for(workload: str, sizes: Mapping[str, int]) -> Work | None:
    if workload == "gemm":
        m, n, k = sizes["M"], sizes["N"], sizes["K"]
        return Work(2.0 * m * n * k, 2.0 * (m * k + n * k) + 4.0 * m * n, "bf16_tensor")
    if workload == "kmeans_assign":
        n, k, d = sizes["N"], sizes["K"], sizes["D"]
        return Work(2.0 * n * k * d, 4.0 * (n * d + k * d + n), "f32")
    if workload == "scale":
        m, n = sizes["M"], sizes["N"]
        return Work(float(m * n), 8.0 * m * n, "f32")
    return None


def throughput(workload: str, sizes: Mapping[str, int], median_ms: float | None,
               device_name: str) -> dict[str, Any] | None:
    """TFLOP/s, GB/s and the roofline fraction of a median time (None: nothing timed)."""
    work = work_for(workload, sizes)
    if work is None or not median_ms or median_ms <= 0:
        return None
    seconds = median_ms * 1e-3
    out: dict[str, Any] = {"flops": work.flops, "bytes": work.bytes,
                           "tflops": work.flops / seconds / 1e12,
                           "gbps": work.bytes / seconds / 1e9, "compute": work.compute,
                           "fraction_of_peak": None, "peaks": None}
    peaks = peaks_for(device_name)
    if peaks is not None:
        compute = (peaks.bf16_tensor_tflops if work.compute == "bf16_tensor"
                   else peaks.f32_tflops) * 1e12
        floor = max(work.flops / compute, work.bytes / (peaks.memory_gbps * 1e9))
        out["fraction_of_peak"] = floor / seconds
        out["peaks"] = asdict(peaks)
    return out
