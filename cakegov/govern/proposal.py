"""`cakegov propose-rule`: judge a rulebook change over the labelled corpus.

`run_proposal` builds one `ProposalResult`, the model every report format renders from
(cakegov/govern/report.py) and the payload of the ledger record. The flow:

1. base = the `rules/` tree at a git ref, written to a temporary directory; candidate =
   base plus the proposed files (or the working tree's `rules/`); the judged cases and the
   contract changes (inputs.py, changes.py);
2. both rulebooks check every case in worker processes, never imported here (judge.py,
   isolate.py, worker.py); flips are classified and evidence is gathered for each
   (judge.py, evidence.py);
3. confusion table, verifier cost, motivating cases and blockers decide the verdict and
   the exit code (verdict.py). docs/governance.md describes all of it.

Everything that depends on the clock (durations, timestamps, cache statistics) lives under
`timing`; the rest of the model is byte-identical for the same inputs."""

from __future__ import annotations

import contextlib
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from time import perf_counter

from cakegov.check.findings import EXIT_USAGE
from cakegov.govern import inputs, judge, verdict
from cakegov.govern.cache import default_dir
from cakegov.govern.changes import ProposalInputError
from cakegov.govern.models import (
    ProposalOptions,
    ProposalResult,
    RunInfo,
    now,
    probe_gpu,
)
from cakegov.govern.tamper import Snapshot, Tamper
from cakegov.progress import Bar


def run_proposal(options: ProposalOptions, bar: Bar | None = None,
                 warnings: list[str] | None = None, guard: Guard | None = None
                 ) -> ProposalResult:
    """Judge the proposal; raises ProposalInputError for usage and input errors.

    `bar` shows progress; `warnings` receives what the user should know that the result
    does not decide (working-tree rule changes that were not proposed). `guard`, when
    given, snapshots the checkout, the cache and the ledger before any proposed code runs
    and compares them after the last worker is reaped (tamper.py): any change the parent
    did not make becomes a `tampered` blocker, and `guard.tamper` holds it."""
    started, clock = now(), perf_counter()
    run_id = uuid.uuid4().hex
    snapshot = guard.take(options.root) if guard is not None else None
    with tempfile.TemporaryDirectory(prefix="cakegov-propose-") as tmp:
        setup = inputs.prepare(options, Path(tmp))
        if warnings is not None and setup.unproposed:
            warnings.append(unproposed_warning(setup))
        gpu = probe_gpu(options.gpu)
        verdicts = judge.judge(setup, options, gpu, run_id, bar)
        cost_model = verdict.judge_costmodel(setup, options)  # while the rulebooks exist
    tampered = None
    if guard is not None and snapshot is not None:
        for path, sha in verdicts.cache.written.items():
            snapshot.excuse(path, sha)
        tampered = guard.tamper = snapshot.compare()
        guard.run_id = run_id
        if tampered:
            purge_cache(tampered, snapshot, default_dir(options.root))
    return verdict.assemble(setup, verdicts, options, gpu, RunInfo(
        run_id=run_id, started_at=started, finished_at=now(),
        wall_s=round(perf_counter() - clock, 3), jobs=options.jobs,
        cache_hits=verdicts.cache.hits, cache_misses=verdicts.cache.misses,
        workers=verdicts.workers), cost_model=cost_model, tamper=tampered or None)


@dataclass
class Guard:
    """Where the ledger is (None: not watched), and after the run what changed."""

    ledger: Path | None = None
    extra: tuple[Path, ...] = ()  # directories walked in full (the report directory)
    tamper: Tamper | None = None
    run_id: str = ""

    def take(self, root: Path) -> Snapshot:
        return Snapshot(root, self.ledger, self.extra, cache=default_dir(root))


def purge_cache(tampered: Tamper, snapshot: Snapshot, cache_dir: Path) -> None:
    """Delete the cache entries that something other than the parent added or changed,
    so that a later run never reads a result proposed code wrote."""
    base = cache_dir.resolve()
    for name in (*tampered.added, *tampered.changed):
        path = Path(name) if Path(name).is_absolute() else snapshot.root / name
        if path.parent.resolve().is_relative_to(base):
            with contextlib.suppress(OSError):
                path.unlink()


