"""The merge report, rendered from one `ProposalResult`: Markdown (the pull-request
comment and job summary), standalone HTML with inline SVG charts, JSON (the model) and
SARIF of the findings the candidate adds.

Decision first: the verdict with the count of each decisive section, the blockers, then
the flipped schedules by section (valid schedules newly rejected, lost catches, new
catches, changed diagnostics, fires at an unlabelled place on an invalid schedule, false
positives that went away), each schedule with a diff of its findings and, when the run
recorded where its commit lives, links to the lines; then the change, the confusion table
(changed rules; the unchanged ones in one line with their totals), cost and provenance.

Templates (cakegov/govern/templates/, Jinja2, StrictUndefined) only place what this module
has prepared: every string, table row, link and chart coordinate is computed here. The
Markdown fits GitHub's comment limit: when the full text is too long, flipped-schedule
details are shed step by step (finding diffs and links, then evidence, then schedules
beyond a count, the least decisive sections first); the verdict, the blockers, every
section's count and every rule of the confusion table always stay, and the report says
what was cut."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from cakegov.check.findings import FileResult, Finding
from cakegov.check.lock import atomic_write
from cakegov.check.render_sarif import render_sarif
from cakegov.check.render_text import render_finding
from cakegov.govern.models import (
    COST_MIN_SCHEDULES,
    SECTIONS,
    VERDICT_TITLES,
    Confusion,
    Flip,
    ProposalResult,
    RuleRow,
    SourceLinks,
    decision_line,
)
from cakegov.ir.parse import source_lines

MARKER = "<!-- cakegov-proposal -->"
COMMENT_LIMIT = 65_536  # characters: GitHub's limit for a comment body
COMMENT_BYTES = 60_000  # and a margin in UTF-8 bytes, which the comment job checks
FORMATS = ("md", "html", "json", "sarif")
FILE_NAMES = {"md": "proposal.md", "html": "proposal.html", "json": "proposal.json",
              "sarif": "proposal.sarif"}
TEMPLATES = Path(__file__).parent / "templates"
KIND_TITLES = {"new_catch": "new catch", "new_false_positive": "new false positive",
               "lost_catch": "lost catch", "changed_diagnostic": "changed diagnostic",
               "removed_false_positive": "removed false positive"}
LIST_CAP = 25
# text markers of the verdict in Markdown (the words carry it; the symbol only helps)
VERDICT_MARKS = {"eligible": "✅", "blocked": "❌", "evidence-unavailable": "⚠️", "error": "❌"}
# sections whose schedules are shown expanded: the facts a reviewer decides on
OPEN_SECTIONS = frozenset({"valid_newly_rejected", "lost_catch", "new_catch"})
LINKS_PER_FLIP = 8


def _env(markdown: bool = False) -> Environment:
    """The report templates' environment. HTML autoescapes. Markdown escapes every
    interpolated value with `md_escape` (Jinja's `finalize`), so no plugin-provided string
    can open a heading, a fence, an HTML element, a comment or a link; only values the
    template marks (`marker`, `fence`, `fenced`) pass as they are."""
    env = Environment(loader=FileSystemLoader(str(TEMPLATES)), undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                      autoescape=lambda name: bool(name) and ".html" in name,
                      finalize=_md_finalize if markdown else None)
    env.filters["cell"] = (lambda s: s) if markdown else \
        (lambda s: str(s).replace("|", "\\|").replace("\n", " "))
    env.filters["fence"] = _fence
    env.filters["fenced"] = _fenced
    env.filters["url"] = (lambda u: Markup(_checked_url(u))) if markdown else _checked_url
    return env


_URL = re.compile(r"https://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9%/._~#-]*)?")


def _checked_url(url: object) -> str:
    """A link target this module built: percent-encoded, so it holds nothing that Markdown
    or HTML would read as structure; anything else is refused (an internal error)."""
    text = str(url)
    if not _URL.fullmatch(text):
        raise ValueError(f"not a link this report builds: {text!r}")
    return text


_MD_SPECIAL = str.maketrans({
    "&": "&amp;", "<": "&lt;", ">": "&gt;", "`": "&#96;", "|": "&#124;", "[": "&#91;",
    "]": "&#93;", "#": "&#35;", "\n": " ", "\r": " ",
})


def md_escape(value: object) -> str:
    """`value` as inert inline Markdown text: the characters that open HTML, code spans,
    table cells, links and headings become character references (decoded for display,
    never parsed), line breaks become spaces (so nothing can start a block)."""
    return str(value).translate(_MD_SPECIAL)


def _md_finalize(value: object) -> object:
    if isinstance(value, Markup):
        return value
    return md_escape(value)


def _fence(lines: object) -> Markup:
    """A backtick fence longer than any backtick run in `lines`, so none closes it."""
    runs = [len(m) for line in (lines or ()) for m in re.findall(r"`+", str(line))]
    return Markup("`" * max(3, max(runs, default=0) + 1))


def _fenced(line: object) -> Markup:
    """One line of a fenced block: raw (a fence interprets nothing) but on one line, and
    with any HTML comment opener broken up, so the comment's marker occurs only once."""
    return Markup(str(line).replace("\r", " ").replace("\n", " ").replace("<!--", "<!- -"))


# ---- view ----------------------------------------------------------------------------

def _pair(before: int | None, after: int | None) -> str:
    b = "–" if before is None else str(before)
    a = "–" if after is None else str(after)
    return b if b == a else f"{b} → {a}"


def _conf(row: RuleRow, attr: str) -> str:
    before = None if row.before is None else getattr(row.before, attr)
    after = None if row.after is None else getattr(row.after, attr)
    return _pair(before, after)


def _finding_text(f: Finding, root: Path | None, cache: dict[str, list[str]]) -> str:
    if f.file not in cache:
        try:
            path = Path(f.file) if root is None else root / f.file
            cache[f.file] = source_lines(path.read_bytes().decode("utf-8", "replace"))
        except OSError:
            cache[f.file] = []
    return render_finding(f, cache[f.file])


@dataclass
class Level:
    """How much of each flipped schedule the Markdown shows."""

    findings: bool = True
    evidence: bool = True
    max_flips: int | None = None


_SERVER = re.compile(r"https://[A-Za-z0-9.-]+(:[0-9]{1,5})?")
_REPOSITORY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}/[A-Za-z0-9_.-]{1,100}")
_SHA = re.compile(r"[0-9a-f]{40}")
_PREFIX = re.compile(r"([A-Za-z0-9_.-]+/)*")


