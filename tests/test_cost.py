"""Cost model: metrics by hand, calibration recovers known parameters, sanity properties,
the CLI's located errors and deterministic JSON, the gate's judgement of parameters."""

from __future__ import annotations

import itertools
import json
import math
import tomllib
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from cakegov.check.findings import verdict_of
from cakegov.check.rulebook import Rulebook
from cakegov.cli import app
from cakegov.corpus.workloads import load_workloads
from cakegov.cost import metrics
from cakegov.cost.calibrate import fit, read_observations, synthesize
from cakegov.cost.estimate import findings, load_candidate, price, profile_of
from cakegov.cost.gate import judge
from cakegov.cost.model import Overrides, predict
from cakegov.cost.params import CostParamError, params_for, parse_params
from cakegov.cost.profile import conflict_degree

from .profiles import examples

ROOT = Path(__file__).resolve().parents[1]


@cache
def _book() -> Rulebook:
    return Rulebook.load(ROOT / "rules")


@cache
def _wls():
    return load_workloads(ROOT / "corpus" / "workloads")


@cache
def _cand(rel: str):
    return load_candidate(ROOT / rel, rel, _book(), _wls())


RING = "corpus/valid/scale/ring_1stage.cake"
GEMM = "corpus/valid/gemm/ws_pipeline_s4.cake"
SCALE = "corpus/valid/scale/tile_1stage.cake"


# ---- metrics against hand-computed values -------------------------------------------

def test_metrics_match_hand_computed_values():
    pred, meas = [1.0, 2.0, 3.0, 4.0], [1.0, 3.0, 2.0, 4.0]
    # ranks differ by one swap: d^2 = 2, rho = 1 - 6*2/(4*15) = 0.8
    assert metrics.spearman(pred, meas) == pytest.approx(0.8)
    # 6 pairs, 5 concordant, 1 discordant
    assert metrics.kendall(pred, meas) == pytest.approx(4 / 6)
    assert metrics.pairwise_accuracy(pred, meas) == pytest.approx(5 / 6)
    assert metrics.top_k_recall(pred, meas, 1) == 1.0
    assert metrics.top_k_regret([2.0, 1.0, 3.0], [1.0, 2.0, 4.0], 1) == pytest.approx(0.5)
    assert metrics.top_k_regret([2.0, 1.0, 3.0], [1.0, 2.0, 4.0], 5) == 1.0
    assert metrics.top_k_recall([2.0, 1.0, 3.0], [1.0, 2.0, 4.0], 1) == 0.0
    assert metrics.mape([1.1, 2.0, 2.0], [1.0, 2.0, 4.0]) == pytest.approx(0.1)
    assert metrics.ranks([3.0, 1.0, 3.0]) == [2.5, 1.0, 2.5]
    assert metrics.spearman([1.0], [1.0]) is None


def test_bank_conflicts_follow_the_row_stride():
    assert conflict_degree(128) == 8  # every row starts at bank 0
    assert conflict_degree(16) == 1
    assert conflict_degree(144) == 1  # a 16-byte pad per row spreads the rows


def test_bank_conflicts_follow_the_lowered_layout():
    from cakegov.cost.profile import buffer_conflict
    from cakegov.lower.kernel import LBuffer

    def buf(swizzle, layout):
        return LBuffer(name="a", dtype="bf16", shape=(128, 64), stages=1, offset=0,
                       stage_bytes=16384, align=1024, swizzle=swizzle, layout=layout)

    # 128-byte bf16 rows: 8-way row-major, conflict-free once the 128B swizzle is applied;
    # a declared swizzle the lowering could not apply changes nothing
    assert buffer_conflict(buf("none", "row_major")) == 8
    assert buffer_conflict(buf("128B", "row_major")) == 8
    assert buffer_conflict(buf("128B", "swizzled")) == 1
    assert buffer_conflict(buf("64B", "row_major").model_copy(
        update={"shape": (128, 32), "stage_bytes": 8192})) == 4
    assert buffer_conflict(LBuffer(name="b", dtype="bf16", shape=(128, 32), stages=1,
                                   offset=0, stage_bytes=8192, align=512, swizzle="64B",
                                   layout="swizzled")) == 1


# ---- parameters -----------------------------------------------------------------------

def _data(target: str = "sm_90a") -> dict:
    return tomllib.loads((ROOT / "rules" / "costmodel" / f"{target}.toml").read_text())


