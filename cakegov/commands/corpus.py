"""The `cakegov corpus` group: `crosscheck` (checker against simulator), `manifest`,
`mutate`, `run` and `accept`. Each is a thin call into cakegov/corpus or cakegov/sim;
bad input exits 2 with a message naming the file."""

from __future__ import annotations

import random
import re
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from cakegov.check.exits import EXIT_REJECTED
from cakegov.commands.shared import (
    QuietOpt,
    RulesOpt,
    WorkloadsOpt,
    err,
    load_rulebook,
    load_wls,
    out,
    project_root,
    resolve_rules,
    resolve_workloads,
    usage_error,
)

corpus_app = typer.Typer(help="The labelled corpus.", no_args_is_help=True,
                         rich_markup_mode=None)

# mutate, run and accept name their directories DIR (the shared options above name none)
RulesDirOpt = Annotated[Path | None, typer.Option("--rules", metavar="DIR",
                                                  help="Rulebook directory.")]
WorkloadsDirOpt = Annotated[Path | None, typer.Option("--workloads", metavar="DIR",
                                                      help="Workload directory.")]


class CrossFormat(StrEnum):
    text = "text"
    json = "json"
    markdown = "markdown"


@corpus_app.command("crosscheck")
def corpus_crosscheck(
    dirs: Annotated[list[Path] | None, typer.Argument(help="Corpus directories or files "
                    "(default: corpus/valid and corpus/invalid).")] = None,
    fmt: Annotated[CrossFormat, typer.Option("--format", "-f", help="Output format.")] =
    CrossFormat.text,
    seeds: Annotated[int, typer.Option("--seeds", help="Seeds per shape.", min=1,
                     max=64)] = 3,
    jobs: Annotated[int, typer.Option("--jobs", "-j", min=1, help="Worker processes; the "
                    "output is the same for every number.")] = 1,
    quiet: QuietOpt = False,
    rules: RulesOpt = None,
    workloads: WorkloadsOpt = None,
) -> None:
    """Run the checker and the CPU simulator on every corpus schedule and compare the
    verdict with the dynamic outcome. Exit 0 no disagreement, 1 a disagreement, 2 usage."""
    from cakegov.sim.crosscheck import (
        crosscheck,
        render_json,
        render_markdown,
        render_text,
        summary,
    )

    book = load_rulebook(rules)
    wls = load_wls(workloads)
    root = project_root()
    if not dirs:
        if root is None:
            raise usage_error("no corpus found: pass the directories")
        dirs = [root / "corpus" / "valid", root / "corpus" / "invalid"]
    missing = [str(d) for d in dirs if not d.exists()]
    if missing:
        raise usage_error(f"no such file or directory: {', '.join(missing)}")
    from cakegov.check.runner import expand_paths
    from cakegov.progress import progress

    files = expand_paths(dirs)
    with progress("crosschecking", len(files), quiet=quiet) as advance:
        if jobs > 1 and len(files) > 1:
            from cakegov.corpus.crossjobs import crosscheck_jobs

            rows = crosscheck_jobs(files, resolve_rules(rules).resolve(),
                                   resolve_workloads(workloads).resolve(), jobs=jobs,
                                   seeds=seeds, root=root, advance=advance)
        else:
            rows = crosscheck(files, book, wls, seeds=seeds, root=root, advance=advance)
    if not rows:
        raise usage_error("no *.cake schedules found")
    render = {CrossFormat.json: render_json, CrossFormat.markdown: render_markdown,
              CrossFormat.text: render_text}[fmt]
    sys.stdout.write(render(rows))
    raise typer.Exit(1 if summary(rows)["disagreements"] else 0)


@corpus_app.command("manifest")
def corpus_manifest(
    check: Annotated[bool, typer.Option("--check", help="Verify instead of writing: exit 1 "
                     "when corpus/MANIFEST.json does not describe the files.")] = False,
) -> None:
    """Write corpus/MANIFEST.json (every case's sha256 and labels, every workload's
    sha256), or verify it with --check."""
    from cakegov.check.lock import atomic_write
    from cakegov.corpus import manifest

    root = project_root()
    if root is None:
        raise usage_error("not inside a cakegov project (no rules/checks and corpus/)")
    corpus = root / "corpus"
    if check:
        found = manifest.problems(corpus)
        if found:
            for line in found:
                err.print(line, markup=False)
            raise typer.Exit(EXIT_REJECTED)
        data = manifest.build(corpus)
        out.print(f"manifest ok: {len(data['cases'])} cases, {len(data['workloads'])} "
                  "workload files", markup=False)
        return
    data = manifest.build(corpus)
    atomic_write(corpus / manifest.MANIFEST_NAME, manifest.render(data))
    out.print(f"wrote {corpus / manifest.MANIFEST_NAME}: {len(data['cases'])} cases",
              markup=False)