def link_base(result: ProposalResult, env: dict[str, str] | None = None) -> str | None:
    """`https://server/owner/repo/blob/<sha>/<prefix>` for the judged commit, or None.

    The commit is the result's (it is what was judged), and must be the provenance's head
    commit; the server and the repository are this process's GitHub environment when it
    has one (a trusted job re-rendering an artifact links into its own repository), else
    what the run recorded. Every part is checked against its form before it is used."""
    links: SourceLinks | None = result.provenance.links
    if links is None:
        return None
    env = dict(os.environ) if env is None else env
    server = env.get("GITHUB_SERVER_URL") or links.server_url
    repository = env.get("GITHUB_REPOSITORY") or links.repository
    if not (_SERVER.fullmatch(server) and _REPOSITORY.fullmatch(repository)
            and _SHA.fullmatch(links.sha) and links.sha == result.provenance.head_commit
            and _PREFIX.fullmatch(links.prefix) and ".." not in links.prefix.split("/")):
        return None
    return f"{server}/{repository}/blob/{links.sha}/{quote(links.prefix)}"


def _file_url(base: str, file: str, line: int | None) -> str | None:
    parts = file.split("/")
    if not file or file.startswith("/") or any(p in ("", ".", "..") for p in parts):
        return None
    return base + quote(file, safe="/") + (f"#L{line}" if line else "")


def _links(flip: Flip, base: str | None) -> list[dict[str, str]]:
    """The lines the flip's findings point at, at the judged commit (the file itself when
    no finding has a line)."""
    if base is None:
        return []
    lines = sorted({f.span.line for f in [*flip.removed_findings, *flip.new_findings]
                    if f.span is not None and f.span.line > 0}
                   | {i.line for i in flip.items if i.line})
    out = []
    for line in lines[:LINKS_PER_FLIP] or [None]:
        url = _file_url(base, flip.file, line)
        if url is not None:
            out.append({"label": f"{flip.file}:{line}" if line else flip.file, "url": url})
    return out


def _diff(flip: Flip, root: Path | None, cache: dict[str, list[str]]) -> list[str]:
    """The findings that went away (`-`) and those that came (`+`), each line of each
    finding prefixed, so that no finding text starts a line of the block."""
    out = []
    for sign, found in (("-", flip.removed_findings), ("+", flip.new_findings)):
        for f in found:
            out += [f"{sign} {line}".rstrip() for line in
                    _finding_text(f, root, cache).splitlines()]
    return out


