"""`cakegov rank`: candidates of one workload ordered by predicted time at one shape, each
with its bottleneck, its fraction of the speed-of-light bound and what would help."""

from __future__ import annotations

import html
import json
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from cakegov.cost.estimate import Candidate, CostError, price, profile_of, shape_problem, us
from cakegov.cost.params import CostParamError, CostParams, params_for


class RankError(Exception):
    """Bad input to `rank` (the message locates it)."""


def parse_shape(text: str | None) -> dict[str, int]:
    """`M=4096,N=4096` -> {"M": 4096, "N": 4096}."""
    out: dict[str, int] = {}
    if not text:
        return out
    for item in text.split(","):
        name, sep, value = item.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name.isidentifier():
            raise RankError(f"--shape: `{item}` is not NAME=VALUE")
        try:
            n = int(value)
        except ValueError:
            raise RankError(f"--shape: `{item}`: {value!r} is not an integer") from None
        if n < 1:
            raise RankError(f"--shape: `{item}`: a size is at least 1")
        out[name] = n
    return out


@dataclass
class Ranked:
    workload: str
    shape: dict[str, int]
    rows: list[dict[str, Any]]
    skipped: list[dict[str, str]]
    calibration: str
    device: str


def rank(cands: list[Candidate], shape: dict[str, int], book: Any,
         device: str | None = None) -> list[Ranked]:
    by: dict[str, list[Candidate]] = defaultdict(list)
    skipped_load: list[dict[str, str]] = []
    for c in cands:
        if c.kernel is None:
            skipped_load.append({"file": c.file, "why": c.error})
        else:
            by[c.workload.name].append(c)
    if not by:
        raise RankError("no candidate could be lowered: " + "; ".join(
            f"{s['file']}: {s['why']}" for s in skipped_load[:5]))
    known = {s for cs in by.values() for c in cs for s in c.workload.sizes}
    unknown = sorted(set(shape) - known)
    if unknown:
        raise RankError(f"--shape: no workload among the candidates has size(s) "
                        f"{', '.join(unknown)}")
    if device is not None:
        for target in sorted({c.kernel.target for cs in by.values() for c in cs}):
            try:
                params_for(book, target).device(device)
            except CostParamError as exc:
                raise RankError(f"--device: {exc}") from None
    out: list[Ranked] = []
    for name, group in sorted(by.items()):
        wl = group[0].workload
        at = {**dict(wl.shapes[-1]), **{k: v for k, v in shape.items() if k in wl.sizes}}
        rows, skipped = [], list(skipped_load) if not out else []
        calib, dev_name = "", ""
        for c in group:
            why = shape_problem(c, at)
            if why:
                skipped.append({"file": c.file, "why": why})
                continue
            try:
                params = params_for(book, c.kernel.target)
                dev = params.device(device)
                pr = price(profile_of(c, at, book), params, dev)
            except (CostError, CostParamError) as exc:
                skipped.append({"file": c.file, "why": str(exc)})
                continue
            calib, dev_name = params.calibration, dev.name
            rows.append(_row(c, pr, params))
        rows.sort(key=lambda r: (r["time_ns"], r["file"]))
        for i, r in enumerate(rows, 1):
            r["rank"] = i
        out.append(Ranked(name, at, rows, skipped, calib, dev_name))
    return out


def _row(c: Candidate, pr: Any, params: CostParams) -> dict[str, Any]:
    e = pr.estimate
    b = e.bottleneck
    return {
        "file": c.file, "schedule": c.kernel.name, "target": c.kernel.target,
        "time_ns": round(e.time_ns, 1), "sol_ns": round(e.sol_ns, 1),
        "fraction_of_sol": round(e.fraction_of_sol, 4),
        "sol": {"bytes_ns": round(e.sol_bytes_ns, 1), "flops_ns": round(e.sol_flops_ns, 1)},
        "bottleneck": {"resource": b["resource"], "role": b.get("role"),
                       "stage": b.get("stage"), "line": b.get("line")},
        "help": [{"kind": h["kind"], "what": h["what"], "time_ns": round(h["time_ns"], 1)}
                 for h in pr.helps],
        "occupancy": e.occupancy,
        "waves": {k: (round(v, 4) if isinstance(v, float) else v) for k, v in e.waves.items()},
        "cta_ns": round(e.cta_ns, 1),
        "breakdown": [{"role": p.role, "segment": p.segment, "kind": p.kind,
                       "time_ns": round(p.time_ns, 1), "bound": p.bound} for p in e.parts],
        "parameters": f"{params.relpath} {params.version} ({params.calibration})",
    }


