"""Defect operators, the dynamic-outcome oracle that labels mutants, and the standing
mutation suite's storage."""

from __future__ import annotations

import ast
import dataclasses
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cakegov.corpus import mutate
from cakegov.corpus.labels import read_labels
from cakegov.corpus.oracle import BENIGN, LAUNCH, launch_outcome, outcome
from cakegov.corpus.suite import Entry, SuiteError, load, plan, regenerate, render, vocabulary
from cakegov.lower.kernel import LRole

from .conftest import CORPUS, RULES, WORKLOADS
from .profiles import examples

RAW = CORPUS / "valid" / "gemm" / "raw_barriers_s2.cake"
VALID = sorted((CORPUS / "valid").rglob("*.cake"))


def _sites(path, op):
    return mutate.sites(path.read_text(encoding="utf-8"), op)


@pytest.mark.parametrize("op", ["drop-wait", "drop-arrive", "flip-parity", "count-plus-one",
                                "count-minus-one", "bytes-plus-one", "bytes-minus-one",
                                "stage-plus-one", "bound-plus-one", "bound-minus-one",
                                "exceed-smem", "exceed-registers", "arm-after-copy"])
def test_every_operator_finds_its_sites_in_a_raw_barrier_gemm(op):
    assert _sites(RAW, op), f"{op} found no site in {RAW.name}"


@pytest.mark.slow
def test_operators_over_the_valid_corpus_each_fire_somewhere():
    fired = {op for path in VALID for op in mutate.OPERATORS if _sites(path, op)}
    assert fired == set(mutate.OPERATORS)


def test_drop_wait_replaces_exactly_the_wait_with_pass():
    text = RAW.read_text(encoding="utf-8")
    site = mutate.sites(text, "drop-wait")[0]
    out = mutate.apply(text, site)
    before, after = text.splitlines(), out.splitlines()
    assert len(before) == len(after)
    changed = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
    assert changed == [site.line - 1]
    assert after[site.line - 1].split("#")[0].strip() == "pass"
    assert ".wait(" in before[site.line - 1]


def test_flip_parity_and_count_edits_read_as_the_schedule_wrote_them():
    text = RAW.read_text(encoding="utf-8")
    flip = mutate.apply(text, mutate.sites(text, "flip-parity")[0])
    assert "parity=((k // S + 1) % 2 + 1) % 2" in flip
    count = mutate.apply(text, mutate.sites(text, "count-plus-one")[0])
    assert "lm.mbarrier(count=2, stages=S)" in count
    stage = mutate.sites(text, "stage-plus-one")[0]
    assert "% S]" in mutate.apply(text, stage)


def test_arm_after_copy_moves_the_arm_below_its_copies():
    text = RAW.read_text(encoding="utf-8")
    out = mutate.apply(text, mutate.sites(text, "arm-after-copy")[0]).splitlines()
    arm = next(i for i, line in enumerate(out) if "arrive_expect_tx" in line)
    loads = [i for i, line in enumerate(out) if ".load(A" in line or ".load(B" in line]
    assert loads and arm > max(loads)
    assert len(out) == len(text.splitlines())


def test_mutants_lose_their_origins_labels_and_differ_from_it():
    text = RAW.read_text(encoding="utf-8")
    for m in mutate.mutants(text, "valid/gemm/raw_barriers_s2.cake"):
        assert "# expect:" not in m.text
        assert m.text != text
        ast.parse(m.text)


def test_sites_are_deterministic_and_mutant_at_finds_each_again():
    text = RAW.read_text(encoding="utf-8")
    first = mutate.mutants(text, "x")
    assert first == mutate.mutants(text, "x")
    for m in first[:40]:
        assert mutate.mutant_at(text, "x", m.operator, m.site) == m
    assert mutate.mutant_at(text, "x", "drop-wait", 999) is None


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(VALID), st.sampled_from(sorted(mutate.OPERATORS)), st.integers(0, 50))
def test_any_mutant_is_python_and_keeps_every_line_but_what_it_adds(path, op, index):
    text = path.read_text(encoding="utf-8")
    found = mutate.sites(text, op)
    if not found:
        return
    out = mutate.apply(text, found[index % len(found)])
    ast.parse(out)
    extra = 1 if op == "exceed-smem" else 0
    assert len(out.splitlines()) == len(text.splitlines()) + extra