def _item_title(kind: str, valid: bool) -> str:
    if kind == "new_false_positive":
        return "valid schedule rejected" if valid else "fires at an unlabelled place"
    return KIND_TITLES[kind]


def _evidence_title(flip: Flip) -> str:
    side = flip.evidence.accepted_by
    if side is None:
        return ("Evidence (both rulebooks reject this schedule: simulated with the base "
                "rulebook, not compiled)")
    return f"Evidence (the {side} rulebook accepts it; lowered with that rulebook)"


def _flip_view(flip: Flip, root: Path | None, level: Level, cache: dict[str, list[str]],
               base: str | None, anchor: str) -> dict[str, Any]:
    codes = sorted({i.code for i in flip.items if i.code})
    ev = flip.evidence
    return {
        "file": flip.file, "schedule": flip.schedule or "", "anchor": anchor,
        "codes": ", ".join(codes),
        "verdicts": f"{flip.verdict_before} → {flip.verdict_after}",
        "labels": flip.labels, "valid": "valid" if flip.valid else "invalid",
        "blocking": any(k in ("new_false_positive", "lost_catch") for k in flip.kinds),
        "simulator": ev.simulator.status,
        "points": [f"{_item_title(i.kind, flip.valid)}: {i.message}" for i in flip.items],
        "diff": _diff(flip, root, cache) if level.findings else [],
        "links": _links(flip, base) if level.findings else [],
        "evidence": [
            ("simulator", ev.simulator.status, ev.simulator.detail),
            ("compile", ev.compile.status, ev.compile.detail),
            ("GPU run", ev.gpu.status, ev.gpu.detail),
        ] if level.evidence else [],
        "evidence_title": _evidence_title(flip),
        "source": "computed by proposed code (it uses a proposed primitive or target)"
        if flip.source == "proposed" else "recomputed by trusted code",
    }


def _sections(result: ProposalResult, root: Path | None, level: Level
              ) -> tuple[list[dict[str, Any]], int]:
    """The flipped schedules by section, decisive first. A schedule is shown in full in
    the first section it belongs to and named in the others; with `level.max_flips`, only
    that many are shown in full (in section order) and the rest are counted."""
    base = link_base(result)
    cache: dict[str, list[str]] = {}
    index = {id(f): i for i, f in enumerate(result.flips)}
    first: dict[int, str] = {}
    budget = level.max_flips
    sections: list[dict[str, Any]] = []
    hidden_flips: set[int] = set()  # a schedule in several sections is counted once
    for kind, title, _ in SECTIONS:
        members = [f for f in result.flips if kind in f.sections]
        entries, hidden = [], 0
        for flip in members:
            i = index[id(flip)]
            if i in first:
                entries.append({"ref": True, "file": flip.file, "anchor": f"flip-{i + 1}",
                                "shown_in": first[i]})
                continue
            if budget is not None and budget <= 0:
                hidden += 1
                hidden_flips.add(i)
                continue
            first[i] = title
            if budget is not None:
                budget -= 1
            entries.append({"ref": False, **_flip_view(flip, root, level, cache, base,
                                                       f"flip-{i + 1}")})
        sections.append({"kind": kind, "title": title, "count": len(members),
                         "entries": entries, "hidden": hidden, "anchor": kind.replace("_", "-"),
                         "open": kind in OPEN_SECTIONS})
    return sections, len(hidden_flips)


def _ms(value: float) -> str:
    return f"{value:.2f} ms" if value < 100 else f"{value:.0f} ms"


