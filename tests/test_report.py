"""The merge report's structure, decision first: for an eligible, a blocked and an empty
proposal, the Markdown and the HTML carry the verdict, then each section of flipped
schedules with its count, in order; the HTML parses with balanced `<details>`; links to
the judged lines are built only from well-formed parts. (test_report_browser.py lays the
page out in a real browser.)"""

from __future__ import annotations

import json
import os
import re
from html.parser import HTMLParser

import pytest

from cakegov.govern.models import SECTIONS, Flip, ProposalResult
from cakegov.govern.report import (
    COMMENT_BYTES,
    COMMENT_LIMIT,
    MARKER,
    link_base,
    render_html,
    render_json,
    render_markdown,
)

from .report_samples import HEAD, result

KINDS = ("eligible", "blocked", "empty")
TITLES = [title for _, title, _ in SECTIONS]
EXPECTED = {  # section title -> count, per sample
    "eligible": dict.fromkeys(TITLES, 0) | {"New catches": 1},
    "blocked": dict.fromkeys(TITLES, 0) | {
        "Valid schedules newly rejected": 3, "Lost catches": 1, "New catches": 1,
        "Changed diagnostics": 1, "Fires at an unlabelled place on an invalid schedule": 6},
    "empty": dict.fromkeys(TITLES, 0),
}


class Outline(HTMLParser):
    """The parts of a report page the tests look at: every tag's open/close balance, the
    `<h1>`/`<h2>` texts in order, the sections' counts, the links."""

    VOID = frozenset({"meta", "br", "hr", "img", "input", "link", "path", "circle", "rect",
                      "line"})

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.headings: list[str] = []
        self.sections: dict[str, int] = {}
        self.hrefs: list[str] = []
        self.details = 0
        self._heading: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "section" and "data-count" in a:
            self.sections[a["id"]] = int(a["data-count"])
        if tag == "a":
            self.hrefs.append(a.get("href", ""))
        if tag == "details":
            self.details += 1
        if tag in ("h1", "h2"):
            self._heading = []
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        if tag == "a":
            self.hrefs.append(dict(attrs).get("href", ""))

    def handle_endtag(self, tag):
        if tag in self.VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
            return
        self.stack.pop()
        if tag in ("h1", "h2") and self._heading is not None:
            self.headings.append(" ".join("".join(self._heading).split()))
            self._heading = None

    def handle_data(self, data):
        if self._heading is not None:
            self._heading.append(data)


def outline(html: str) -> Outline:
    parser = Outline()
    parser.feed(html)
    parser.close()
    assert not parser.errors, parser.errors[:5]
    assert parser.stack == [], parser.stack  # every element closed, <details> included
    return parser


def md_headings(md: str) -> list[str]:
    """The Markdown's headings in order, outside fences and `<details>` blocks."""
    out, fence = [], None
    for line in md.splitlines():
        if line.startswith("```"):
            run = len(line) - len(line.lstrip("`"))
            fence = run if fence is None else (None if run >= fence else fence)
            continue
        if fence is None and line.startswith("#"):
            out.append(line.lstrip("#").strip())
    return out


@pytest.mark.parametrize("kind", KINDS)
def test_markdown_is_decision_first(kind):
    r = result(kind)
    md = render_markdown(r)
    lines = md.splitlines()
    assert lines[0] == MARKER and md.count(MARKER) == 1
    verdict = {"eligible": "Eligible for merge", "blocked": "Blocked"}[r.verdict]
    assert lines[1].startswith("### ") and f" {verdict}: " in lines[1]  # words, not a symbol
    heads = md_headings(md)
    assert heads[0] == lines[1][4:]
    sections = [f"{t} ({n})" for t, n in EXPECTED[kind].items()]
    order = ["Blockers (2)"] * (kind == "blocked") + sections + \
        ["Motivating cases"] * (kind != "empty") + ["Change", "Confusion table (before → after)",
                                                    "Verifier cost", "Provenance", "Notes"]
    assert heads[1:] == order, heads
    assert md.count("<details") == md.count("</details>")
    # the one-line decision counts every decisive section
    if kind == "blocked":
        assert lines[1] == ("### ❌ Blocked: 3 valid schedules newly rejected, 1 lost catch, "
                            "1 new catch, 1 changed diagnostic, 6 fires at unlabelled places "
                            "on invalid schedules; 2 blockers")
    if kind == "empty":
        assert "Eligible for merge: 0 valid schedules newly rejected, 0 lost catches" in lines[1]
    assert "neither rulebook" not in md
    assert not re.search(r"[^\n]- R\d{3}: ", md)  # no list item glued to a paragraph
    if kind != "empty":
        assert "(limit 2×).\n\n- R010: 9.3 ms over all schedules" in md


