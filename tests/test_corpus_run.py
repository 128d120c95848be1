"""`cakegov corpus run` metrics, `corpus accept` and the manifest's provenance."""

from __future__ import annotations

import ast
import json
import shutil

import pytest
from typer.testing import CliRunner

from cakegov.cli import app
from cakegov.corpus import manifest
from cakegov.corpus.labels import read_labels, relabel
from cakegov.corpus.run import (
    Item,
    MutantResult,
    RunResult,
    _interleave,
    check_item,
    coverage,
    failed,
    rule_table,
    run,
    run_jobs,
    shard_of,
    summary,
)
from cakegov.corpus.suite import SUITE_NAME, load

from .conftest import CORPUS, RULES, WORKLOADS

RAW = CORPUS / "valid" / "gemm" / "raw_barriers_s2.cake"
BAD = next(p for p in sorted((CORPUS / "invalid" / "gemm").glob("*.cake"))
           if read_labels(p.read_text()).expected)


def _item(file, family, valid, expected, found, todo=(), status="ok", verdict="clean"):
    return Item(file, family, valid, verdict, list(expected), list(found), list(todo), status)


def test_rule_table_counts_true_and_false_positives_and_misses():
    result = RunResult(rules=["P001", "P002", "R010"], items=[
        _item("a", "gemm", False, ["P001@3"], ["P001@3"]),
        _item("b", "gemm", False, ["P001@4"], ["P002@4"], status="mismatch"),
        _item("c", "scale", True, [], ["P002@9"], status="mismatch", verdict="rejected"),
        _item("d", "scale", False, [], [], todo=["R010@2"], status="known gap"),
    ])
    rows = {r["rule"]: r for r in rule_table(result)}
    assert (rows["P001"]["tp"], rows["P001"]["fp"], rows["P001"]["fn"]) == (1, 0, 1)
    assert rows["P001"]["recall"] == 0.5 and rows["P001"]["precision"] == 1.0
    assert (rows["P002"]["fp"], rows["P002"]["precision"]) == (2, 0.0)
    assert rows["R010"]["gaps"] == 1 and rows["R010"]["recall"] is None
    assert coverage(result)["P001"] == ["gemm"]
    s = summary(result)
    assert s["mismatches"] == ["b", "c"] and "P001" in s["under_covered_rules"]
    assert s["known_gaps"] == ["d: R010@2"]


def test_the_share_named_at_the_labelled_line_and_the_p099_share():
    result = RunResult(rules=["P001", "P002", "P099"], items=[
        _item("a", "gemm", False, ["P001@3"], ["P001@3"], verdict="rejected"),
        # the right code at the wrong line, and P099 instead of the labelled code
        _item("b", "gemm", False, ["P001@4"], ["P001@5"], status="mismatch",
              verdict="rejected"),
        _item("c", "scale", False, ["P002@9"], ["P099@9"], status="mismatch",
              verdict="rejected"),
        # a known gap counts as not named; a valid item does not count at all
        _item("d", "scale", False, [], [], todo=["P002@2"], status="known gap"),
        _item("e", "scale", True, [], []),
    ])
    s = summary(result)
    assert s["named_at_line"] == [1, 4] and s["named_at_line_rate"] == 0.25
    assert s["p099_items"] == ["c"] and s["p099_rate"] == 0.25
    assert "labelled code at the labelled line in 25.0% of invalid items, below 90.0%" in \
        failed(result, min_at_line=0.9)
    assert not any("labelled line" in f for f in failed(result, min_at_line=0.25))
    assert not any("labelled line" in f for f in failed(result))  # no gate asked for
    assert "P099 on 25.0% of invalid items (c), above 2.0%" in failed(result, max_p099=0.02)
    assert not any("P099" in f for f in failed(result, max_p099=0.25))
    assert not any("P099" in f for f in failed(result))
    from cakegov.corpus.run import render_text

    assert "labelled code at the labelled line: 25.0% (1/4 invalid items); P099: 25.0% " \
        "(1 invalid items: c)" in render_text(result)


