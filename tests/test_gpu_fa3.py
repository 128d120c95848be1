"""The FA3 bisection harness (cakegov/gpu/fa3.py, scripts/gpu_fa3.sh) end to end on a fake
device: the four kernel variants differ only where they should, and the table and the
records report each math warpgroup's errors as the device produced them."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from cakegov.gpu import fa3
from cakegov.gpu.data import decode
from cakegov.gpu.device import DeviceInfo, KernelArtifact
from cakegov.lower.build import prepare
from cakegov.lower.emit import emit_cuda
from cakegov.lower.kernel import LArrive, LFence, LFor, LNamedSync

from .conftest import ROOT

FA3 = ROOT / fa3.SCHEDULES[0]
SHAPE = "M=256,N=256,D=128"


def _ops(body):
    for op in body:
        if isinstance(op, LFor):
            yield from _ops(op.body)
        else:
            yield op


class FakeAttentionDevice:
    """Computes O with the workload's reference. A kernel whose source has no
    `fence.proxy.async` loses math1's rows (64-127 of each tile) on every other launch,
    as a refill landing under unfenced reads would; the fenced kernel is always right."""

    def __init__(self, workload):
        self.workload = workload
        self.info = DeviceInfo(name="Fake GPU", compute_capability="9.0",
                               cuda_driver_version=13000, cuda_runtime_version=13000,
                               driver="580.00", cupy_version="0-fake", l2_bytes=1 << 20,
                               memory_bytes=1 << 34, smem_optin_bytes=227 * 1024,
                               sm_count=132)
        self.launches = 0
        self.closed = False

    def load(self, artifact, launch):
        return artifact

    def execute(self, artifact, launch, inputs, outputs, timeout_s):
        self.launches += 1
        values = {n: decode(self.workload.tensors[n][0], a).astype(np.float64)
                  for n, a in inputs.items()}
        sizes = dict(zip(("M", "N", "D"), launch.sizes, strict=True))
        out = self.workload.reference(values, sizes)["O"].astype(np.float32)
        if "fence_proxy_async();" not in artifact.source and self.launches % 2:
            rows = np.arange(out.shape[0]) % 128 >= 64
            out[rows] *= np.float32(1.2)
        return {"O": out}, dict(inputs)

    def close(self):
        self.closed = True


def fake_compiler(prepared, book):
    src = emit_cuda(prepared.kernel, book.primitives, verifier_digest=book.digest()).source
    return KernelArtifact(name=prepared.kernel.name, source=src[src.index("__global__"):],
                          compiler="fake NVRTC 0.0")


def test_the_variants_differ_only_in_what_they_name(rulebook, workloads):
    kernel = prepare(FA3, rulebook, workloads).kernel

    def count(k, pred):
        return sum(1 for r in k.roles for op in _ops(r.body) if pred(r, op))

    def fence(r, op):
        return isinstance(op, LFence) and op.scope == "proxy_async"

    def release(r, op):
        return isinstance(op, LArrive) and op.source in fa3.RELEASES and r.name != "loader"

    lowered = fa3.TRANSFORMS["lowered"](kernel)
    assert count(lowered, fence) == count(lowered, release) == 6  # K, V and O of both
    for name in ("unfenced", "synced", "other-leads"):
        assert count(fa3.TRANSFORMS[name](kernel), fence) == 0, name
    synced = fa3.synced(kernel)
    syncs = count(synced, lambda r, op: isinstance(op, LNamedSync) and "bisection" in op.derived)
    assert syncs == 6
    other = fa3.other_leads(kernel)
    first = {r.name: r.body[0] for r in other.roles}
    assert isinstance(first["math0"], LNamedSync) and first["math0"].barrier == "sched0"
    assert not any(isinstance(op, LNamedSync) and op.barrier == "sched0" and not op.wait
                   for op in fa3.other_leads(kernel).roles[2].body[:2])
    # everything else is the lowered kernel's
    strip = fa3.unfenced(kernel)
    assert count(strip, lambda r, op: True) == count(kernel, lambda r, op: True) - 6


def test_the_bisection_reports_each_warpgroup_end_to_end(rulebook, workloads, tmp_path,
                                                          capsys):
    device = FakeAttentionDevice(workloads["attention"])
    rc = fa3.main([str(FA3), "--repeat", "4", "--shape", SHAPE, "--measurements",
                   str(tmp_path)], find_device=lambda: device, compiler=fake_compiler)
    assert rc == 0 and device.closed and device.launches == 16
    out = capsys.readouterr().out
    assert "compiler: fake NVRTC 0.0" in out and "Fake GPU" in out
    records = [json.loads(x) for x in (tmp_path / fa3.RECORDS).read_text().splitlines()]
    got = {r["variant"]: r for r in records}
    assert set(got) == set(fa3.VARIANTS)
    assert all(r["kind"] == "fa3-bisect" and r["launches"] == 4 for r in records)
    assert got["lowered"]["wrong"] == {"math0": 0, "math1": 0}
    assert got["lowered"]["max_error"]["math1"] < 1e-6
    for name in ("unfenced", "synced", "other-leads"):
        assert got[name]["wrong"] == {"math0": 0, "math1": 2}, name
        assert got[name]["max_error"]["math1"] == pytest.approx(0.2, rel=0.05)
    row = next(x for x in out.splitlines() if " unfenced " in x)
    cells = row.split()[-5:]  # n, wrong0, maxerr0, wrong1, maxerr1
    assert cells[0] == "4" and cells[1] == "0" and float(cells[2]) < 1e-6 and cells[3] == "2"


def test_no_device_measures_nothing_and_a_bad_shape_is_usage(tmp_path, capsys):
    from cakegov.gpu.device import NoDevice

    def none():
        raise NoDevice("no CUDA driver")

    assert fa3.main([str(FA3), "--measurements", str(tmp_path)], find_device=none) == 3
    assert not (tmp_path / fa3.RECORDS).exists()
    assert fa3.main(["--shape", "M=x"], find_device=none) == 2
    assert fa3.main([str(tmp_path / "absent.cake")], find_device=none) == 2


def test_the_script_runs_the_harness(tmp_path):
    """scripts/gpu_fa3.sh without a device: it reaches the harness, which measures
    nothing and says why (a machine with a GPU runs the same lines)."""
    env = {**os.environ, "BUDGET": "120", "REPEAT": "1", "OUT": str(tmp_path),
           "CAKEGOV_GPU_VENV": str(tmp_path / "none"), "CUDA_VISIBLE_DEVICES": ""}
    import sys

    env["PYTHON"] = sys.executable
    done = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_fa3.sh"), str(FA3)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "fa3 bisection" in done.stdout and "NVRTC" in done.stdout
    assert "no CUDA device" in done.stdout
    assert (Path(tmp_path) / "gpu_fa3.txt").read_text().startswith("fa3: no CUDA device")