@given(st.text(max_size=200))
@settings(max_examples=examples(80), deadline=None)
def test_arbitrary_text_is_a_mutate_error_or_some_sites(text):
    try:
        src = mutate.Source(text)
    except mutate.MutateError:
        return
    for op in mutate.OPERATORS.values():
        list(op(src))


# ---- the oracle ---------------------------------------------------------------------------

class _Kernel:
    def __init__(self, smem=0, threads=256, launch_regs=248, roles=(), cluster=(1, 1, 1),
                 nonportable=False):
        self.smem_bytes, self.threads, self.launch_regs, self.roles = (
            smem, threads, launch_regs, roles)
        self.cluster, self.cluster_nonportable = cluster, nonportable


LIMITS = {"smem_per_cta": 232448, "threads_per_cta": 1024, "registers_per_sm": 65536}


def _role(start, stop, regs):
    return LRole(name="r", warp_start=start, warp_stop=stop, regs=regs, setmaxnreg=None,
                 body=())


def test_launch_outcome_refuses_what_the_runtime_refuses():
    assert launch_outcome(_Kernel(smem=232449), LIMITS).kind == LAUNCH
    assert launch_outcome(_Kernel(smem=232448), LIMITS) is None
    assert launch_outcome(_Kernel(threads=1056), LIMITS).kind == LAUNCH
    assert launch_outcome(_Kernel(threads=512, launch_regs=136), LIMITS).kind == LAUNCH
    clusters = {**LIMITS, "cluster_max": 8, "cluster_max_nonportable": 16}
    assert launch_outcome(_Kernel(cluster=(8, 1, 1)), clusters) is None
    assert launch_outcome(_Kernel(cluster=(4, 4, 1)), clusters).kind == LAUNCH
    assert launch_outcome(_Kernel(cluster=(4, 4, 1), nonportable=True), clusters) is None
    found = launch_outcome(_Kernel(cluster=(32, 1, 1), nonportable=True), clusters)
    assert found.kind == LAUNCH and "cluster_max_nonportable" in found.detail


def test_register_budgets_beyond_the_pool_deadlock_at_setmaxnreg():
    # 384 threads at 168 registers: a pool of 64512; 40x128 + 232x256 = 64512 fits
    fits = _Kernel(threads=384, launch_regs=168, roles=(_role(0, 4, 40), _role(4, 12, 232)))
    assert launch_outcome(fits, LIMITS) is None
    over = _Kernel(threads=384, launch_regs=168, roles=(_role(0, 4, 104), _role(4, 12, 232)))
    found = launch_outcome(over, LIMITS)
    assert found is not None and found.kind == "deadlock" and "72704" in found.detail


@pytest.mark.slow
def test_the_oracle_labels_by_dynamic_outcome(rulebook, workloads):
    text = RAW.read_text(encoding="utf-8")

    def label(op, index=0):
        m = mutate.mutant_at(text, "raw", op, index)
        return outcome(m.text.encode(), "raw", rulebook, workloads)

    assert label("count-plus-one").kind == "deadlock"
    assert label("drop-wait").kind == "race"
    assert label("exceed-smem").kind == LAUNCH
    # more registers for the loader still fit this 8-warp kernel's pool: benign
    assert label("exceed-registers").kind == BENIGN
    assert outcome(b"def broken(:", "x", rulebook, workloads).kind == "unknown"


# ---- the suite ----------------------------------------------------------------------------

def _entry(**kw):
    base = dict(source="valid/gemm/raw_barriers_s2.cake", source_sha256="0" * 64,
                operator="drop-wait", site=0, line=18, what="w", identity="x",
                outcome="race", detail="race: ...")
    base.update(kw)
    return Entry(**base)