def test_kill_rate_and_benign_acceptance():
    ms = [MutantResult(f"m{i}", "drop-wait", "race", "rejected", 1, "") for i in range(3)]
    ms += [MutantResult("s", "flip-parity", "deadlock", "clean", 1, ""),
           MutantResult("b1", "barrier-id", "benign", "clean", 1, ""),
           MutantResult("b2", "barrier-id", "benign", "rejected", 1, ""),
           MutantResult("u", "drop-sync", "unknown", "clean", 1, "")]
    result = RunResult(rules=[], mutants=ms, with_mutants=True)
    m = summary(result)["mutation"]
    assert (m["harmful"], m["killed"], m["kill_rate"]) == (4, 3, 0.75)
    assert (m["benign"], m["benign_acceptance_rate"]) == (2, 0.5)
    assert m["unknown"] == 1
    assert list(m["survivors"]) == ["flip-parity / deadlock / checker clean"]
    assert failed(result) == ["benign mutant rejected: b2"]
    assert "kill rate 75.0% below 90.0%" in failed(result, 0.9)
    assert failed(result, max_benign_rejected=1) == []


def test_shards_partition_everything_once():
    things = list(range(23))
    parts = [shard_of(things, (i, 4)) for i in range(1, 5)]
    assert sorted(x for p in parts for x in p) == things


def test_interleave_undoes_the_parts_in_order():
    things = list(range(23))
    for jobs in (1, 2, 3, 5, 30):
        assert _interleave([shard_of(things, (p, jobs)) for p in range(1, jobs + 1)]) == things


@pytest.mark.slow
def test_worker_processes_give_what_one_process_gives(rulebook, workloads):
    """`--jobs`: items and mutants of a shard, in the same order with the same results,
    from 3 worker processes as from this one (a merge that drops, repeats or reorders
    work, or a worker that loads another rulebook, fails)."""
    shard = (2, 40)
    one = run(CORPUS, rulebook, workloads, suite=load(CORPUS / SUITE_NAME), shard=shard)
    many = run_jobs(CORPUS, RULES, WORKLOADS, jobs=3, with_suite=True, shard=shard)
    assert one.items and one.mutants
    assert many.items == one.items and many.mutants == one.mutants
    assert many.rules == one.rules and many.shard == shard and many.with_mutants


def test_items_are_judged_against_labels_and_known_gaps(tmp_path, checker):
    corpus = tmp_path / "corpus"
    (corpus / "valid" / "gemm").mkdir(parents=True)
    (corpus / "invalid" / "gemm").mkdir(parents=True)
    shutil.copy(RAW, corpus / "valid" / "gemm" / "ok.cake")
    assert check_item(checker, corpus / "valid" / "gemm" / "ok.cake", corpus).status == "ok"
    labels = read_labels(BAD.read_text())
    code, line = sorted(labels.expected)[0]
    wrong = BAD.read_text().replace(f"# expect: {code}", "# expect: X999")
    (corpus / "invalid" / "gemm" / "wrong.cake").write_text(wrong)
    item = check_item(checker, corpus / "invalid" / "gemm" / "wrong.cake", corpus)
    assert item.status == "mismatch" and f"{code}@{line}" in item.found
    gap = BAD.read_text().replace("# expect:", "# todo-expect:")
    (corpus / "invalid" / "gemm" / "gap.cake").write_text(gap)
    assert check_item(checker, corpus / "invalid" / "gemm" / "gap.cake",
                      corpus).status == "gap closed"


def test_relabel_writes_what_read_labels_reads_back():
    text = BAD.read_text()
    code_lines = sorted({n.lineno for n in ast.walk(ast.parse(text))
                         if isinstance(n, ast.Call) and n.lineno == n.end_lineno})
    a, b = code_lines[0], code_lines[-1]
    found = [("P001", a), ("R010", a), ("P002", b)]
    out = relabel(text, found)
    labels = read_labels(out)
    assert labels.expected == set(found)
    assert len(out.splitlines()) == len(text.splitlines())


