"""The result models of `cakegov propose-rule` and what they are built from: every stage
of the flow (inputs, judge, evidence, verdict, report) imports these and nothing above it;
`proposal.py` orchestrates the stages. `ProposalResult` is what every report renders and
the ledger keeps; everything that depends on the clock lives under `timing`."""


from __future__ import annotations

import os
import platform
import socket
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cakegov.check.findings import (
    EXIT_CLEAN,
    EXIT_INCOMPLETE,
    EXIT_REJECTED,
    Finding,
)
from cakegov.govern.changes import ProposalInputError

FlipKind = Literal["new_catch", "new_false_positive", "lost_catch", "changed_diagnostic",
                   "removed_false_positive"]
BLOCKING_FLIPS: frozenset[str] = frozenset({"new_false_positive", "lost_catch"})
# The report's sections of flipped schedules, decisive first. A schedule belongs to every
# section one of its flip kinds puts it in (`flip_sections`); a new false positive on a
# valid schedule (it is newly rejected) and one at an unlabelled place on an invalid
# schedule (it was rejected already) are different facts and never share a section.
SectionKind = Literal["valid_newly_rejected", "lost_catch", "new_catch", "changed_diagnostic",
                      "unlabelled_fire", "removed_false_positive"]
SECTIONS: tuple[tuple[SectionKind, str, tuple[str, str]], ...] = (
    ("valid_newly_rejected", "Valid schedules newly rejected",
     ("valid schedule newly rejected", "valid schedules newly rejected")),
    ("lost_catch", "Lost catches", ("lost catch", "lost catches")),
    ("new_catch", "New catches", ("new catch", "new catches")),
    ("changed_diagnostic", "Changed diagnostics", ("changed diagnostic", "changed diagnostics")),
    ("unlabelled_fire", "Fires at an unlabelled place on an invalid schedule",
     ("fire at an unlabelled place on an invalid schedule",
      "fires at unlabelled places on invalid schedules")),
    ("removed_false_positive", "False positives that went away",
     ("false positive that went away", "false positives that went away")),
)
# the sections a one-line decision counts even when they are empty
HEADLINE_SECTIONS: tuple[SectionKind, ...] = ("valid_newly_rejected", "lost_catch",
                                              "new_catch", "changed_diagnostic",
                                              "unlabelled_fire")
VERDICT_TITLES = {"eligible": "Eligible for merge", "blocked": "Blocked",
                  "evidence-unavailable": "Required evidence unavailable", "error": "Error"}
Verdict = Literal["eligible", "blocked", "evidence-unavailable", "error"]
COST_LIMIT = 2.0
COST_MIN_SCHEDULES = 10  # a median of fewer samples is noise
COST_FLOOR_MS = 0.5  # and so is a doubling of a sub-millisecond median
SCHEMA_VERSION = 1