class RunFormat(StrEnum):
    text = "text"
    json = "json"


def _corpus() -> Path:
    root = project_root()
    if root is None:
        raise usage_error("not inside a cakegov project (no rules/checks and corpus/)")
    return root / "corpus"


def _setup(rules: Path | None, workloads: Path | None):
    return load_rulebook(rules), load_wls(workloads)


def _operators(ops: list[str] | None) -> list[str] | None:
    import difflib

    from cakegov.corpus.mutate import OPERATORS

    if not ops:
        return None
    names = [o for item in ops for o in item.split(",") if o]
    unknown = [o for o in names if o not in OPERATORS]
    if unknown:
        close = difflib.get_close_matches(unknown[0], list(OPERATORS), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise usage_error(f"unknown operator {unknown[0]!r}{hint} (operators: "
                          f"{', '.join(OPERATORS)})")
    return names


def _shard(text: str | None) -> tuple[int, int]:
    if text is None:
        return (1, 1)
    m = re.fullmatch(r"([0-9]+)/([0-9]+)", text)
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise usage_error(f"--shard {text!r}: expected I/N with 1 <= I <= N")
    return int(m.group(1)), int(m.group(2))


def _label(planned: list, book, wls, jobs: int, rules: Path | None,
           workloads: Path | None, advance) -> list:
    from cakegov.corpus import suite as suites

    if jobs > 1 and len(planned) > 1:
        return suites.label_jobs(planned, resolve_rules(rules).resolve(),
                                 resolve_workloads(workloads).resolve(), jobs=jobs,
                                 advance=advance)
    return suites.label(planned, book, wls, advance=advance)


def _write_suite(corpus: Path, planned: list, book, wls, quiet: bool, jobs: int = 1,
                 rules: Path | None = None, workloads: Path | None = None) -> None:
    from cakegov.check.lock import atomic_write
    from cakegov.corpus import suite as suites
    from cakegov.progress import progress

    path = corpus / suites.SUITE_NAME
    digest = suites.oracle_digest(corpus, book)
    kept: list = []
    if suites.load_oracle(path) == digest:  # same workloads, plugins and engine
        try:
            kept, planned = suites.reuse(suites.load(path), planned)
        except suites.SuiteError:
            kept = []
    with progress("labelling mutants", len(planned), quiet=quiet, unit="mutants") as advance:
        entries = kept + _label(planned, book, wls, jobs, rules, workloads, advance)
    if kept:
        sys.stdout.write(f"reused {len(kept)} labels of the previous suite (same oracle)\n")
    atomic_write(path, suites.render(entries, digest))
    counts = suites.summary(entries)["outcomes"]
    sys.stdout.write(f"wrote {path}: {len(entries)} mutants ("
                     + ", ".join(f"{n} {k}" for k, n in counts.items()) + ")\n")


def corpus_mutate(
    sources: Annotated[list[Path] | None, typer.Argument(help="Schedules to mutate "
                       "(default: the valid corpus).")] = None,
    ops: Annotated[list[str] | None, typer.Option("--ops", metavar="OPS", help="Operators, "
                   "comma-separated or repeated (default: all; see --list).")] = None,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Write each mutant there as "
                       "a .cake file with its origin and outcome.")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the sample --limit draws.")] = 0,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="Keep this many "
                     "mutants, drawn with --seed.")] = None,
    suite: Annotated[bool, typer.Option("--suite", help="Regenerate the standing suite "
                     "corpus/MUTANTS.json from the whole valid corpus.")] = False,
    stored: Annotated[bool, typer.Option("--stored", help="With --suite: label again "
                      "exactly the mutants the stored suite names (no new ones), under "
                      "the current oracle.")] = False,
    list_ops: Annotated[bool, typer.Option("--list", help="List the operators and exit.")] =
    False,
    jobs: Annotated[int, typer.Option("--jobs", "-j", min=1, help="Worker processes (the "
                    "labels are the same for any number).")] = 1,
    quiet: QuietOpt = False,
    rules: RulesDirOpt = None,
    workloads: WorkloadsDirOpt = None,
) -> None:
    """Apply defect operators to schedules and label every mutant by its dynamic outcome
    in the CPU simulator (deadlock, race, wrong result, out of bounds, launch failure,
    benign), never by the checker. Benign mutants are valid schedules."""
    from cakegov.check.lock import atomic_write
    from cakegov.corpus import mutate
    from cakegov.corpus import suite as suites
    from cakegov.progress import progress

    if list_ops:
        for name in mutate.OPERATORS:
            sys.stdout.write(f"{name:<18} {mutate.DESCRIPTIONS[name]}\n")
        return
    corpus = _corpus()
    if suite and (sources or ops or limit or out_dir):
        raise usage_error("--suite regenerates the whole standing suite: it takes no "
                          "sources, --ops, --limit or --out")
    if stored and not suite:
        raise usage_error("--stored relabels the standing suite: give it with --suite")
    missing = [str(s) for s in sources or [] if not s.is_file()]
    if missing:
        raise usage_error(f"no such file: {', '.join(missing)}")
    book, wls = _setup(rules, workloads)
    if stored:
        try:
            planned = suites.replan(corpus, suites.load(corpus / suites.SUITE_NAME),
                                    suites.vocabulary(book, wls))
        except suites.SuiteError as exc:
            raise usage_error(str(exc)) from None
        _write_suite(corpus, planned, book, wls, quiet, jobs, rules, workloads)
        return
    planned = suites.plan(corpus, book, wls, operators=_operators(ops),
                          sources=sources or None)
    if limit is not None and limit < len(planned):
        planned = sorted(random.Random(seed).sample(planned, limit),
                         key=lambda p: (p.mutant.source, p.mutant.operator, p.mutant.site))
    if suite:
        _write_suite(corpus, planned, book, wls, quiet, jobs, rules, workloads)
        return
    with progress("labelling mutants", len(planned), quiet=quiet, unit="mutants") as advance:
        entries = _label(planned, book, wls, jobs, rules, workloads, advance)
    for p, e in zip(planned, entries, strict=True):
        sys.stdout.write(f"{e.key}  line {e.line}  {e.outcome:<20} {e.what}\n")
        if out_dir is not None:
            out_dir.mkdir(parents=True, exist_ok=True)
            stem = Path(e.source).stem
            name = out_dir / f"{stem}.{e.operator}.{e.site}.cake"
            header = (f"# origin: mutant {e.source} {e.operator} {e.site}\n"
                      f"# outcome: {e.detail.splitlines()[0][:200] if e.detail else e.outcome}\n"
                      + ("# expect: clean\n" if e.outcome == "benign" else ""))
            atomic_write(name, header + p.mutant.text)