def render_json(groups: list[Ranked]) -> str:
    data = {"schema": 1, "note": "estimates rank and explain; they never reject a schedule",
            "groups": [{"workload": g.workload, "shape": g.shape, "device": g.device,
                        "calibration": g.calibration, "candidates": g.rows,
                        "not_ranked": g.skipped} for g in groups]}
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def render_text(groups: list[Ranked]) -> str:
    lines: list[str] = []
    for g in groups:
        shape = ", ".join(f"{k}={v}" for k, v in g.shape.items())
        lines.append(f"{g.workload} at {shape} on {g.device or '?'}: {len(g.rows)} "
                     f"candidate(s), {g.calibration or 'no parameters'}")
        for r in g.rows:
            b = r["bottleneck"]
            where = f" ({b['role']}, {b['stage']})" if b["role"] else ""
            lines.append(f"  {r['rank']:>2}. {us(r['time_ns']):>10}  "
                         f"{r['fraction_of_sol']:>4.0%} of SOL  {r['file']}")
            lines.append(f"      bound by {b['resource']}{where}; "
                         f"{r['occupancy']['ctas_per_sm']} CTA/SM "
                         f"({r['occupancy']['limited_by']}), {r['waves']['waves']} wave(s) at "
                         f"{r['waves']['efficiency']:.0%}")
            if r["help"]:
                h = r["help"][0]
                lines.append(f"      would help: {h['what']} -> {us(h['time_ns'])}")
        for s in g.skipped:
            lines.append(f"  not ranked: {s['file']}: {s['why']}")
        lines.append("")
    lines.append("Estimates rank and explain; they never reject a schedule. Ranking does not "
                 "check legality: run `cakegov check`.")
    return "\n".join(lines) + "\n"


def render_html(groups: list[Ranked]) -> str:
    e = html.escape
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>cakegov rank</title>",
             "<style>body{font-family:sans-serif;margin:2em}td,th{padding:2px 8px;"
             "text-align:left}svg text{font-size:11px}</style></head><body>",
             "<h1>cakegov rank</h1><p>Estimates rank and explain; they never reject a "
             "schedule.</p>"]
    for g in groups:
        shape = ", ".join(f"{k}={v}" for k, v in g.shape.items())
        parts.append(f"<h2>{e(g.workload)} at {e(shape)} on {e(g.device)}</h2>"
                     f"<p><em>{e(g.calibration)}</em></p>")
        top = max([r["time_ns"] for r in g.rows] + [1.0])
        label_w, width, bar_h = 260, 480, 18
        height = bar_h * len(g.rows) + 30
        svg = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{label_w + width + 90}' "
               f"height='{height}' role='img' aria-label='predicted time per candidate'>"]
        for i, r in enumerate(g.rows):
            y = 10 + i * bar_h
            w = round(width * r["time_ns"] / top, 1)
            s = round(label_w + width * r["sol_ns"] / top, 1)
            name = r["file"].rsplit("/", 1)[-1]
            svg.append(f"<text x='{label_w - 6}' y='{y + 12}' text-anchor='end'>{e(name)}"
                       "</text>")
            svg.append(f"<rect x='{label_w}' y='{y + 2}' width='{w}' height='{bar_h - 4}' "
                       f"fill='#4a7fb5'><title>{e(us(r['time_ns']))}: "
                       f"{e(r['bottleneck']['resource'])}</title></rect>")
            svg.append(f"<line x1='{s}' x2='{s}' y1='{y}' y2='{y + bar_h}' stroke='#c33' "
                       "stroke-width='2'><title>speed-of-light bound</title></line>")
            svg.append(f"<text x='{label_w + w + 4}' y='{y + 12}'>{e(us(r['time_ns']))}</text>")
        svg.append(f"<text x='{label_w}' y='{height - 4}'>bars: predicted time; red: "
                   "speed-of-light bound</text></svg>")
        parts.append("".join(svg))
        parts.append("<table><tr><th>#</th><th>file</th><th>predicted</th><th>of SOL</th>"
                     "<th>bottleneck</th><th>would help</th></tr>")
        for r in g.rows:
            b = r["bottleneck"]
            h = r["help"][0]["what"] if r["help"] else ""
            parts.append(f"<tr><td>{r['rank']}</td><td>{e(r['file'])}</td>"
                         f"<td>{e(us(r['time_ns']))}</td><td>{r['fraction_of_sol']:.0%}</td>"
                         f"<td>{e(b['resource'])}"
                         + (f" ({e(b['role'])}, {e(b['stage'])})" if b["role"] else "")
                         + f"</td><td>{e(h)}</td></tr>")
        parts.append("</table>")
        for s in g.skipped:
            parts.append(f"<p>not ranked: {e(s['file'])}: {e(s['why'])}</p>")
    parts.append("</body></html>\n")
    return "\n".join(parts)