def view(result: ProposalResult, root: Path | None = None, level: Level | None = None
         ) -> dict[str, Any]:
    """Everything the templates print, as strings and lists."""
    level = level or Level()
    p, cost, run = result.provenance, result.timing.cost, result.timing.run
    sections, omitted = _sections(result, root, level)
    rules = [{"code": r.code, "name": r.name, "change": r.change,
              "version": _pair(r.version_before, r.version_after) if r.version_before
              != r.version_after else (r.version_after or ""),
              "status": r.status_after or r.status_before or "",
              "tp": _conf(r, "tp"), "fp": _conf(r, "fp"), "fn": _conf(r, "fn"),
              "changed": r.change != "unchanged" or r.before != r.after}
             for r in result.rules]
    ledger = run.ledger
    gpu = (f"{p.gpu.device} (--gpu {p.gpu.mode})" if p.gpu.present
           else f"none: {p.gpu.detail}" if f"--gpu {p.gpu.mode}" in p.gpu.detail
           else f"none: {p.gpu.detail} (--gpu {p.gpu.mode})")
    m = p.machine
    return {
        "marker": Markup(MARKER),
        "headline": decision_line(result.verdict, result.flips, len(result.blockers)),
        "verdict_mark": VERDICT_MARKS.get(result.verdict, ""),
        "verdict_title": VERDICT_TITLES.get(result.verdict, result.verdict),
        "verdict": result.verdict,
        "proposed": [{"source": f.source, "placed_at": f.placed_at, "kind": f.kind,
                      "sha": f.sha256[:12]} for f in result.proposed],
        "mode": result.mode,
        "blockers": [b.message for b in result.blockers],
        "plugins": [{"relpath": c.relpath, "kind": c.kind, "change": c.change,
                     "version": _pair(c.version_before, c.version_after)
                     if c.change == "changed" else (c.version_after or c.version_before or ""),
                     "problem": c.problem or ""} for c in result.plugin_changes],
        "contract": [{"path": c.path, "kind": c.kind, "change": c.change, "detail": c.detail,
                      "reason": c.reason or ("none" if c.needs_reason else ""),
                      "diff": c.diff.splitlines() if level.findings else []}
                     for c in result.contract_changes if c.kind != "engine"][:LIST_CAP],
        "contract_digest": result.contract_digest,
        "engine_changes": sum(1 for c in result.contract_changes if c.kind == "engine"),
        "rules": [r for r in rules if r["changed"]],
        "unchanged": _unchanged(result.rules, rules),
        "motivating": [{"rule": m_.rule, "file": m_.file, "status": m_.status,
                        "ok": m_.status == "caught", "detail": m_.detail}
                       for m_ in result.motivating],
        "sections": sections, "flip_count": len(result.flips), "flips_omitted": omitted,
        "failures": [{"side": f.side, "rule": f.rule or "(worker)", "file": f.file or "",
                      "kind": f.kind, "message": f.message, "where": f.where}
                     for f in result.failures[:LIST_CAP]],
        "failures_omitted": max(0, len(result.failures) - LIST_CAP),
        "corpus": (f"{result.corpus.valid} valid and {result.corpus.invalid} invalid schedules"
                   + (f" (shard {result.corpus.shard} of {result.corpus.total_before_shard})"
                      if result.corpus.shard else "")
                   + f" from {', '.join(result.corpus.dirs)}"),
        "cost": {
            "schedules": cost.schedules,
            "median": (_ms(cost.median_before_ms), _ms(cost.median_after_ms),
                       f"{cost.ratio:.2f}×"),
            "p95": (_ms(cost.p95_before_ms), _ms(cost.p95_after_ms),
                    f"{cost.p95_after_ms / cost.p95_before_ms:.2f}×"
                    if cost.p95_before_ms else "–"),
            "limit": f"{cost.limit_ratio:g}×", "exceeded": cost.exceeded,
            "judged": cost.judged, "min_schedules": COST_MIN_SCHEDULES,
            "measured": cost.measured,
            "rules": [f"{r.code}: {r.total_ms:.1f} ms over all schedules, median "
                      f"{r.median_ms:.3f} ms per schedule" for r in cost.rules],
        },
        "provenance": [
            ("base", f"`{p.base_ref}` = {p.base_commit[:12]} ({p.base_how})"),
            ("head", f"{p.head_commit[:12]}" + (" + uncommitted changes"
                                                 if p.working_tree_dirty else "")),
            ("verifier digest before", f"`{p.verifier_before[:16]}`"),
            ("verifier digest after", f"`{(p.verifier_after or 'none')[:16]}`"),
            ("corpus", f"{result.corpus.valid + result.corpus.invalid} schedules, digest "
                       f"`{p.corpus_digest[:16]}`" + (f", manifest version "
                                                        f"`{p.corpus_version[:16]}`"
                                                        if p.corpus_version else "")),
            ("engine", f"cakegov {p.engine_version}, source digest `{p.engine_digest[:16]}`"),
            ("machine", f"{m.cpu_model or m.machine}, {m.cpus} CPUs, {m.system}, Python "
                        f"{m.python}, host {m.hostname}"),
            ("GPU", gpu),
            ("limits", f"{result.options['time_limit_s']:g} s per rule per schedule, "
                       f"{result.options['memory_limit_mb']} MiB address space; "
                       f"containment: {result.options.get('containment', 'unknown')}"),
            ("run", f"{run.run_id[:12]} at {run.started_at}, {run.wall_s:.1f} s wall, "
                    f"{run.jobs} job(s), {run.workers} worker(s), cache {run.cache_hits} hit(s) "
                    f"/ {run.cache_misses} miss(es)"),
            ("ledger", _ledger_line(ledger)),
        ],
        "notes": result.notes[:LIST_CAP],
        "cut": "",
    }


