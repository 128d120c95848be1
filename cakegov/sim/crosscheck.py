"""`cakegov corpus crosscheck`: the checker's verdict against the simulator's outcome on
every labelled corpus schedule.

Each case is classified by its label (cakegov/corpus/labels.py):

- `clean`: a valid schedule; it agrees when the checker is clean and every planned run
  matches the reference (cakegov/sim/evidence.py: three seeds, two or three shapes, one
  of them ragged where the schedule allows it);
- `dynamic`: an invalid schedule whose defect has a dynamic effect (a deadlock, race,
  parity error, wrong data, out-of-bounds access: the protocol codes P001-P019, P099,
  H005/H006 whose effect is an out-of-bounds access, and R007, a named barrier whose
  thread count differs from its users', which completes with the wrong warps); it
  agrees when the checker
  rejects it and at least one run reproduces a defect;
- `static`: the defect is a resource or encoding limit with no dynamic effect in the
  simulator's model (shared-memory capacity, threads per CTA, register budgets,
  setmaxnreg, cluster size, mma shape, dtypes, bulk-copy alignment, swizzle alignment,
  the fit of an aliased view in its storage, a collective instruction inside a
  `with lm.warps(...)` block (H007: undefined by the ISA, whatever a run happens to
  show), unknown names and targets): reported as
  "not dynamic", whatever the simulator says;
- `bound`: labelled P098 (the protocol analysis hit a bound, a verdict of incomplete and
  no claim of a defect): the simulator's outcome is reported, not judged.

Disagreements are listed by name; docs/simulator.md explains each one that remains."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cakegov.check.rulebook import Rulebook
from cakegov.check.runner import Checker, expand_paths
from cakegov.corpus.labels import read_label_file
from cakegov.corpus.workloads import Workload
from cakegov.sim.evidence import simulate_evidence
from cakegov.sim.state import CORRECT, DEFECT

STATIC_CODES = frozenset({"H001", "H002", "H003", "H004", "H007", "N001", "N002", "R001",
                          "R002", "R003", "R004", "R005", "R006", "R008", "R009", "R010",
                          "R011"})
BOUND_CODES = frozenset({"P098"})


def defect_class(clean: bool, codes: Iterable[str]) -> str:
    codes = set(codes)
    if clean:
        return "clean"
    if codes & BOUND_CODES and not codes - BOUND_CODES:
        return "bound"
    if codes and codes <= STATIC_CODES:
        return "static"
    return "dynamic"


@dataclass
class Row:
    file: str
    label: str
    defect_class: str
    checker: str  # the checker's verdict
    simulator: str  # the simulator's status
    detail: str
    agreement: str  # agree | disagree | not dynamic | not judged

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def judge(cls: str, verdict: str, status: str) -> str:
    if cls == "clean":
        return "agree" if verdict == "clean" and status == CORRECT else "disagree"
    if cls == "dynamic":
        return "agree" if verdict == "rejected" and status == DEFECT else "disagree"
    return "not dynamic" if cls == "static" else "not judged"


def crosscheck(paths: Iterable[Path], rulebook: Rulebook, workloads: Mapping[str, Workload],
               *, seeds: int = 3, root: Path | None = None,
               advance: Callable[[int], None] | None = None) -> list[Row]:
    """One row per schedule under `paths`; `advance(1)` after each (progress only)."""
    checker = Checker(rulebook, dict(workloads))
    rows = []
    for path in expand_paths(paths):
        labels = read_label_file(path)
        label = "clean" if labels.clean else ", ".join(
            f"{c}@{line}" for c, line in sorted(labels.expected))
        cls = defect_class(labels.clean, labels.codes)
        verdict = checker.check_path(path).verdict
        evidence = simulate_evidence(path.read_bytes(), str(path), rulebook, workloads,
                                     seeds=seeds)
        name = str(path.relative_to(root)) if root and path.is_relative_to(root) else str(path)
        rows.append(Row(name, label, cls, verdict, evidence["status"], evidence["detail"],
                        judge(cls, verdict, evidence["status"])))
        if advance is not None:
            advance(1)
    return rows


def summary(rows: list[Row]) -> dict[str, Any]:
    def count(cls: str, agreement: str | None = None) -> int:
        return sum(1 for r in rows if r.defect_class == cls and
                   (agreement is None or r.agreement == agreement))

    return {
        "cases": len(rows),
        "valid": count("clean"), "valid_matched": count("clean", "agree"),
        "dynamic": count("dynamic"), "dynamic_reproduced": count("dynamic", "agree"),
        "static": count("static"), "bound": count("bound"),
        "disagreements": [r.file for r in rows if r.agreement == "disagree"],
    }


def render_json(rows: list[Row]) -> str:
    return json.dumps({"summary": summary(rows), "rows": [r.to_json() for r in rows]},
                      indent=2, sort_keys=True) + "\n"


def _cell(text: str, width: int = 110) -> str:
    text = text.replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= width else text[:width - 1] + "…"


def render_markdown(rows: list[Row]) -> str:
    s = summary(rows)
    out = [f"{s['valid_matched']} of {s['valid']} valid schedules match the reference; "
           f"{s['dynamic_reproduced']} of {s['dynamic']} invalid schedules with a dynamic "
           f"defect are reproduced; {s['static']} static and {s['bound']} bound cases; "
           f"{len(s['disagreements'])} disagreement(s).", "",
           "| schedule | label | class | checker | simulator | agreement | detail |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| `{r.file}` | {_cell(r.label, 40)} | {r.defect_class} | {r.checker} | "
                   f"{r.simulator} | {r.agreement} | {_cell(r.detail)} |")
    return "\n".join(out) + "\n"


def render_text(rows: list[Row]) -> str:
    width = max((len(r.file) for r in rows), default=10)
    out = []
    for r in rows:
        out.append(f"{r.file:<{width}}  {r.defect_class:<8} {r.checker:<10} "
                   f"{r.simulator:<13} {r.agreement:<11} {_cell(r.detail, 90)}")
    s = summary(rows)
    out.append(f"\nvalid matched {s['valid_matched']}/{s['valid']}, dynamic reproduced "
               f"{s['dynamic_reproduced']}/{s['dynamic']}, static {s['static']}, bound "
               f"{s['bound']}, disagreements {len(s['disagreements'])}")
    return "\n".join(out) + "\n"