def corpus_run(
    mutants: Annotated[bool, typer.Option("--mutants", help="Also run the standing "
                       "mutation suite (corpus/MUTANTS.json): kill rate and benign "
                       "acceptance.")] = False,
    shard: Annotated[str | None, typer.Option("--shard", metavar="I/N", help="Run the I-th "
                     "of N shards (items and mutants alike).")] = None,
    min_kill_rate: Annotated[float | None, typer.Option("--min-kill-rate", min=0.0, max=1.0,
                             help="Fail when the kill rate is below this fraction.")] = None,
    max_benign_rejected: Annotated[int, typer.Option("--max-benign-rejected", min=0,
                                   help="Fail when more benign mutants than this are "
                                   "rejected (each is listed either way).")] = 0,
    min_at_line: Annotated[float | None, typer.Option("--min-at-line", min=0.0, max=1.0,
                           help="Fail when fewer invalid items than this fraction are "
                           "named by their labelled code at their labelled line.")] = None,
    max_p099: Annotated[float | None, typer.Option("--max-p099", min=0.0, max=1.0,
                        help="Fail when more invalid items than this fraction are reported "
                        "P099 (an anomaly no rule's repair removes).")] = None,
    fmt: Annotated[RunFormat, typer.Option("--format", "-f", help="Output format.")] =
    RunFormat.text,
    jobs: Annotated[int, typer.Option("--jobs", "-j", min=1, help="Worker processes (the "
                    "output is the same for any number).")] = 1,
    quiet: QuietOpt = False,
    rules: RulesDirOpt = None,
    workloads: WorkloadsDirOpt = None,
) -> None:
    """Check every corpus item against its labels and print per-rule precision and recall,
    rule coverage per family, the incomplete rate and, with --mutants, the mutation kill
    rate, and how often the labelled code is found at the labelled line. Exit 0 passed, 1 a
    label mismatch (or a benign mutant rejected, the kill rate below --min-kill-rate, the
    labelled-line share below --min-at-line, the P099 share above --max-p099), 2 usage."""
    from cakegov.corpus import run as runs
    from cakegov.corpus import suite as suites
    from cakegov.progress import Bar

    corpus = _corpus()
    where = _shard(shard)
    book, wls = _setup(rules, workloads)
    entries = None
    if mutants:
        try:
            entries = suites.load(corpus / suites.SUITE_NAME)
        except suites.SuiteError as exc:
            raise usage_error(str(exc)) from None
    with Bar(quiet=quiet) as bar:
        try:
            if jobs > 1:
                bar.start("corpus run", len(runs.shard_of(runs.corpus_paths(corpus), where))
                          + (len(runs.shard_of(entries, where)) if entries else 0))
                result = runs.run_jobs(corpus, resolve_rules(rules).resolve(),
                                       resolve_workloads(workloads).resolve(), jobs=jobs,
                                       with_suite=entries is not None, shard=where,
                                       advance=bar.advance)
            else:
                result = runs.run(corpus, book, wls, suite=entries, shard=where,
                                  advance=bar.advance,
                                  total=lambda n: bar.start("corpus run", n))
        except suites.SuiteError as exc:
            raise usage_error(str(exc)) from None
    render = runs.render_json if fmt is RunFormat.json else runs.render_text
    sys.stdout.write(render(result, min_kill_rate, max_benign_rejected, min_at_line,
                            max_p099))
    raise typer.Exit(1 if runs.failed(result, min_kill_rate, max_benign_rejected,
                                      min_at_line, max_p099) else 0)


