"""The short table scripts/gpu_check.sh prints last: per schedule and shape, whether the
kernel was correct, its median time, its TFLOP/s and GB/s, the fraction of the device's
roofline it reached (cakegov/gpu/peaks.py), the baseline's time, and their ratio.

Built from the measurement records (cakegov/gpu/records.py) plus, optionally, a status
file with the exit code of every `cakegov run` the check made (`FILE<TAB>CODE` per line),
so schedules that produced no record (rejected, no device, crashed) still get a row.

    python -m cakegov.gpu.report [--measurements DIR] [--since ISO-TIME] [--status FILE]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cakegov.gpu.records import read_records

EXIT_MEANING = {
    0: "correct",
    1: "rejected, compile failed or wrong",
    2: "usage or input error",
    3: "not measured: no CUDA device",
    101: "internal error",
    124: "killed or skipped: time limit",
    137: "killed",
}


@dataclass(frozen=True)
class Row:
    schedule: str
    shape: str
    correct: str  # yes / NO / not measured / error
    time_ms: float | None
    baseline_ms: float | None
    baseline: str
    note: str = ""
    tflops: float | None = None
    gbps: float | None = None
    fraction: float | None = None

    @property
    def ratio(self) -> float | None:
        if self.time_ms is None or not self.baseline_ms:
            return None
        return self.time_ms / self.baseline_ms


def _parse_time(text: str) -> datetime:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment


def load_records(directory: Path | str, since: str | None = None) -> list[dict[str, Any]]:
    """Records of every `*.jsonl` in `directory`, at or after `since`, oldest first."""
    start = _parse_time(since) if since else None
    out = []
    for path in sorted(Path(directory).glob("*.jsonl")):
        for record in read_records(path):
            try:
                moment = _parse_time(str(record["timestamp"]))
            except (KeyError, ValueError):
                continue
            if start is None or moment >= start:
                out.append(record)
    return sorted(out, key=lambda r: str(r["timestamp"]))


def read_status(path: Path | str) -> list[tuple[str, int]]:
    """`FILE<TAB>CODE` lines -> [(file, code)]; malformed lines are skipped."""
    out = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        file, sep, code = line.rpartition("\t")
        if sep and code.strip().lstrip("-").isdigit():
            out.append((file.strip(), int(code)))
    return out


def _shape(record: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in record.get("shape", {}).items())


def _median(times: dict[str, Any] | None) -> float | None:
    if not times or times.get("median_ms") is None:
        return None
    return float(times["median_ms"])


def record_row(record: dict[str, Any]) -> Row:
    """One table row from one measurement record."""
    base = record.get("baseline") or {}
    note = ""
    if record.get("error"):
        correct, note = "error", str(record["error"])
    elif record.get("passed"):
        correct = "yes"
        if base and not base.get("passed", True):
            note = "baseline disagrees with the reference"
    else:
        correct = "NO"
        bad = next((c for c in record.get("comparisons", []) if not c.get("passed")), None)
        note = bad["reason"] if bad else ""
    rate = record.get("throughput") or {}
    return Row(schedule=str(record.get("schedule", {}).get("file", "?")), shape=_shape(record),
               correct=correct, time_ms=_median(record.get("times_ms")),
               baseline_ms=_median(base.get("times_ms")), baseline=str(base.get("name", "")),
               note=note, tflops=rate.get("tflops"), gbps=rate.get("gbps"),
               fraction=rate.get("fraction_of_peak"))


def _latest_run(records: Iterable[dict[str, Any]], file: str) -> list[dict[str, Any]]:
    mine = [r for r in records if r.get("schedule", {}).get("file") == file]
    if not mine:
        return []
    last = mine[-1].get("run_id")
    return [r for r in mine if r.get("run_id") == last]


def build_rows(records: Sequence[dict[str, Any]],
               statuses: Sequence[tuple[str, int]] | None = None) -> list[Row]:
    """Rows for the latest run of every schedule in `statuses` (or of every schedule that
    has records, when there is no status list)."""
    if statuses is None:
        files = list(dict.fromkeys(str(r.get("schedule", {}).get("file")) for r in records))
        statuses = [(f, -1) for f in files]
    rows: list[Row] = []
    for file, code in statuses:
        run = _latest_run(records, file)
        if run:
            rows.extend(record_row(r) for r in run)
            continue
        meaning = EXIT_MEANING.get(code, f"exit {code}")
        correct = "not measured" if code in (3, -1) else "NO" if code == 1 else "error"
        rows.append(Row(schedule=file, shape="-", correct=correct, time_ms=None,
                        baseline_ms=None, baseline="", note=f"exit {code}: {meaning}, "
                        "no measurement record"))
    return rows


def _num(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def render(rows: Sequence[Row], records: Sequence[dict[str, Any]] = ()) -> str:
    """A fixed-width table (plain text: it ends up in logs and terminals alike)."""
    header = ("schedule", "shape", "correct?", "time ms", "TFLOP/s", "GB/s", "of peak",
              "baseline ms", "ratio", "baseline")
    body = [(r.schedule, r.shape, r.correct, _ms(r.time_ms), _num(r.tflops, ".1f"),
             _num(r.gbps, ".0f"), _num(r.fraction, ".1%"), _ms(r.baseline_ms),
             "-" if r.ratio is None else f"{r.ratio:.2f}", r.baseline or "-") for r in rows]
    widths = [max(len(str(row[i])) for row in [header, *body]) for i in range(len(header))]
    lines = []
    gpus = sorted({(r["gpu"].get("name"), r["gpu"].get("driver"), r["gpu"].get("cupy_version"))
                   for r in records if isinstance(r.get("gpu"), dict)}, key=str)
    for name, driver, cupy in gpus:
        lines.append(f"GPU: {name} (driver {driver or '?'}, cupy {cupy})")
    if not gpus:
        lines.append("GPU: none measured")
    last = len(header) - 1
    fmt = "  ".join(f"{{:{'<' if i < 3 or i == last else '>'}{w}}}"
                    for i, w in enumerate(widths))
    lines.append(fmt.format(*header).rstrip())
    lines.append("  ".join("-" * w for w in widths))
    lines.extend(fmt.format(*row).rstrip() for row in body)
    notes = [(r.schedule if r.shape == "-" else f"{r.schedule} {r.shape}", r.note)
             for r in rows if r.note]
    if notes:
        lines.append("")
        lines.extend(f"  {where}: {note}" for where, note in notes)
    lines.append("")
    lines.append("time: median of the timed launches (CUDA events, inputs rotated past L2); "
                 "ratio = kernel / baseline (below 1: kernel faster); of peak = the roofline "
                 "time at the device's published peak / the time (cakegov/gpu/peaks.py)")
    correct = sum(r.correct == "yes" for r in rows)
    lines.append(f"{correct} of {len(rows)} rows correct; "
                 f"{sum(r.correct == 'not measured' for r in rows)} not measured")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cakegov.gpu.report",
                                     description="Summarise GPU measurement records.")
    parser.add_argument("--measurements", default="corpus/measurements", type=Path)
    parser.add_argument("--since", default=None, help="only records at or after this "
                        "ISO time (UTC if no zone)")
    parser.add_argument("--status", default=None, type=Path,
                        help="FILE<TAB>EXIT-CODE lines of the runs to report")
    args = parser.parse_args(argv)
    records = load_records(args.measurements, args.since)
    statuses = read_status(args.status) if args.status else None
    rows = build_rows(records, statuses)
    sys.stdout.write(render(rows, records) + "\n")
    return 0 if rows and all(r.correct == "yes" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
