"""The trusted recomputation of the candidate's results: unchanged rules never share a
process with proposed code.

The candidate rulebook first runs whole, contained, in one worker (proposed code included).
That run also records, per schedule, what each proposed rule yielded on each of its calls:
data. A second worker then runs the *trusted* rulebook: the base's copies of every plugin
the proposal leaves unchanged, with each changed or added rule replaced by a stand-in that
replays the recorded findings (validated by the parent first). The engine's interactions
(structural rules gating the protocol analysis, anomalies claimed by earlier findings, the
final rules that report what nobody claimed) are therefore computed by trusted code from the
proposed rules' data, never by proposed code.

A schedule that uses a changed or added primitive or target cannot be recomputed without the
proposed plugin; its result comes from the contained candidate run and is marked as such.
Every other schedule's candidate result is the trusted one, and the contained run must agree
with it exactly: a difference means proposed code changed what unchanged code reported (or
what the engine did), and blocks the proposal.

This module holds both halves: `prepare` (parent: the trusted rulebook directory and the
stand-in specs) and `stand_ins` (worker: the replaying rules)."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cakegov.govern.cache import PLUGIN_GLOBS

TRUSTED = "trusted"  # a candidate result recomputed without proposed code
PROPOSED = "proposed"  # a candidate result that only proposed code could compute

_SPEC_KEYS = {"code": str, "name": str, "version": str, "severity": str, "authority": str,
              "category": str, "status": str, "phase": str, "relpath": str, "sha256": str,
              "doc": str}
_CODE = re.compile(r"^[A-Z]{1,3}\d{3}$")


@dataclass
class Plan:
    """What the trusted run needs: its rulebook directory, which candidate plugin files are
    proposed code, and the stand-ins for the proposed rules."""

    rules: Path
    proposed: list[str]  # candidate plugin relpaths that differ from the base or are new
    targets: list[str] = field(default_factory=list)  # target names whose file is proposed
    primitives: list[str] = field(default_factory=list)  # proposed primitive files
    stubs: list[dict[str, Any]] = field(default_factory=list)  # the proposed rules' specs
    record: list[str] = field(default_factory=list)  # codes the candidate run must record


def proposed_files(base: dict[str, str], candidate: dict[str, str]) -> list[str]:
    """Candidate plugin relpaths whose content is not the base's (changed or added)."""
    return sorted(rel for rel, sha in candidate.items() if base.get(rel) != sha)


def prepare(base_rules: Path, hashes: dict[str, dict[str, str]],
            candidate_info: dict[str, Any] | None, tmp: Path) -> Plan | None:
    """The trusted rulebook directory under `tmp`: the base's copy of every plugin file
    whose content the candidate keeps (by sha256), no file the candidate changed, added or
    removed. None when the proposal changes no plugin (then the candidate is the base)."""
    proposed = proposed_files(hashes["base"], hashes["candidate"])
    if not proposed:
        return None
    out = tmp / "trusted-rules"
    for rel, sha in sorted(hashes["candidate"].items()):
        if rel in proposed or hashes["base"].get(rel) != sha:
            continue
        dest = out / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(base_rules / rel, dest)
    for sub in {p.split("/", 1)[0] for p in PLUGIN_GLOBS}:
        (out / sub).mkdir(parents=True, exist_ok=True)
    plan = Plan(rules=out, proposed=proposed)
    plan.targets = sorted(Path(rel).stem for rel in proposed if rel.startswith("targets/"))
    plan.primitives = [rel for rel in proposed if rel.startswith("primitives/")]
    rules = (candidate_info or {}).get("rules") or []
    for spec in rules:
        clean = valid_spec(spec)
        if clean is not None and clean["relpath"] in proposed:
            plan.stubs.append(clean)
    plan.record = sorted(s["code"] for s in plan.stubs)
    return plan


def valid_spec(spec: Any) -> dict[str, Any] | None:
    """A proposed rule's description (data from the contained run), or None when it is
    not one a rulebook could load: a stand-in only borrows what sorts and gates a rule."""
    from cakegov.check.rulebook import PHASES, STATUSES

    if not isinstance(spec, dict):
        return None
    out: dict[str, Any] = {}
    for key, kind in _SPEC_KEYS.items():
        value = spec.get(key, "")
        if not isinstance(value, kind):
            return None
        out[key] = value[:20000]
    if not _CODE.match(out["code"]) or out["phase"] not in PHASES or \
            out["status"] not in STATUSES or not out["relpath"].startswith("checks/"):
        return None
    return out


class Replayer:
    """Worker side: one rule per spec whose `check` yields, on its k-th call for a schedule,
    the findings the proposed rule yielded on its k-th call there. A call the proposed rule
    never made, or a recorded call the trusted run does not make, is a divergence: the
    engine took another path with proposed code loaded than without it."""

    def __init__(self, specs: list[dict[str, Any]],
                 replay: dict[str, dict[str, list[list[Any]]]]):
        from cakegov.check.rulebook import RulePlugin

        self.replay = replay
        self.file = ""  # the schedule being checked (repairs re-check it as "<repair>")
        self.calls: dict[str, int] = {}
        self.divergence: list[str] = []
        self.rules = [RulePlugin(
            code=s["code"], name=s["name"], version=s["version"], severity=s["severity"],
            authority=s["authority"], category=s["category"], status=s["status"],
            motivated_by=(), doc=s["doc"], relpath=s["relpath"], sha256=s["sha256"],
            check=self._check(s["code"]), phase=s["phase"]) for s in specs]

    def _check(self, code: str) -> Any:
        from cakegov.check.findings import Finding

        def check(ctx: Any) -> Iterator[Any]:
            k = self.calls.get(code, 0)
            self.calls[code] = k + 1
            recorded = self.replay.get(self.file, {}).get(code, [])
            if k >= len(recorded):
                self.divergence.append(f"{code}: the trusted run made call {k + 1}, the "
                                       f"candidate run {len(recorded)}")
                return
            for raw in recorded[k]:
                yield Finding.model_validate(raw)

        return check

    def begin(self, file: str) -> None:
        """Calls are counted per schedule, in the order the engine makes them (those of
        the re-checks of repairs included), as the candidate run recorded them."""
        self.file, self.calls, self.divergence = file, {}, []

    def finish(self, file: str) -> list[str]:
        """The divergences of one schedule, once the trusted run is done with it."""
        for code in sorted(self.replay.get(file, {})):
            made, recorded = self.calls.get(code, 0), len(self.replay[file][code])
            if made < recorded:
                self.divergence.append(f"{code}: the candidate run made {recorded} "
                                       f"call(s), the trusted run {made}")
        out, self.divergence = self.divergence, []
        return out
