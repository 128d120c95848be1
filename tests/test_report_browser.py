"""A real browser looks at the HTML report: headless Chromium lays out a blocked
proposal at 1280x900, and the verdict and the valid schedules newly rejected start on the
first screen. Skipped when no Chromium runs here (`.ci/run` installs one from the
distribution's packages where it can: `apt-get install chromium`)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from cakegov.govern.report import render_html

from .report_samples import result


def _browser() -> str | None:
    """A headless-capable Chromium, or None (a snap stub or a broken install is none)."""
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path is None:
            continue
        try:
            run = subprocess.run([path, "--version"], capture_output=True, text=True,
                                 timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if run.returncode == 0 and re.search(r"\d+\.\d+", run.stdout):
            return path
    return None


CHROMIUM = _browser()
WIDTH, HEIGHT = 1280, 900
PROBE = """<script>
const out = {viewport: {width: window.innerWidth, height: window.innerHeight}};
for (const id of ["verdict", "blockers", "valid-newly-rejected"]) {
  const el = document.getElementById(id);
  if (el) { const r = el.getBoundingClientRect();
            out[id] = {top: r.top + window.scrollY, height: r.height}; }
}
const pre = document.createElement("pre");
pre.id = "cakegov-positions"; pre.textContent = JSON.stringify(out);
document.body.appendChild(pre);
</script>"""


def _chromium(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    assert CHROMIUM is not None
    return subprocess.run([CHROMIUM, "--headless", "--disable-gpu", "--no-sandbox",
                           "--hide-scrollbars", "--no-first-run", "--disable-extensions",
                           f"--user-data-dir={cwd / 'profile'}",
                           f"--window-size={WIDTH},{HEIGHT}", *args],
                          capture_output=True, text=True, timeout=120, cwd=cwd)


def positions(html: str, tmp_path: Path) -> dict:
    """Where the page's decisive elements lie, as laid out by Chromium at 1280x900: the
    page plus a script that writes their bounding boxes into the DOM, read back with
    --dump-dom (the report itself carries no script)."""
    page = tmp_path / "probe.html"
    page.write_text(html.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    run = _chromium("--dump-dom", page.as_uri(), cwd=tmp_path)
    found = re.search(r'<pre id="cakegov-positions">([^<]*)</pre>', run.stdout)
    assert found, run.stderr[-2000:]
    return json.loads(found.group(1))


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium installed (apt-get install chromium)")
def test_a_browser_shows_the_decision_on_the_first_screen(tmp_path):
    html = render_html(result("blocked", links=True))
    where = positions(html, tmp_path)
    assert where["viewport"]["width"] == WIDTH
    assert where["verdict"]["top"] < 100 and where["verdict"]["height"] > 20
    assert where["blockers"]["top"] < HEIGHT
    assert 0 < where["valid-newly-rejected"]["top"] < HEIGHT - 100, where
    # and a screenshot of that first screen comes out at the width asked for
    shot = tmp_path / "first-screen.png"
    report = tmp_path / "proposal.html"
    report.write_text(html, encoding="utf-8")
    run = _chromium(f"--screenshot={shot}", report.as_uri(), cwd=tmp_path)
    assert shot.is_file() and shot.stat().st_size > 10_000, run.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert int.from_bytes(shot.read_bytes()[16:20], "big") == WIDTH


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium installed (apt-get install chromium)")
def test_the_probe_can_fail(tmp_path):
    """The position check sees a section pushed below the first screen."""
    html = render_html(result("blocked"))
    pushed = html.replace('<section id="valid-newly-rejected"',
                          '<div style="height:2000px"></div><section id="valid-newly-rejected"')
    assert positions(pushed, tmp_path)["valid-newly-rejected"]["top"] > HEIGHT