def test_suite_round_trips_and_rejects_malformed_files(tmp_path):
    path = tmp_path / "MUTANTS.json"
    entries = [_entry(), _entry(site=1, outcome=BENIGN)]
    path.write_text(render(entries))
    assert load(path) == entries
    data = json.loads(path.read_text())
    data["mutants"][0]["extra"] = 1
    path.write_text(json.dumps(data))
    with pytest.raises(SuiteError, match="fields"):
        load(path)
    path.write_text("{")
    with pytest.raises(SuiteError, match="not JSON"):
        load(path)
    with pytest.raises(SuiteError, match="cannot read"):
        load(tmp_path / "absent.json")


def test_a_changed_origin_makes_the_suite_stale(tmp_path, rulebook, workloads):
    corpus = tmp_path / "corpus"
    (corpus / "valid" / "gemm").mkdir(parents=True)
    origin = corpus / "valid" / "gemm" / "raw.cake"
    origin.write_bytes(RAW.read_bytes())
    planned = plan(corpus, rulebook, workloads, operators=["count-plus-one"])
    assert planned
    p = planned[0]
    entry = _entry(source=p.mutant.source, source_sha256=p.source_sha256,
                   operator=p.mutant.operator, site=p.mutant.site, identity=p.identity)
    vocab = vocabulary(rulebook, workloads)
    [(_, text)] = regenerate(corpus, [entry], vocab)
    assert text == p.mutant.text
    with pytest.raises(SuiteError, match="no longer yields"):
        regenerate(corpus, [dataclasses.replace(entry, identity="y")], vocab)
    origin.write_text(origin.read_text() + "\n")
    with pytest.raises(SuiteError, match="changed since"):
        regenerate(corpus, [entry], vocab)


def test_plan_deduplicates_by_schedule_identity(rulebook, workloads):
    planned = plan(CORPUS, rulebook, workloads, sources=[RAW])
    idents = [p.identity for p in planned]
    assert len(idents) == len(set(idents))
    # the origin's own identity never appears: an equivalent mutant is dropped
    vocab = vocabulary(rulebook, workloads)
    from cakegov.corpus.suite import identity

    assert identity(RAW.read_text(), vocab) not in idents


def test_labelling_over_worker_processes_gives_the_serial_labels(rulebook, workloads):
    """`corpus mutate --jobs N` labels in worker processes, parts finishing in any order:
    the entries come back in the planned order with the outcomes one process gives."""
    from cakegov.corpus.suite import label, label_jobs

    planned = plan(CORPUS, rulebook, workloads, sources=[RAW],
                   operators=["count-plus-one", "drop-wait", "exceed-smem"])
    assert len({p.identity for p in planned}) >= 3
    serial = label(planned, rulebook, workloads)
    assert len({e.outcome for e in serial}) >= 2  # a shuffle would be visible
    seen: list[int] = []
    parallel = label_jobs(planned, RULES, WORKLOADS, jobs=2, chunk=1, advance=seen.append)
    assert parallel == serial
    assert sum(seen) == len(planned)
    assert label_jobs([], RULES, WORKLOADS, jobs=2) == []


def test_stored_suite_is_current_and_labelled_by_outcome(rulebook, workloads):
    """The committed suite regenerates exactly from the corpus on disk."""
    path = CORPUS / "MUTANTS.json"
    entries = load(path)
    assert len(entries) >= 500
    assert {e.outcome for e in entries} >= {BENIGN, "deadlock", "race", LAUNCH}
    sample = entries[:: max(1, len(entries) // 25)]
    regenerate(CORPUS, sample, vocabulary(rulebook, workloads))


def test_labels_read_todo_and_origin():
    text = ('# origin: transcription https://example.org/k.hpp\n'
            'x = 1  # todo-expect: P001\n')
    labels = read_labels(text)
    assert labels.todo == {("P001", 2)} and not labels.expected
    assert labels.origin.startswith("transcription")
    with pytest.raises(Exception, match="origin"):
        read_labels("# origin: stolen\n# expect: clean\n")