@pytest.mark.parametrize("kind", KINDS)
def test_html_is_decision_first_and_well_formed(kind):
    r = result(kind)
    html = render_html(r)
    page = outline(html)
    assert page.headings[0].startswith({"eligible": "Eligible for merge: ",
                                        "blocked": "Blocked: "}[r.verdict])
    titles = [re.sub(r" \d+$", "", h) for h in page.headings]
    expect = ["Blockers"] * (kind == "blocked") + TITLES
    assert titles[1:1 + len(expect)] == expect, titles
    counts = {re.sub(r" \d+$", "", h): int(h.rsplit(" ", 1)[1]) for h in page.headings
              if h.rsplit(" ", 1)[-1].isdigit()}
    assert {t: counts[t] for t in TITLES} == EXPECTED[kind]
    assert list(page.sections.values()) == list(EXPECTED[kind].values())
    # the verdict icon is an inline SVG, and no emoji stands in for it
    head = html[html.index('<header id="verdict"'):html.index("</header>")]
    assert "<svg" in head and not re.search("[\u2600-\u27bf\U0001f300-\U0001faff]", head)
    assert "neither rulebook" not in html
    assert "http" not in html.replace("http://www.w3.org/2000/svg", "")  # no asset, no link


def test_only_changed_rules_get_a_row_the_others_one_line():
    md = render_markdown(result("blocked"))
    table = md[md.index("#### Confusion table"):md.index("#### Verifier cost")]
    assert "| **R010** | smem-bank-conflict | changed | 0.1.0 → 0.2.0 |" in table
    assert "<summary>37 unchanged rules: TP 37, FP 0, FN 0 in total" in table
    html = render_html(result("blocked"))
    chart = html[html.index('aria-label="confusion counts'):]
    chart = chart[:chart.index("</svg>")]
    assert "R010" in chart and "R001" not in chart  # the chart shows what changed
    assert 'aria-label="confusion' not in render_html(result("empty"))


def test_each_flipped_schedule_shows_a_diff_of_its_findings():
    md = render_markdown(result("blocked"))
    block = md[md.index("<code>corpus/invalid/gemm/reworded.cake</code>"):]
    block = block[:block.index("</details>")]
    assert "```diff\n- error[R010]: old words\n" in block
    assert "\n+ error[R010]: bank conflict on &#96;a_smem&#96;" not in block  # raw in a fence
    assert "\n+ error[R010]: bank conflict on `a_smem`\n" in block
    lost = md[md.index("<code>corpus/invalid/gemm/lost.cake</code>"):]
    assert "\n- error[R010]: bank conflict" in lost[:lost.index("</details>")]
    # a schedule in two sections is shown once, then named
    two = result("blocked")
    both = two.flips[-1].model_copy(update={"kinds": ["changed_diagnostic", "new_catch"],
                                            "sections": []})
    both = Flip.model_validate(both.model_dump())
    text = render_markdown(two.model_copy(update={"flips": [*two.flips[:-1], both]}))
    assert text.count("<code>corpus/invalid/gemm/reworded.cake</code>") == 1
    assert "- &#96;corpus/invalid/gemm/reworded.cake&#96;: shown under New catches above." \
        in text.replace("`corpus/invalid/gemm/reworded.cake`",
                        "&#96;corpus/invalid/gemm/reworded.cake&#96;")


def test_sections_follow_from_the_kinds_and_cannot_be_forged():
    data = json.loads(render_json(result("blocked")))
    assert data["flips"][0]["sections"] == ["valid_newly_rejected"]
    assert data["flips"][3]["sections"] == ["unlabelled_fire"]
    assert ProposalResult.model_validate(data).flips[0].sections == ["valid_newly_rejected"]
    data["flips"][0]["sections"] = ["changed_diagnostic"]  # hide a newly rejected schedule
    with pytest.raises(ValueError, match="do not follow from kinds"):
        ProposalResult.model_validate(data)
    # the JSON stays deterministic
    assert render_json(result("blocked")) == render_json(result("blocked"))


def test_links_to_the_judged_lines_in_github_actions(monkeypatch):
    monkeypatch.delenv("GITHUB_SERVER_URL", raising=False)
    monkeypatch.delenv("GITHUB_REPOSITORY", raising=False)
    r = result("blocked", links=True)
    url = f"https://github.com/cake/gov/blob/{HEAD}/corpus/valid/gemm/valid_0.cake#L12"
    md = render_markdown(r)
    assert f"[corpus/valid/gemm/valid_0.cake:12]({url})" in md
    assert f'href="{url}"' in render_html(r)
    # a trusted job re-rendering the artifact links into its own repository
    monkeypatch.setenv("GITHUB_SERVER_URL", "https://ghe.example.com")
    monkeypatch.setenv("GITHUB_REPOSITORY", "org/repo")
    assert link_base(r) == f"https://ghe.example.com/org/repo/blob/{HEAD}/"
    monkeypatch.delenv("GITHUB_SERVER_URL")
    monkeypatch.delenv("GITHUB_REPOSITORY")
    links = r.provenance.links
    assert links is not None
    for bad in ({"server_url": "javascript:alert(1)"}, {"server_url": "https://x\")y"},
                {"repository": "a/b/../c d"}, {"sha": "HEAD"}, {"sha": "1" * 40},
                {"prefix": "../"}):
        forged = r.model_copy(update={"provenance": r.provenance.model_copy(
            update={"links": links.model_copy(update=bad)})})
        assert link_base(forged) is None, bad
        assert "](https://" not in render_markdown(forged)
    weird = r.model_copy(update={"flips": [r.flips[0].model_copy(
        update={"file": "corpus/a (b)/x [1].cake"})]})
    md = render_markdown(weird)
    assert "corpus/a%20%28b%29/x%20%5B1%5D.cake#L12)" in md
    assert "[corpus/a (b)/x &#91;1&#93;.cake:12](" in md


