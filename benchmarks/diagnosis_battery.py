"""Diagnosis battery: defects planted by hand in valid corpus transcriptions (CUTLASS's
cooperative and ping-pong mainloops, FA3, the raw-barrier kernels of every family), one
class at a time, each with the code and line of its repair (the statement the repair
edits; several codes where two rules' repairs are the same edit). Not corpus cases: the
checker was not tuned on them one by one, and they measure how often a rejection names
the repair (issue 38).

    python benchmarks/diagnosis_battery.py [--root CHECKOUT]

`--root` checks with another checkout's rules, workloads and engine (run it with that
checkout first on PYTHONPATH) against the same plants: the before / after of a change.
The plants are edits of the current corpus's valid files (benchmarks/
diagnosis_battery.json); an edit whose old lines are not where it says is an error.
Prints one line per plant and, per class, how many are named with the repair's code at
the repair's line, how many are P099 and how many pass clean."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def plant(item: dict) -> str:
    lines = (REPO / item["origin"]).read_text(encoding="utf-8").splitlines()
    for edit in reversed(item["edits"]):  # bottom-up: earlier line numbers stay valid
        at = edit["at"] - 1
        if lines[at:at + len(edit["old"])] != edit["old"]:
            raise SystemExit(f"{item['name']}: {item['origin']} line {edit['at']} changed; "
                             "the battery no longer applies")
        lines[at:at + len(edit["old"])] = edit["new"]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=REPO,
                    help="checkout whose rules and workloads check the plants")
    args = ap.parse_args()
    from cakegov.check.rulebook import Rulebook
    from cakegov.check.runner import Checker
    from cakegov.corpus.workloads import load_workloads

    checker = Checker(Rulebook.load(args.root / "rules"),
                      load_workloads(args.root / "corpus" / "workloads"))
    items = json.loads((HERE / "diagnosis_battery.json").read_text(encoding="utf-8"))
    per: dict[str, list[int]] = {}
    for item in items:
        result = checker.check_bytes(plant(item).encode(), item["name"] + ".cake")
        found = sorted((f.code, f.span.line) for f in result.findings
                       if f.severity == "blocking")
        named = any(code in item["expect"] and line == item["line"] for code, line in found)
        row = per.setdefault(item["class"], [0, 0, 0, 0])
        row[0] += 1
        row[1] += named
        row[2] += any(code == "P099" for code, _ in found)
        row[3] += result.verdict == "clean"
        want = ",".join(item["expect"]) or "(no hazard)"
        sys.stdout.write(f"{item['name']:<20} want {want}@{item['line']:<4} found "
                         f"{', '.join(f'{c}@{ln}' for c, ln in found) or result.verdict}\n")
    sys.stdout.write(f"\n{'class':<44} {'plants':>6} {'named':>6} {'P099':>5} {'clean':>6}\n")
    total = [0, 0, 0, 0]
    for cls, row in sorted(per.items()):
        sys.stdout.write(f"{cls:<44} {row[0]:>6} {row[1]:>6} {row[2]:>5} {row[3]:>6}\n")
        total = [a + b for a, b in zip(total, row, strict=True)]
    sys.stdout.write(f"{'all':<44} {total[0]:>6} {total[1]:>6} {total[2]:>5} {total[3]:>6}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
