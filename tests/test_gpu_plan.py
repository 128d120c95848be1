"""The GPU check's plan (cakegov/gpu/plan.py, scripts/gpu_check.sh --budget): work ordered
by value, and rows already measured at this engine version never run again."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from cakegov import __version__
from cakegov.gpu.plan import Shapes, main, measured_rows, plan, shape_key

from .conftest import CORPUS, ROOT

A = {"M": 256, "N": 256, "K": 256}
B = {"M": 1000, "N": 520, "K": 320}
H = {"M": 4096, "N": 4096, "K": 4096}


def record(sha: str, shape: dict, version: str = __version__) -> str:
    return json.dumps({"schedule": {"file": "x.cake", "sha256": sha}, "shape": shape,
                       "engine_version": version, "passed": True})


def test_rows_are_read_from_every_record_and_a_torn_line_is_skipped(tmp_path):
    (tmp_path / "gemm.jsonl").write_text(record("s1", A) + "\n" + record("s1", B, "0.0.9")
                                         + "\n{\"schedule\": {\"sha", encoding="utf-8")
    assert measured_rows(tmp_path) == {("s1", shape_key(A), __version__),
                                       ("s1", shape_key(B), "0.0.9")}
    assert measured_rows(tmp_path / "missing") == set()


def test_order_is_never_measured_fa3_headline_rest_then_skip():
    shapes = Shapes(check=[A, B], headline=[H])
    rows = {("done", shape_key(s), __version__) for s in (A, B, H)}
    rows |= {("head", shape_key(A), __version__), ("head", shape_key(B), __version__)}
    rows |= {("part", shape_key(A), __version__), ("part", shape_key(H), __version__)}
    rows |= {("old", shape_key(s), "0.0.1") for s in (A, B, H)}  # another engine version
    items = plan([("done.cake", "done", shapes), ("part.cake", "part", shapes),
                  ("head.cake", "head", shapes), ("old.cake", "old", shapes),
                  ("new.cake", "new", shapes)], rows, fa3_script="scripts/gpu_fa3.sh")
    assert [(i.tier, i.target) for i in items] == [
        ("never-measured", "old.cake"), ("never-measured", "new.cake"),
        ("fa3-bisect", "scripts/gpu_fa3.sh"), ("headline", "head.cake"),
        ("rest", "part.cake"), ("skip", "done.cake")]
    by = {i.target: i for i in items}
    assert by["part.cake"].shapes == (shape_key(B),)  # only what is missing runs
    assert by["head.cake"].shapes == (shape_key(H),)
    assert by["new.cake"].shapes == (shape_key(A), shape_key(B), shape_key(H))


def test_the_cli_skips_a_corpus_schedule_whose_shapes_are_all_recorded(tmp_path, capsys):
    path = CORPUS / "valid" / "scale" / "ring_1stage.cake"
    assert main([str(path), "--measurements", str(tmp_path), "--rules", str(ROOT / "rules"),
                 "--workloads", str(CORPUS / "workloads")]) == 0
    tier, target, shapes = capsys.readouterr().out.rstrip("\n").split("\t")
    assert (tier, target) == ("never-measured", str(path)) and shapes
    from cakegov.check.rulebook import Rulebook
    from cakegov.corpus.suite import vocabulary
    from cakegov.corpus.workloads import load_workloads
    from cakegov.ir.canonical import schedule_sha256
    from cakegov.ir.parse import parse_bytes

    book = Rulebook.load(ROOT / "rules")
    sha = schedule_sha256(parse_bytes(path.read_bytes(),
                                      vocabulary(book, load_workloads(CORPUS / "workloads"))))
    lines = [record(sha, {k: int(v) for k, v in (kv.split("=") for kv in key.split(","))})
             for key in shapes.split(";")]
    (tmp_path / "scale.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    main([str(path), "--measurements", str(tmp_path), "--rules", str(ROOT / "rules"),
          "--workloads", str(CORPUS / "workloads")])
    assert capsys.readouterr().out.split("\t")[0] == "skip"


def test_gpu_check_script_parses_and_takes_a_budget():
    script = ROOT / "scripts" / "gpu_check.sh"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    bad = subprocess.run(["bash", str(script), "--budget", "soon"], capture_output=True,
                         text=True)
    assert bad.returncode == 2 and "--budget needs a number" in bad.stderr
    text = script.read_text(encoding="utf-8")
    assert "cakegov.gpu.plan" in text and "initcheck" in text and "trap cut_off" in text


def test_plan_module_runs_as_a_script(tmp_path):
    out = subprocess.run([sys.executable, "-m", "cakegov.gpu.plan", "--measurements",
                          str(tmp_path)], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0 and out.stdout == ""
    assert Path(ROOT / "cakegov" / "gpu" / "plan.py").is_file()
