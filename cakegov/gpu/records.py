"""Timing statistics, L2 rotation sizing and the append-only measurement records.

A measurement record is one JSON object on one line of `corpus/measurements/<workload>.jsonl`.
Records are only ever appended (O_APPEND, then fsync); nothing in cakegov rewrites or
deletes a line, so the file is the history of every GPU run."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

RECORD_SCHEMA = 1
MIN_REPEAT = 20  # the median of fewer timed launches is not reported
L2_FACTOR = 2.0  # bytes touched between two uses of one buffer set, in multiples of L2
MEMORY_FRACTION = 0.5  # of the device's free memory the rotation may take


@dataclass(frozen=True)
class TimingStats:
    """Summary of one series of timed launches, in milliseconds."""

    median_ms: float
    p10_ms: float
    p90_ms: float
    min_ms: float
    n: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def timing_stats(samples_ms: Sequence[float]) -> TimingStats:
    """Median, 10th and 90th percentile (linear interpolation) and minimum of the samples."""
    if not samples_ms:
        raise ValueError("no timing samples")
    a = np.asarray(samples_ms, dtype=np.float64)
    if not np.isfinite(a).all() or (a < 0).any():
        raise ValueError("timing samples must be finite and non-negative")
    p10, med, p90 = np.percentile(a, [10, 50, 90])
    return TimingStats(median_ms=float(med), p10_ms=float(p10), p90_ms=float(p90),
                       min_ms=float(a.min()), n=int(a.size))


@dataclass(frozen=True)
class Rotation:
    """How many copies of a launch's buffers the timing loop cycles through."""

    copies: int
    set_bytes: int
    l2_bytes: int
    covers_l2: bool  # False when memory capped the copies below what flushing L2 needs

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def rotation_copies(set_bytes: int, l2_bytes: int, free_bytes: int | None = None,
                    factor: float = L2_FACTOR, max_copies: int = 256) -> Rotation:
    """Copies of one buffer set (inputs and outputs of a launch) so that between two uses
    of the same set the other sets touch at least `factor` × L2 bytes: every timed launch
    then starts with its operands out of L2 (no warm-cache timing).

    `free_bytes` caps the copies at MEMORY_FRACTION of free device memory; the result says
    whether the cap left L2 uncovered."""
    if set_bytes <= 0:
        raise ValueError("a buffer set must hold at least one byte")
    need = 1 + math.ceil(factor * max(l2_bytes, 0) / set_bytes)
    copies = max(2, need)
    cap = max_copies
    if free_bytes is not None:
        cap = min(cap, int(free_bytes * MEMORY_FRACTION) // set_bytes)
    copies = max(1, min(copies, cap))
    covers = (copies - 1) * set_bytes >= factor * l2_bytes
    return Rotation(copies=copies, set_bytes=set_bytes, l2_bytes=l2_bytes, covers_l2=covers)


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def measurement_path(directory: Path | str, workload: str) -> Path:
    return Path(directory) / f"{workload}.jsonl"


def append_record(path: Path | str, record: dict[str, Any]) -> None:
    """Append one record as one line and fsync it. Existing bytes are never touched: if the
    file does not end with a newline (a torn earlier write), a newline is appended first."""
    path = Path(path)
    created = not path.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(record, sort_keys=True, separators=(",", ":"), allow_nan=False) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size:
            with open(path, "rb") as handle:
                handle.seek(size - 1)
                if handle.read(1) != b"\n":
                    line = "\n" + line
        data = line.encode()
        while data:
            written = os.write(fd, data)
            data = data[written:]
        os.fsync(fd)
    finally:
        os.close(fd)
    if created:  # make the new directory entry durable too
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def read_records(path: Path | str) -> Iterator[dict[str, Any]]:
    """Every well-formed record of a measurement file (torn or foreign lines are skipped)."""
    path = Path(path)
    if not path.is_file():
        return
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict) and record.get("schema") == RECORD_SCHEMA:
                yield record


def finite_or_none(value: float | None) -> float | None:
    """JSON has no NaN or infinity: such values are recorded as null."""
    if value is None or not math.isfinite(value):
        return None
    return float(value)