def _unchanged(rows: list[RuleRow], views: list[dict[str, Any]]) -> dict[str, Any]:
    """The rules whose counts and code did not change: one line with their totals, and
    their rows for whoever opens it."""
    same = [r for r, v in zip(rows, views, strict=True) if not v["changed"]]
    total = {a: sum(getattr(r.after or r.before or Confusion(), a) for r in same)
             for a in ("tp", "fp", "fn")}
    return {"count": len(same), "rows": [v for v in views if not v["changed"]],
            "line": f"{len(same)} unchanged {'rule' if len(same) == 1 else 'rules'}: "
                    f"TP {total['tp']}, FP {total['fp']}, FN {total['fn']} in total, "
                    "the same before and after"}


def _ledger_line(ledger: dict | None) -> str:
    """The record this result became and the ledger head after it, so that a ledger cut
    back later is visible (`cakegov audit verify --head HASH`)."""
    if not ledger:
        return "not recorded"
    line = f"record {ledger['id']} (`{str(ledger['hash'])[:16]}`)"
    if "head" in ledger:
        line += (f"; ledger head: {ledger.get('records')} record(s), `{ledger['head']}` "
                 f"(check with `cakegov audit verify --head {ledger['head']}`)")
    return line


# ---- charts --------------------------------------------------------------------------

def _confusion_chart(rules: list[RuleRow]) -> dict[str, Any]:
    """Grouped bars: per changed rule, TP/FP/FN before (pale) and after (solid)."""
    rows = [r for r in rules if (r.change != "unchanged" or r.before != r.after)
            and (r.before != Confusion() or r.after != Confusion())]
    top = max([1] + [getattr(c, a) for r in rows for c in (r.before, r.after) if c
                     for a in ("tp", "fp", "fn")])
    label_w, col_w, gap, row_h = 190, 150, 60, 22
    rects, texts = [], []
    for j, head in enumerate(("TP", "FP", "FN")):
        texts.append({"x": label_w + j * (col_w + gap), "y": 14, "text": head, "cls": "head"})
    for i, r in enumerate(rows):
        y = 24 + i * row_h
        texts.append({"x": 0, "y": y + 13, "text": f"{r.code} {r.name}"[:28], "cls": "label"})
        for j, attr in enumerate(("tp", "fp", "fn")):
            x = label_w + j * (col_w + gap)
            for k, (conf, cls) in enumerate(((r.before, "before"), (r.after, "after"))):
                value = getattr(conf, attr) if conf is not None else 0
                width = round(col_w * value / top, 1)
                rects.append({"x": x, "y": y + 2 + k * 8, "w": max(width, 0.5), "h": 7,
                              "cls": f"{cls} {attr}",
                              "title": f"{r.code} {attr.upper()} {cls}: "
                                       f"{value if conf is not None else '–'}"})
            texts.append({"x": x + col_w + 4, "y": y + 13, "cls": "value",
                          "text": _pair(r.before and getattr(r.before, attr),
                                        r.after and getattr(r.after, attr))})
    return {"width": label_w + 3 * (col_w + gap), "height": 30 + len(rows) * row_h,
            "rects": rects, "texts": texts}


def _cost_chart(result: ProposalResult) -> dict[str, Any]:
    cost = result.timing.cost
    bars = [("median before", cost.median_before_ms, "before"),
            ("median after", cost.median_after_ms, "after"),
            ("p95 before", cost.p95_before_ms, "before"),
            ("p95 after", cost.p95_after_ms, "after")]
    top = max([0.001] + [b[1] for b in bars] + [cost.median_before_ms * cost.limit_ratio])
    width, label_w = 420, 110
    rects, texts = [], []
    for i, (label, value, cls) in enumerate(bars):
        y = 8 + i * 26
        w = round(width * value / top, 1)
        rects.append({"x": label_w, "y": y, "w": max(w, 0.5), "h": 18, "cls": cls,
                      "title": f"{label}: {_ms(value)}"})
        texts.append({"x": 0, "y": y + 13, "text": label, "cls": "label"})
        texts.append({"x": label_w + w + 4, "y": y + 13, "text": _ms(value), "cls": "value"})
    limit_x = round(label_w + width * cost.median_before_ms * cost.limit_ratio / top, 1)
    return {"width": label_w + width + 90, "height": 8 + len(bars) * 26 + 16,
            "rects": rects, "texts": texts, "limit_x": limit_x,
            "limit_label": f"limit {cost.limit_ratio:g}× median before"}