def test_source_links_are_recorded_only_in_github_actions():
    from cakegov.govern.verdict import source_links

    env = {"GITHUB_ACTIONS": "true", "GITHUB_SERVER_URL": "https://github.com",
           "GITHUB_REPOSITORY": "cake/gov"}
    links = source_links(HEAD, "sub/dir", env)
    assert links is not None and links.sha == HEAD and links.prefix == "sub/dir/"
    assert source_links(HEAD, "", {**env, "GITHUB_ACTIONS": "false"}) is None
    assert source_links("abc", "", env) is None
    assert source_links(HEAD, "", {**env, "GITHUB_REPOSITORY": "x"}) is None


def test_truncation_keeps_the_decisive_sections():
    r = result("blocked")
    big = [f.model_copy(update={"file": f"{f.file[:-5]}_{i}.cake",
                                "new_findings": f.new_findings * 60})
           for i in range(25) for f in r.flips]
    text = render_markdown(r.model_copy(update={"flips": big}))
    assert len(text) <= COMMENT_LIMIT and len(text.encode()) <= COMMENT_BYTES
    assert "Truncated to fit GitHub's 65,536-character comment limit" in text
    heads = md_headings(text)
    assert "Valid schedules newly rejected (75)" in heads
    assert "Fires at an unlabelled place on an invalid schedule (150)" in heads
    # the newly rejected valid schedules are the last to be cut
    assert "<code>corpus/valid/gemm/valid_0_0.cake</code>" in text
    assert text.count("<details") == text.count("</details>")


# ---- render-proposal: an untrusted artifact -------------------------------------------


def _rendered(tmp_path, data) -> object:
    from typer.testing import CliRunner

    from cakegov.cli import app

    tmp_path.mkdir(parents=True, exist_ok=True)
    source = tmp_path / "proposal.json"
    source.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return CliRunner().invoke(app, ["render-proposal", str(source), "--report-dir",
                                    str(tmp_path / "out")])


def test_render_proposal_refuses_results_propose_rule_cannot_produce(tmp_path):
    """A verdict that its blockers contradict, another schema version, JSON nested past
    the parser's recursion limit: exit 2, nothing rendered, never an internal error."""
    data = json.loads(result("blocked").model_dump_json())
    assert _rendered(tmp_path, data).exit_code == 0
    cases = {
        "blocked, no blockers": {**data, "blockers": [], "exit_code": 0},
        "eligible with blockers": {**data, "verdict": "eligible", "exit_code": 0},
        "exit code": {**data, "exit_code": 7},
        "schema": {**data, "schema_version": 999},
    }
    for name, bad in cases.items():
        run = _rendered(tmp_path / name.replace(" ", "_"), bad)
        assert run.exit_code == 2, (name, run.output)
        assert "not a valid proposal result" in run.output
        assert not (tmp_path / name.replace(" ", "_") / "out").exists()
    deep = _rendered(tmp_path / "deep", "[" * 100_000)
    assert deep.exit_code == 2 and "internal error" not in deep.output


def test_render_proposal_does_not_read_a_fifo(tmp_path):
    from typer.testing import CliRunner

    from cakegov.cli import app

    fifo = tmp_path / "proposal.json"
    os.mkfifo(fifo)
    run = CliRunner().invoke(app, ["render-proposal", str(fifo)])
    assert run.exit_code == 2 and "not a regular file" in run.output


def test_a_schedule_in_several_sections_is_omitted_once():
    from cakegov.govern.report import Level, _sections

    res = result("blocked")
    first = res.flips[0]
    other = next(k for k, _, _ in SECTIONS if k not in first.sections)
    twice = first.model_copy(update={"sections": [*first.sections, other]})
    res = res.model_copy(update={"flips": [twice, *res.flips[1:]]})
    _, omitted = _sections(res, None, Level(findings=False, evidence=False, max_flips=0))
    assert omitted == len(res.flips)  # not 13 of 12


def test_the_gpu_row_says_the_mode_once():
    """`--gpu off` is in the probe's own detail; the provenance row must not repeat it."""
    md = render_markdown(result("blocked"))
    [row] = [line for line in md.splitlines() if line.startswith("| GPU |")]
    assert row.count("--gpu off") == 1 and "none: not probed" in row