def test_cli_usage_errors_exit_2():
    runner = CliRunner()
    r = runner.invoke(app, ["corpus", "run", "--shard", "0/2"])
    assert r.exit_code == 2 and "I/N" in r.stderr
    r = runner.invoke(app, ["corpus", "mutate", "--ops", "drop-wiat", str(RAW)])
    assert r.exit_code == 2 and "did you mean drop-wait" in r.stderr
    r = runner.invoke(app, ["corpus", "accept", str(RAW)])
    assert r.exit_code == 2 and "false positive" in r.stderr


@pytest.mark.slow
def test_corpus_run_shard_passes_and_reports_json():
    r = CliRunner().invoke(app, ["corpus", "run", "--shard", "1/12", "--format", "json",
                                 "-q"])
    data = json.loads(r.stdout)
    assert r.exit_code == 0, data["failures"]
    assert data["summary"]["items"] > 0 and data["summary"]["shard"] == "1/12"
    assert data["failures"] == []


def test_corpus_mutate_lists_and_labels_one_file(tmp_path):
    r = CliRunner().invoke(app, ["corpus", "mutate", "--list"])
    assert r.exit_code == 0 and "drop-wait" in r.stdout
    r = CliRunner().invoke(app, ["corpus", "mutate", str(RAW), "--ops", "count-plus-one",
                                 "--out", str(tmp_path), "-q"])
    assert r.exit_code == 0 and "deadlock" in r.stdout
    written = sorted(tmp_path.glob("*.cake"))[0]
    assert written.read_text().startswith("# origin: mutant valid/gemm/raw_barriers_s2.cake")
    assert read_labels(written.read_text() + "\n# expect: clean\n").origin.startswith("mutant")


def test_manifest_records_origin_and_the_mutation_suite():
    data = manifest.build(CORPUS)
    assert data["format"] == 2
    assert all("origin" in c for c in data["cases"].values() if isinstance(c.get("labels"),
                                                                          (str, list)))
    assert data["mutation_suite"] is not None
    assert manifest.version(CORPUS) is not None


def test_corpus_mutate_suite_stored_relabels_exactly_the_stored_keys(tmp_path, monkeypatch):
    """`--suite --stored` labels again the mutants the stored suite names, under the
    current oracle: no mutant added or dropped, a stale label replaced, the digest renewed."""
    from cakegov.commands.shared import load_rulebook, load_wls
    from cakegov.corpus import suite as suites

    (tmp_path / "rules").symlink_to(RULES)
    corpus = tmp_path / "corpus"
    (corpus / "valid" / "gemm").mkdir(parents=True)
    (corpus / "workloads").symlink_to(WORKLOADS)
    (corpus / "valid" / "gemm" / "raw.cake").write_bytes(RAW.read_bytes())
    book, wls = load_rulebook(RULES), load_wls(WORKLOADS)
    planned = suites.plan(corpus, book, wls, operators=["count-plus-one"])
    assert len(planned) >= 2
    stored = planned[1:2]  # planned[0] is not in the suite and must not be added
    entries = [suites.Entry(p.mutant.source, p.source_sha256, p.mutant.operator,
                            p.mutant.site, p.mutant.line, p.mutant.what, p.identity,
                            "benign", "stale label") for p in stored]
    (corpus / SUITE_NAME).write_text(suites.render(entries, "an older oracle"))
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(app, ["corpus", "mutate", "--stored"])
    assert r.exit_code == 2 and "--suite" in r.stderr
    r = CliRunner().invoke(app, ["corpus", "mutate", "--suite", "--stored", "-q"])
    assert r.exit_code == 0, r.output
    after = load(corpus / SUITE_NAME)
    assert [e.key for e in after] == sorted(e.key for e in entries)
    assert all(e.outcome == "deadlock" for e in after)  # one arrive too few: nobody wakes
    assert suites.load_oracle(corpus / SUITE_NAME) == suites.oracle_digest(corpus, book)