# ---- renderers -----------------------------------------------------------------------

def _fits(text: str, limit: int, limit_bytes: int) -> bool:
    return len(text) <= limit and len(text.encode("utf-8")) <= limit_bytes


def render_markdown(result: ProposalResult, root: Path | None = None,
                    limit: int = COMMENT_LIMIT, limit_bytes: int = COMMENT_BYTES) -> str:
    """The pull-request comment; at most `limit` characters and `limit_bytes` bytes."""
    template = _env(markdown=True).get_template("proposal.md.j2")
    n = len(result.flips)
    levels = [Level(), Level(findings=False), Level(findings=False, evidence=False)]
    cap = n
    while cap > 1:
        cap //= 2
        levels.append(Level(findings=False, evidence=False, max_flips=cap))
    levels.append(Level(findings=False, evidence=False, max_flips=0))
    cuts = ["", "finding diffs and links of flipped schedules", "finding diffs, links and "
            "evidence of flipped schedules"]
    text = ""
    for i, level in enumerate(levels):
        v = view(result, root, level)
        if i > 0:
            what = cuts[i] if i < len(cuts) else (
                f"finding diffs, links and evidence, and {v['flips_omitted']} of {n} flipped "
                "schedules (the least decisive sections first)")
            v["cut"] = (f"Truncated to fit GitHub's {limit:,}-character comment limit: "
                        f"{what} left out. The HTML and JSON reports have everything.")
        text = template.render(**v)
        if _fits(text, limit, limit_bytes):
            return text
    note = "\n\n_…cut at the comment limit; see the HTML or JSON report._\n"
    room = min(limit, limit_bytes) - len(note.encode("utf-8"))
    return text.encode("utf-8")[:room].decode("utf-8", errors="ignore") + note


def render_html(result: ProposalResult, root: Path | None = None) -> str:
    v = view(result, root)
    chart = _confusion_chart(result.rules)
    v["chart_confusion"] = chart if chart["rects"] else None
    cost = result.timing.cost
    changed = cost.exceeded or not 0.8 <= cost.ratio <= 1.25
    v["chart_cost"] = _cost_chart(result) if changed and cost.schedules else None
    return _env().get_template("proposal.html.j2").render(**v)


def render_json(result: ProposalResult) -> str:
    return json.dumps(result.model_dump(mode="json"), indent=2, sort_keys=True,
                      ensure_ascii=False) + "\n"


@dataclass(frozen=True)
class _SarifRule:
    code: str
    name: str
    summary: str
    doc: str
    severity: str
    category: str
    status: str
    version: str

    def section(self, title: str) -> str:
        from cakegov.check.rulebook import doc_sections

        return doc_sections(self.doc).get(title, "") if self.doc else ""


@dataclass(frozen=True)
class _SarifBook:
    """The slice of a Rulebook that render_sarif reads, from the result (the candidate is
    never imported in this process)."""

    rules: tuple[_SarifRule, ...]
    verifier: str

    def digest(self) -> str:
        return self.verifier


def render_new_sarif(result: ProposalResult, root: Path | None = None) -> str:
    rules = tuple(_SarifRule(r.code, r.name, r.summary, r.doc or r.summary, r.severity,
                             r.category, r.status_after or "", r.version_after or "")
                  for r in result.rules if r.change != "removed")
    book = _SarifBook(rules, result.provenance.verifier_after or "")
    files = [FileResult(file=f.file, schedule=f.schedule, verdict=f.verdict_after,  # type: ignore
                        findings=tuple(f.new_findings)) for f in result.flips if f.new_findings]
    return render_sarif(files, book, root=root)  # type: ignore[arg-type]


def write_reports(result: ProposalResult, directory: Path, formats: list[str],
                  root: Path | None = None) -> list[Path]:
    """Write each format atomically; return the paths."""
    directory.mkdir(parents=True, exist_ok=True)
    render = {"md": lambda: render_markdown(result, root),
              "html": lambda: render_html(result, root),
              "json": lambda: render_json(result),
              "sarif": lambda: render_new_sarif(result, root)}
    written = []
    for fmt in formats:
        path = directory / FILE_NAMES[fmt]
        atomic_write(path, render[fmt]())
        written.append(path)
    return written
