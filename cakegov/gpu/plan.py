"""What a GPU check runs first and what it may skip (`scripts/gpu_check.sh --budget`).

Device time comes rarely and in short runs, so the check orders its work by value and
resumes where the last run stopped:

1. `never-measured`: schedules with no measurement record at all for their current
   meaning (the canonical schedule sha256 a record carries) and this engine version;
2. `fa3-bisect`: the FA3 disagreement's bisection (scripts/gpu_fa3.sh), when the tree has it;
3. `headline`: schedules whose workload headline shapes (the figures README quotes) lack a
   record;
4. `rest`: schedules with some check shape still unmeasured.

A (schedule sha256, shape, engine version) row already in `corpus/measurements/*.jsonl` is
skipped: a schedule whose every shape is recorded is not run again (`skip`), and a
schedule that is run gets only its missing shapes. The plan depends only on files (the
schedules, the records, the workloads), never on time, so two machines agree on it.

`python -m cakegov.gpu.plan [--measurements DIR] [--fa3 SCRIPT] SCHEDULE...` prints one
tab-separated line per item: tier, schedule (or script), and the shapes to run
(`M=256,N=256,K=256;...`, empty for a script)."""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cakegov import __version__

TIERS = ("never-measured", "fa3-bisect", "headline", "rest", "skip")


def shape_key(shape: Mapping[str, int]) -> str:
    return ",".join(f"{k}={shape[k]}" for k in sorted(shape))


def measured_rows(measurements: Path) -> set[tuple[str, str, str]]:
    """(schedule sha256, shape key, engine version) of every record; a line that does not
    parse is skipped (the file is append-only history, a torn last line included)."""
    rows: set[tuple[str, str, str]] = set()
    if not measurements.is_dir():
        return rows
    for path in sorted(measurements.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                rec = json.loads(line)
                sha = rec["schedule"]["sha256"]
                shape = rec["shape"]
                version = rec["engine_version"]
            except (ValueError, KeyError, TypeError):
                continue
            if isinstance(sha, str) and isinstance(shape, dict) and isinstance(version, str):
                rows.add((sha, shape_key(shape), version))
    return rows


@dataclass(frozen=True)
class Item:
    tier: str
    target: str  # a schedule file, or a script for fa3-bisect
    shapes: tuple[str, ...] = ()  # shape keys still to run
    reason: str = ""


@dataclass
class Shapes:
    """The shapes of one schedule a run would measure."""

    check: list[dict[str, int]] = field(default_factory=list)
    headline: list[dict[str, int]] = field(default_factory=list)


def plan(schedules: Sequence[tuple[str, str, Shapes]], rows: set[tuple[str, str, str]],
         *, version: str = __version__, fa3_script: str | None = None) -> list[Item]:
    """Order `schedules` ((file, sha256, shapes), in the caller's order within a tier)."""
    tiers: dict[str, list[Item]] = {t: [] for t in TIERS}
    for file, sha, shapes in schedules:
        done = {k for s, k, v in rows if s == sha and v == version}
        check = [shape_key(s) for s in shapes.check]
        head = [shape_key(s) for s in shapes.headline if shape_key(s) not in check]
        missing = [k for k in check + head if k not in done]
        if not missing:
            tiers["skip"].append(Item("skip", file, (), "every shape recorded at engine "
                                      f"{version}"))
        elif not done:
            tiers["never-measured"].append(Item("never-measured", file, tuple(missing),
                                                "no record for this schedule text"))
        elif any(k in missing for k in head):
            tiers["headline"].append(Item("headline", file, tuple(missing),
                                          "a headline shape is unrecorded"))
        else:
            tiers["rest"].append(Item("rest", file, tuple(missing),
                                      f"{len(missing)} shape(s) unrecorded"))
    if fa3_script is not None:
        tiers["fa3-bisect"].append(Item("fa3-bisect", fa3_script, (), "FA3 bisection"))
    return [item for t in TIERS for item in tiers[t]]


def schedule_shapes(paths: Iterable[Path], rules: Path, workloads_dir: Path
                    ) -> list[tuple[str, str, Shapes]]:
    """(file, sha256, shapes) of each schedule that parses and names a known workload;
    the others are left to `cakegov run`, which reports them (as the plan's `rest`)."""
    from cakegov.check.rulebook import Rulebook
    from cakegov.corpus.suite import vocabulary
    from cakegov.corpus.workloads import load_workloads
    from cakegov.gpu.data import DataError, headline_shapes, select_shapes
    from cakegov.ir.canonical import schedule_sha256
    from cakegov.ir.errors import InputError
    from cakegov.ir.parse import parse_bytes

    book = Rulebook.load(rules)
    wls = load_workloads(workloads_dir)
    vocab = vocabulary(book, wls)
    out = []
    for path in paths:
        data = path.read_bytes()
        sha = "text:" + hashlib.sha256(data).hexdigest()
        shapes = Shapes()
        try:
            schedule = parse_bytes(data, vocab)
            sha = schedule_sha256(schedule)  # what a record names (cakegov/check/runner.py)
            workload = wls[schedule.workload]
            shapes.check = select_shapes(workload, schedule.sizes, schedule.divisible)
            shapes.headline = headline_shapes(workload, schedule.sizes, schedule.divisible)[0]
        except (InputError, KeyError, DataError):
            shapes.check = [{"?": 0}]  # never recorded: the run itself says what is wrong
        out.append((path.as_posix(), sha, shapes))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m cakegov.gpu.plan", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("schedules", nargs="*", type=Path)
    ap.add_argument("--measurements", type=Path, default=Path("corpus/measurements"))
    ap.add_argument("--rules", type=Path, default=Path("rules"))
    ap.add_argument("--workloads", type=Path, default=Path("corpus/workloads"))
    ap.add_argument("--fa3", default=None, help="the FA3 bisection script, when present")
    args = ap.parse_args(argv)
    items = plan(schedule_shapes(args.schedules, args.rules, args.workloads),
                 measured_rows(args.measurements), fa3_script=args.fa3)
    for item in items:
        sys.stdout.write(f"{item.tier}\t{item.target}\t{';'.join(item.shapes)}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