def unproposed_warning(setup: inputs.Setup) -> str:
    shown = ", ".join(setup.unproposed[:8])
    more = f" and {len(setup.unproposed) - 8} more" if len(setup.unproposed) > 8 else ""
    return (f"warning: {len(setup.unproposed)} rulebook file(s) changed in the working tree "
            f"but not proposed: {shown}{more}. They are not judged: the candidate is the "
            f"base ({setup.base.ref}) plus the proposed files only. Propose them too, or run "
            "`cakegov propose-rule` without paths to judge the working tree's rules/.")


@dataclass
class Outcome:
    """What `execute` did: the result, the files written, the lines to print."""

    result: ProposalResult | None
    exit_code: int
    written: list[Path] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)


def record(result: ProposalResult, ledger_path: Path | None, sources: dict[str, bytes]
           ) -> tuple[ProposalResult, str]:
    """Append the result to the audit ledger; the result then names its record."""
    try:
        from cakegov.govern.ledger import Ledger
    except ImportError:
        return result, "not recorded: the audit ledger is not available in this engine"
    digest = result.provenance.verifier_after or result.provenance.verifier_before
    with Ledger.open(ledger_path) as ledger:
        rec = ledger.append("proposal", result.model_dump(mode="json"), verifier_digest=digest,
                            blobs=sources or None)
        where = str(ledger.path)
        count, head = ledger.head()
    ref = {"id": rec.id, "hash": rec.hash, "path": where, "records": count, "head": head}
    run = result.timing.run.model_copy(update={"ledger": ref})
    timing = result.timing.model_copy(update={"run": run})
    return (result.model_copy(update={"timing": timing}),
            f"recorded as ledger record {rec.id} ({rec.hash[:16]}) in {where}")


def record_tamper(guard: Guard, result: ProposalResult, ledger_path: Path | None) -> str:
    """Append a `tamper` record, not a verdict: the run, what changed, and the records
    that are not the gate's (`audit verify` then fails naming them)."""
    from cakegov.govern.ledger import Ledger

    assert guard.tamper is not None
    digest = result.provenance.verifier_after or result.provenance.verifier_before
    payload = {"run_id": guard.run_id, **guard.tamper.payload(),
               "proposed": [p.source for p in result.proposed]}
    try:
        with Ledger.open(ledger_path) as ledger:
            rec = ledger.append("tamper", payload, verifier_digest=digest)
            where = str(ledger.path)
    except Exception as exc:  # the ledger's own errors are reported, not raised
        return f"not recorded: {exc}"
    return (f"no verdict recorded; ledger record {rec.id} ({rec.hash[:16]}) in {where} "
            "records the tampering")


def execute(options: ProposalOptions, report_dir: Path, formats: list[str],
            record_to: Path | None, do_record: bool = True, bar: Bar | None = None
            ) -> Outcome:
    """Run, record and write the reports: the whole `propose-rule` command."""
    from cakegov.govern.ledger import default_path
    from cakegov.govern.report import write_reports

    warnings: list[str] = []
    guard = Guard(ledger=record_to or default_path(), extra=(report_dir,))
    try:
        result = run_proposal(options, bar, warnings, guard)
    except ProposalInputError as exc:
        return Outcome(None, EXIT_USAGE, lines=[*warnings, f"error: {exc}"])
    lines = [*warnings, result.summary]
    if guard.tamper:
        lines.append(f"error: {guard.tamper.message()}")
        if do_record:
            lines.append(record_tamper(guard, result, record_to))
    elif do_record:
        sources = {}
        for item in result.proposed:
            path = Path(item.source)
            path = path if path.is_absolute() else options.root / path
            if path.is_file():
                sources[item.sha256] = path.read_bytes()
        try:
            result, line = record(result, record_to, sources)
        except Exception as exc:  # the ledger's own errors are reported, not raised
            line = f"not recorded: {exc}"
        lines.append(line)
    written = write_reports(result, report_dir, formats, options.root)
    lines += [f"wrote {p}" for p in written]
    return Outcome(result, result.exit_code, written, lines)