class _Model(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")


class ProposedFile(_Model):
    """A file of the proposal and where it sits in the candidate rulebook."""

    source: str
    placed_at: str
    kind: str
    sha256: str


class PluginChange(_Model):
    relpath: str
    kind: str
    change: Literal["added", "changed", "removed"]
    version_before: str | None
    version_after: str | None
    sha256_before: str | None
    sha256_after: str | None
    problem: str | None = None


class ContractChange(_Model):
    path: str
    kind: Literal["engine", "workload", "label", "corpus-removed", "corpus-added",
                  "corpus-content", "target", "primitive", "rule-status"]
    change: str
    detail: str
    needs_reason: bool
    reason: str | None = None
    sha256_before: str | None = None
    sha256_after: str | None = None
    diff: str = ""  # unified diff, cut at DIFF_CAP characters


class Confusion(_Model):
    """Per rule: labelled (code, line) found (tp), found where no label says so or on a
    valid schedule (fp), labelled but not found (fn)."""

    tp: int = 0
    fp: int = 0
    fn: int = 0


class RuleRow(_Model):
    code: str
    name: str
    change: Literal["added", "changed", "removed", "unchanged"]
    summary: str = ""
    severity: str = "blocking"
    category: str = ""
    doc: str = ""  # the full documentation, for added and changed rules only
    version_before: str | None = None
    version_after: str | None = None
    status_before: str | None = None
    status_after: str | None = None
    before: Confusion | None = None
    after: Confusion | None = None


class FlipItem(_Model):
    kind: FlipKind
    code: str | None = None
    line: int | None = None
    message: str


class EvidenceItem(_Model):
    status: str
    detail: str = ""


class Evidence(_Model):
    """Dynamic evidence for a flipped schedule, from the rulebook that accepts it."""

    accepted_by: Literal["base", "candidate"] | None = None
    simulator: EvidenceItem
    compile: EvidenceItem
    gpu: EvidenceItem


class Flip(_Model):
    """A schedule whose verdict or findings differ between the two rulebooks."""

    file: str
    schedule: str | None = None
    valid: bool
    labels: str
    verdict_before: str
    verdict_after: str
    kinds: list[FlipKind]
    items: list[FlipItem]
    new_findings: list[Finding] = Field(default_factory=list)
    removed_findings: list[Finding] = Field(default_factory=list)
    evidence: Evidence
    # where the candidate result came from: "trusted" (recomputed without proposed code,
    # govern/trusted.py) or "proposed" (the schedule needs a proposed primitive or target)
    source: Literal["trusted", "proposed"] = "trusted"
    # the report sections it belongs to: always `flip_sections(kinds, valid)`, filled in
    # when absent and refused when it disagrees (an artifact cannot re-file a schedule)
    sections: list[SectionKind] = Field(default_factory=list)

    @model_validator(mode="after")
    def _sections_follow_from_the_kinds(self) -> Flip:
        expected = flip_sections(self.kinds, self.valid)
        if not self.sections:
            object.__setattr__(self, "sections", expected)  # frozen: set once, here
        elif self.sections != expected:
            raise ValueError(f"sections {self.sections} do not follow from kinds "
                             f"{self.kinds} (valid: {self.valid}): expected {expected}")
        return self


def flip_sections(kinds: list[FlipKind] | list[str], valid: bool) -> list[SectionKind]:
    """The report sections a flipped schedule with these flip kinds belongs to, in the
    report's order."""
    has = set(kinds)
    member = {"valid_newly_rejected": valid and "new_false_positive" in has,
              "lost_catch": "lost_catch" in has, "new_catch": "new_catch" in has,
              "changed_diagnostic": "changed_diagnostic" in has,
              "unlabelled_fire": not valid and "new_false_positive" in has,
              "removed_false_positive": "removed_false_positive" in has}
    return [kind for kind, _, _ in SECTIONS if member[kind]]


def decision_line(verdict: str, flips: list[Flip], blockers: int) -> str:
    """The verdict in words with the count of each decisive section: `Blocked: 3 valid
    schedules newly rejected, 0 lost catches, ...; 2 blockers`."""
    counts = {kind: 0 for kind, _, _ in SECTIONS}
    for flip in flips:
        for kind in flip.sections:
            counts[kind] += 1
    words = {kind: w for kind, _, w in SECTIONS}
    shown = [k for k, _, _ in SECTIONS if k in HEADLINE_SECTIONS or counts[k]]
    parts = [f"{counts[k]} {words[k][0] if counts[k] == 1 else words[k][1]}" for k in shown]
    line = f"{VERDICT_TITLES.get(verdict, verdict)}: {', '.join(parts)}"
    if blockers:
        line += f"; {blockers} {'blocker' if blockers == 1 else 'blockers'}"
    return line


class RuleFailure(_Model):
    """A rule (or the worker running it) that crashed, hung or blew memory."""

    side: Literal["base", "candidate"]
    rule: str | None
    name: str = ""
    file: str | None
    kind: str
    message: str
    where: str = ""


class MotivatingCheck(_Model):
    rule: str
    file: str
    status: Literal["caught", "not caught", "missing", "not in shard", "not labelled",
                    "not invalid"]
    detail: str = ""


class Blocker(_Model):
    kind: str
    message: str
    rule: str | None = None
    files: list[str] = Field(default_factory=list)


class CorpusSummary(_Model):
    dirs: list[str]
    valid: int
    invalid: int
    external: list[str] = Field(default_factory=list)
    unlabelled: list[str] = Field(default_factory=list)
    shard: str | None = None
    total_before_shard: int = 0


class Machine(_Model):
    system: str
    machine: str
    python: str
    cpus: int
    cpu_model: str
    hostname: str


class GpuInfo(_Model):
    mode: Literal["auto", "off", "require"]
    present: bool
    device: str | None = None
    detail: str = ""


class SourceLinks(_Model):
    """Where the judged files can be read on the forge: recorded from the GitHub Actions
    environment of the run (`GITHUB_SERVER_URL`, `GITHUB_REPOSITORY`; `sha` is the commit
    that was checked out and judged, in the gate the pull request's merge commit,
    `GITHUB_SHA`). The report builds its links from these in trusted code, after checking
    each part's form; a job that re-renders the JSON uses its own server and repository."""

    server_url: str
    repository: str
    sha: str
    prefix: str = ""  # the project root inside the repository, "" or ending in "/"


class Provenance(_Model):
    base_ref: str
    base_how: str
    base_commit: str
    head_commit: str
    working_tree_dirty: bool
    engine_version: str
    engine_digest: str
    verifier_before: str
    verifier_after: str | None
    corpus_digest: str
    corpus_version: str | None = None  # sha256 of the corpus manifest (corpus/MANIFEST.json)
    machine: Machine
    gpu: GpuInfo
    links: SourceLinks | None = None


class RuleCost(_Model):
    code: str
    total_ms: float
    median_ms: float


class Cost(_Model):
    schedules: int = 0
    median_before_ms: float = 0.0
    median_after_ms: float = 0.0
    p95_before_ms: float = 0.0
    p95_after_ms: float = 0.0
    ratio: float = 1.0
    limit_ratio: float = COST_LIMIT
    judged: bool = False  # enough schedules for the median to mean something
    exceeded: bool = False
    measured: str = "this run"
    rules: list[RuleCost] = Field(default_factory=list)
    samples_before_ms: list[float] = Field(default_factory=list)
    samples_after_ms: list[float] = Field(default_factory=list)


class RunInfo(_Model):
    run_id: str
    started_at: str
    finished_at: str
    wall_s: float
    jobs: int
    cache_hits: int
    cache_misses: int
    workers: int
    ledger: dict[str, Any] | None = None


class Timing(_Model):
    """Everything that depends on the clock; the rest of the result is deterministic."""

    cost: Cost
    run: RunInfo


class ProposalResult(_Model):
    """The judgement of one proposal: what every report renders, what the ledger keeps."""

    schema_version: int = SCHEMA_VERSION
    verdict: Verdict
    exit_code: int
    summary: str
    mode: Literal["files", "working-tree"]
    options: dict[str, Any]
    proposed: list[ProposedFile]
    plugin_changes: list[PluginChange]
    contract_changes: list[ContractChange]
    contract_digest: str = ""  # what --accept-contract must name; "" with no change
    corpus: CorpusSummary
    rules: list[RuleRow]
    flips: list[Flip]
    failures: list[RuleFailure]
    motivating: list[MotivatingCheck]
    blockers: list[Blocker]
    notes: list[str]
    provenance: Provenance
    timing: Timing

    def deterministic_json(self) -> str:
        """The JSON of everything but `timing` (for comparing runs)."""
        return self.model_dump_json(exclude={"timing"})


# ---- options and orchestration ---------------------------------------------------------

@dataclass
class ProposalOptions:
    """What `cakegov propose-rule` was asked to do."""

    root: Path
    paths: list[Path] = field(default_factory=list)
    base: str | None = None
    corpus: list[Path] = field(default_factory=list)
    gpu: Literal["auto", "off", "require"] = "auto"
    jobs: int = 2
    shard: tuple[int, int] | None = None
    time_limit_s: float = 10.0
    memory_limit_mb: int = 4096
    cache: bool = True
    require_sandbox: bool = False
    accept_contract: str | None = None  # the contract digest a maintainer accepted


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """`I/N` with 1 <= I <= N."""
    if text is None:
        return None
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise ProposalInputError(f"--shard {text!r} is not I/N (e.g. 1/4)") from None
    if not 1 <= i <= n:
        raise ProposalInputError(f"--shard {text!r}: need 1 <= I <= N")
    return i, n


def machine() -> Machine:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return Machine(system=f"{platform.system()} {platform.release()}",
                   machine=platform.machine(), python=platform.python_version(),
                   cpus=os.cpu_count() or 1, cpu_model=model or platform.processor(),
                   hostname=socket.gethostname())


def probe_gpu(mode: str) -> GpuInfo:
    """Whether a CUDA device is there (never probed with `--gpu off`)."""
    if mode == "off":
        return GpuInfo(mode="off", present=False, detail="not probed (--gpu off)")
    try:
        from cakegov.gpu.device import NoDevice, probe
    except ImportError as exc:
        return GpuInfo(mode=mode, present=False, detail=f"GPU runner not importable: {exc}")
    try:
        device = probe()
    except NoDevice as exc:
        return GpuInfo(mode=mode, present=False, detail=str(exc))
    try:
        name = device.info.name
    finally:
        device.close()
    return GpuInfo(mode=mode, present=True, device=name, detail="")


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def consistency_problem(result: ProposalResult) -> str | None:
    """Why a proposal result (an artifact another job wrote) cannot be what propose-rule
    decided, or None: the schema version must be this engine's, and the verdict and exit
    code must be the ones `decide` gives for its blockers."""
    if result.schema_version != SCHEMA_VERSION:
        return (f"schema version {result.schema_version}; this engine renders version "
                f"{SCHEMA_VERSION}")
    if result.verdict == "error":
        return None
    expected = decide(result.blockers, "missing" if result.verdict ==
                      "evidence-unavailable" else None)
    if (result.verdict, result.exit_code) != expected:
        return (f"verdict {result.verdict!r} with exit code {result.exit_code} and "
                f"{len(result.blockers)} blocker(s); propose-rule decides {expected[0]!r} "
                f"with exit code {expected[1]}")
    return None


def decide(blockers: list[Blocker], evidence_missing: str | None) -> tuple[Verdict, int]:
    """Blocked beats missing evidence beats eligible (the order of `cakegov check`)."""
    if blockers:
        return "blocked", EXIT_REJECTED
    if evidence_missing:
        return "evidence-unavailable", EXIT_INCOMPLETE
    return "eligible", EXIT_CLEAN