def corpus_accept(
    files: Annotated[list[Path] | None, typer.Argument(help="Invalid corpus items whose "
                     "labels become the checker's current findings.")] = None,
    mutants: Annotated[bool, typer.Option("--mutants", help="Regenerate and relabel the "
                       "standing mutation suite (the same as `corpus mutate --suite`).")] =
    False,
    quiet: QuietOpt = False,
    rules: RulesDirOpt = None,
    workloads: WorkloadsDirOpt = None,
) -> None:
    """Update expectations explicitly (CI never does): rewrite the `# expect:` labels of
    invalid items to the checker's current blocking findings, or relabel the mutation
    suite by the simulator. A valid item is never given findings."""
    from cakegov.check.lock import atomic_write
    from cakegov.check.runner import Checker
    from cakegov.corpus.labels import relabel

    corpus = _corpus()
    if mutants:
        if files:
            raise usage_error("--mutants takes no files")
        from cakegov.corpus import suite as suites

        book, wls = _setup(rules, workloads)
        _write_suite(corpus, suites.plan(corpus, book, wls), book, wls, quiet)
        return
    if not files:
        raise usage_error("name the invalid items to accept, or pass --mutants")
    book, wls = _setup(rules, workloads)
    checker = Checker(book, dict(wls))
    for f in files:
        if not f.is_file():
            raise usage_error(f"no such file: {f}")
        try:
            rel = f.resolve().relative_to(corpus.resolve())
        except ValueError:
            raise usage_error(f"{f}: not under {corpus}") from None
        if rel.parts[0] != "invalid":
            raise usage_error(f"{f}: only invalid items take findings as labels; a valid "
                              "schedule the checker rejects is a false positive to fix")
    for f in files:
        text = f.read_text(encoding="utf-8")
        result = checker.check_bytes(f.read_bytes(), str(f))
        found = sorted({(x.code, x.span.line) for x in result.findings
                        if x.span and (x.severity == "blocking" or x.authority == "coverage")})
        if not found:
            raise usage_error(f"{f}: the checker finds nothing: an invalid item needs a "
                              "labelled finding (or `# todo-expect:` for a known gap)")
        new = relabel(text, found)
        if new != text:
            atomic_write(f, new)
        sys.stdout.write(f"{f}: {', '.join(f'{c}@{line}' for c, line in found)}\n")


corpus_app.command("mutate")(corpus_mutate)
corpus_app.command("run")(corpus_run)
corpus_app.command("accept")(corpus_accept)

GROUPS = {"corpus": corpus_app}