def test_every_value_has_a_source_and_a_date():
    for target in ("sm_90a", "sm_100a", "sm_80"):
        p = parse_params(_data(target), target, target)
        assert p.calibration == "uncalibrated (datasheet priors)"
        for v in [*p.params.values(), *(x for d in p.devices.values()
                                        for x in d.values.values())]:
            assert v.source and v.date
    assert set(parse_params(_data(), "x", "sm_90a").devices) == {"h100_sxm", "h200_sxm"}


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["params"]["hbm_efficiency"].update(value=1.5), "cannot exceed 1"),
    (lambda d: d["params"]["gmem_latency_ns"].pop("source"), "needs a `source`"),
    (lambda d: d["params"].pop("cta_ns"), "missing cta_ns"),
    (lambda d: d.update(default_device="b200"), "default_device"),
])
def test_bad_parameters_are_located(edit, message):
    data = _data()
    edit(data)
    with pytest.raises(CostParamError, match=message):
        parse_params(data, "rules/costmodel/sm_90a.toml", "sm_90a")


# ---- the model's sanity properties ----------------------------------------------------

def _price(rel: str, shape: dict, ov: Overrides | None = None, **values: float):
    c = _cand(rel)
    p = params_for(_book(), c.kernel.target)
    if values:
        p = p.with_params(values, "test", "2026")
    return predict(profile_of(c, shape, _book()), p, p.device(), ov or Overrides())


@settings(max_examples=examples(25), deadline=None)
@given(m=st.integers(1, 64), n=st.integers(1, 64), k=st.integers(1, 64),
       eff=st.floats(0.05, 1.0), lat=st.floats(1.0, 5000.0))
def test_no_prediction_beats_the_speed_of_light(m, n, k, eff, lat):
    e = _price(GEMM, {"M": 64 * m, "N": 64 * n, "K": 64 * k}, hbm_efficiency=eff,
               mma_sync_efficiency=eff, gmem_latency_ns=lat)
    assert e.time_ns >= e.sol_ns > 0


@settings(max_examples=examples(20), deadline=None)
@given(m=st.integers(1, 512), n=st.integers(1, 64), grow=st.integers(1, 64))
def test_more_bytes_never_predicts_faster(m, n, grow):
    small = _price(SCALE, {"M": 32 * m, "N": 4 * n})
    large = _price(SCALE, {"M": 32 * (m + grow), "N": 4 * n})
    assert large.time_ns >= small.time_ns


def test_more_stages_never_slower_for_a_memory_bound_ring():
    shape = {"M": 4096, "N": 4096}
    times = [_price(RING, shape, Overrides(extra_stages=k)).time_ns for k in range(0, 6)]
    assert all(b <= a for a, b in itertools.pairwise(times))
    assert times[-1] < times[0]


def test_estimates_are_findings_that_never_change_a_verdict():
    c = _cand(RING)
    p = params_for(_book(), "sm_90a")
    fs = findings(price(profile_of(c, {"M": 4096, "N": 4096}, _book()), p, p.device()),
                  p, p.device())
    assert {f.authority for f in fs} == {"estimate"}
    assert {f.severity for f in fs} <= {"report", "hint"}
    assert "uncalibrated (datasheet priors)" in fs[0].message
    assert verdict_of(tuple(fs), incomplete=False) == "clean"


# ---- calibration recovers what generated the records -----------------------------------

TRUTH = {"hbm_efficiency": 0.7, "fma_efficiency": 0.5, "gmem_latency_ns": 800.0,
         "launch_ns": 6000.0}
FILES = ("corpus/valid/scale/tile_1stage.cake", "corpus/valid/scale/ring_1stage.cake",
         "corpus/valid/scale/named_barrier_handoff.cake",
         "corpus/valid/kmeans_assign/rows_pipelined_s2.cake",
         "corpus/valid/kmeans_assign/prologue_ring_s5.cake")


def _records(tmp_path: Path, noise: float) -> Path:
    items = []
    for rel in FILES:
        c = _cand(rel)
        for m in (256, 4096, 65536, 1 << 20):
            shape = {"M": m, "N": 1024} if c.workload.name == "scale" else {"N": m}
            items.append((c, shape))
    recs = synthesize(items, _book(), TRUTH, None, noise, seed=3)
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def test_calibration_recovers_known_parameters(tmp_path):
    obs, _ = read_observations([_records(tmp_path, 0.02)], ROOT, _book(), _wls())
    result = fit(obs, params_for(_book(), "sm_90a"))
    assert result.rms_after < result.rms_before
    for key, true in TRUTH.items():
        assert result.identified[key], key
        assert result.values[key] == pytest.approx(true, rel=0.1), key


