"""Workloads: reference semantics (numpy), input generators, tolerances and check shapes.

A workload file in `corpus/workloads/<name>.py` is part of the evaluation contract (it is
reviewed like engine code), so it is imported as a module. It defines:

- `NAME`, `SIZES` (size symbols), `TENSORS` ({name: (dtype, dims)}), `OUTPUTS`;
- `SHAPES`: concrete sizes to check and run, including ones that are not tile multiples;
- `HEADLINE` (optional): the shapes performance is reported at (`cakegov run --headline`,
  scripts/gpu_check.sh);
- `TOLERANCE`: relative error bound per output dtype;
- `generate(sizes, rng)` -> inputs and `reference(inputs, sizes)` -> outputs (float64)."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cakegov.ir.dtypes import DTYPE_BYTES
from cakegov.ir.parse import TensorSig, WorkloadSig


class WorkloadError(Exception):
    def __init__(self, path: Path | str, message: str):
        super().__init__(f"{path}: {message}")


@dataclass(frozen=True)
class Workload:
    name: str
    sizes: tuple[str, ...]
    tensors: dict[str, tuple[str, tuple[str, ...]]]
    outputs: tuple[str, ...]
    shapes: tuple[dict[str, int], ...]
    tolerance: dict[str, float]
    generate: Callable[..., dict[str, Any]]
    reference: Callable[..., dict[str, Any]]
    path: str
    sha256: str
    headline: tuple[dict[str, int], ...] = ()
    # sizes that are functions of others (gemm_fp8: NB = cdiv(N, 128)): `derive(sizes)`
    # returns the sizes with those recomputed, for shapes the tools make themselves
    derive: Callable[[dict[str, int]], dict[str, int]] | None = None

    @property
    def sig(self) -> WorkloadSig:
        return WorkloadSig(
            name=self.name,
            sizes=self.sizes,
            tensors=tuple(TensorSig(n, d, dims) for n, (d, dims) in self.tensors.items()),
        )

    def shapes_for(self, fixed: Mapping[str, int], divisible: Mapping[str, int]
                   ) -> list[dict[str, int]]:
        """Check shapes a schedule accepts: fixed sizes substituted, sizes rounded up to
        the schedule's declared divisibility."""
        check_positive(fixed, "a fixed size")
        check_positive(divisible, "a divisibility")
        out: list[dict[str, int]] = []
        for shape in self.shapes:
            s = dict(shape)
            s.update(fixed)
            for name, mult in divisible.items():
                if name in s and name not in fixed:
                    s[name] = -(-s[name] // mult) * mult
            if s not in out:
                out.append(s)
        return out


def check_positive(sizes: Mapping[str, int], what: str) -> None:
    """Refuse a size (or multiple) that is not a positive integer: a zero trip count is a
    multiple of every tile, and a kernel given one loops on an empty pipeline."""
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{what} must be a positive integer: {name}={value!r}")


def load_workload(path: Path) -> Workload:
    mod_name = f"_cakegov_workload_{hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise WorkloadError(path, "cannot be loaded")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise WorkloadError(path, f"failed to load: {exc!r}") from exc
    try:
        tensors = {str(k): (str(v[0]), tuple(v[1])) for k, v in module.TENSORS.items()}
        wl = Workload(
            name=module.NAME, sizes=tuple(module.SIZES), tensors=tensors,
            outputs=tuple(module.OUTPUTS), shapes=tuple(dict(s) for s in module.SHAPES),
            tolerance=dict(module.TOLERANCE), generate=module.generate,
            reference=module.reference, path=str(path),
            sha256=hashlib.sha256(path.read_bytes()).hexdigest(),
            headline=tuple(dict(s) for s in getattr(module, "HEADLINE", ())),
            derive=getattr(module, "derive", None),
        )
    except AttributeError as exc:
        raise WorkloadError(path, f"missing {exc.name}") from exc
    if wl.name != path.stem:
        raise WorkloadError(path, "NAME must equal the file name")
    for what, shapes in (("SHAPES", wl.shapes), ("HEADLINE", wl.headline)):
        for shape in shapes:
            if set(shape) != set(wl.sizes):
                raise WorkloadError(path, f"{what} entry {shape} must give exactly "
                                    f"{', '.join(wl.sizes)}")
            try:
                check_positive(shape, f"{what} entry {shape}: a size")
            except ValueError as exc:
                raise WorkloadError(path, str(exc)) from None
    if wl.derive is not None:
        if not callable(wl.derive):
            raise WorkloadError(path, "derive must be a function of the sizes")
        for shape in (*wl.shapes, *wl.headline):
            if wl.derive(dict(shape)) != shape:
                raise WorkloadError(path, f"derive changes the declared shape {shape}: the "
                                    "shapes must already be consistent")
    for tname, (dtype, dims) in wl.tensors.items():
        if dtype not in DTYPE_BYTES:
            raise WorkloadError(path, f"tensor {tname}: unknown dtype {dtype}")
        for d in dims:
            if d not in wl.sizes:
                raise WorkloadError(path, f"tensor {tname}: unknown size {d}")
    return wl


def load_workloads(directory: Path | str) -> dict[str, Workload]:
    directory = Path(directory)
    out: dict[str, Workload] = {}
    for path in sorted(directory.glob("*.py")):
        if path.name.startswith("_"):
            continue
        wl = load_workload(path)
        out[wl.name] = wl
    return out