def test_cli_calibrate_eval_and_located_errors(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    recs = _records(tmp_path, 0.0)
    out = tmp_path / "sm_90a.toml"
    r = CliRunner().invoke(app, ["costmodel", "calibrate", "-m", str(recs), "-o", str(out)])
    assert r.exit_code == 0, r.output
    new = parse_params(tomllib.loads(out.read_text()), "out", "sm_90a")
    assert new.version == "1.1.0" and new.calibrated and new.fit["records"] == 20
    assert len(new.fit["records_sha256"]) == 20
    r = CliRunner().invoke(app, ["costmodel", "eval", "-m", str(recs), "--params", str(out),
                                 "-f", "json"])
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout)["summary"]
    assert summary["spearman"] == pytest.approx(1.0) and summary["mape"] < 1e-3
    bad = tmp_path / "bad.jsonl"
    bad.write_text(recs.read_text().splitlines()[0] + "\n{\"schema\": 1, \"passed\": true}\n")
    r = CliRunner().invoke(app, ["costmodel", "eval", "-m", str(bad)])
    assert r.exit_code == 2 and f"{bad}:2" in r.output and "Traceback" not in r.output


# ---- rank --------------------------------------------------------------------------------

def test_rank_is_deterministic_and_explains(monkeypatch):
    monkeypatch.chdir(ROOT)
    args = ["rank", "corpus/valid/scale", "--shape", "M=4096,N=4096", "-f", "json"]
    a, b = CliRunner().invoke(app, args), CliRunner().invoke(app, args)
    assert a.exit_code == 0 and a.stdout == b.stdout
    [group] = json.loads(a.stdout)["groups"]
    rows = group["candidates"]
    assert group["calibration"] == "uncalibrated (datasheet priors)"
    assert [r["rank"] for r in rows] == list(range(1, len(rows) + 1))
    assert all(r["time_ns"] >= r["sol_ns"] for r in rows)
    ring = next(r for r in rows if r["file"].endswith("ring_1stage.cake"))
    assert ring["help"][0]["kind"] == "more stages"
    html = CliRunner().invoke(app, ["rank", "corpus/valid/scale", "-f", "html"]).stdout
    assert "<svg" in html and "http://" not in html.replace("http://www.w3.org/2000/svg", "")
    text = CliRunner().invoke(app, ["rank", "corpus/valid/scale"]).stdout
    assert "bound by" in text and "never reject" in text


@pytest.mark.parametrize("args, message", [
    (["--shape", "M=x"], "not an integer"), (["--shape", "Q=1"], "size(s) Q"),
    (["--device", "nope"], "no device 'nope'")])
def test_rank_bad_input_exits_2(monkeypatch, args, message):
    monkeypatch.chdir(ROOT)
    r = CliRunner().invoke(app, ["rank", "corpus/valid/scale/tile_1stage.cake", *args])
    assert r.exit_code == 2 and message in r.output and "Traceback" not in r.output


# ---- the gate's judgement on data ---------------------------------------------------------

def test_gate_blocks_invalid_parameters_and_notes_missing_measurements(tmp_path):
    cand = tmp_path / "rules"
    (cand / "costmodel").mkdir(parents=True)
    text = (ROOT / "rules" / "costmodel" / "sm_90a.toml").read_text()
    (cand / "costmodel" / "sm_90a.toml").write_text(
        text.replace("hbm_efficiency = { value = 0.85", "hbm_efficiency = { value = 1.5"))
    j = judge(ROOT / "rules", cand, ["costmodel/sm_90a.toml"], [], ROOT / "corpus" /
              "workloads", tmp_path / "none", ROOT)
    assert [b[0] for b in j.blockers] == ["cost-parameters-invalid"]
    (cand / "costmodel" / "sm_90a.toml").write_text(text)
    j = judge(ROOT / "rules", cand, ["costmodel/sm_90a.toml"], [ROOT / SCALE],
              ROOT / "corpus" / "workloads", tmp_path / "none", ROOT)
    assert not j.blockers and "no measurement records" in j.notes[0]


def test_gate_blocks_worse_ranking_on_measurements(tmp_path):
    recs = _records(tmp_path, 0.0)
    meas = tmp_path / "measurements"
    meas.mkdir()
    recs.rename(meas / "m.jsonl")
    cand = tmp_path / "rules"
    (cand / "costmodel").mkdir(parents=True)
    p = params_for(_book(), "sm_90a")
    from cakegov.cost.params import dump_params
    worse = p.with_params({"gmem_latency_ns": 1e6, "hbm_efficiency": 0.01}, "test", "2026")
    (cand / "costmodel" / "sm_90a.toml").write_text(dump_params(worse))
    valid = [ROOT / f for f in FILES]
    j = judge(ROOT / "rules", cand, ["costmodel/sm_90a.toml"], valid,
              ROOT / "corpus" / "workloads", meas, ROOT)
    assert "cost-ranking-worse" in [b[0] for b in j.blockers], j.notes
    assert math.isfinite(j.metrics["before"]["spearman"])
