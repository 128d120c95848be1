"""Barrier counts, transaction bytes and parities (P001-P007) and their static accounting
(cakegov/analysis/accounting.py).

Each test derives a schedule from a valid corpus file by textual edits, checks it and
asserts on the code, the line, the numbers in the message and hint, and the witness; the
unedited (or repaired) schedule must stay free of these codes."""

from __future__ import annotations

import pytest

from cakegov.analysis.accounting import accounting_of
from cakegov.check.context import CheckContext
from cakegov.ir.parse import parse_bytes

from .conftest import CORPUS

GEMM_RAW = CORPUS / "valid" / "gemm" / "raw_barriers_s2.cake"
GEMM_WS = CORPUS / "valid" / "gemm" / "ws_pipeline_s4.cake"
SCALE = CORPUS / "valid" / "scale" / "tile_1stage.cake"
HANDOFF = CORPUS / "valid" / "scale" / "named_barrier_handoff.cake"
KMEANS = CORPUS / "valid" / "kmeans_assign" / "rows_pipelined_s2.cake"
SPLIT = CORPUS / "invalid" / "scale" / "full_count_split_loaders.cake"
PINGPONG = CORPUS / "invalid" / "scale" / "pingpong_single_stage.cake"
ONE_SLOT = CORPUS / "invalid" / "scale" / "one_full_slot_two_stages.cake"

COUNTS = {f"P00{i}" for i in range(1, 8)}
S4 = ("BM, BN, BK, S = 64, 128, 64, 2", "BM, BN, BK, S = 64, 128, 64, 4")
CONSUMER_WAIT = "full[k % S].wait(parity=(k // S) % 2)"
PRODUCER_WAIT = "empty[k % S].wait(parity=(k // S + 1) % 2)"
ARM = "full[k % S].arrive_expect_tx(bytes=lm.nbytes(a_s, b_s))"


def variant(path, *edits):
    """The text of `path` with each (old, new) replacement applied exactly once."""
    text = path.read_text(encoding="utf-8")
    for old, new in edits:
        assert text.count(old) == 1, f"{old!r} is not unique in {path.name}"
        text = text.replace(old, new)
    return text


def blocking(checker, text):
    result = checker.check_bytes(text.encode(), "t.cake")
    errors = [f for f in result.findings if f.authority in ("input", "internal")]
    assert not errors, [f.message for f in errors]
    return [f for f in result.findings if f.severity == "blocking"]


def only(checker, text, code):
    """The one blocking finding of `text`, which must have `code`."""
    found = blocking(checker, text)
    assert [f.code for f in found] == [code], [(f.code, f.message) for f in found]
    return found[0]


def line_of(text, needle):
    lines = [i for i, ln in enumerate(text.splitlines(), 1) if needle in ln]
    assert len(lines) == 1, needle
    return lines[0]


def accounting(checker, text):
    schedule = parse_bytes(text.encode(), checker.vocabulary)
    book = checker.rulebook
    ctx = CheckContext(schedule, "t.cake", book.targets.get(schedule.target),
                       checker.workloads.get(schedule.workload), book.primitives)
    assert ctx.protocol is not None
    return accounting_of(ctx.protocol)


# ---- valid forms stay clean -----------------------------------------------------------


@pytest.mark.parametrize("text", [
    GEMM_RAW.read_text(),
    variant(GEMM_RAW, S4),
    GEMM_WS.read_text(),
    KMEANS.read_text(),
    SCALE.read_text(),
    HANDOFF.read_text(),
    variant(SPLIT, ("full = lm.mbarrier(count=1)  # expect: P001", "full = lm.mbarrier(count=2)")),
    variant(PINGPONG, ("TILES, S = 32, 256, 4, 1 ", "TILES, S = 32, 256, 4, 2 "),
            ("  # expect: P007", "")),
    variant(ONE_SLOT, ("full = lm.mbarrier(count=1)  # expect: P007",
                       "full = lm.mbarrier(count=1, stages=2)"),
            ("full[0].arrive_expect_tx", "full[t % 2].arrive_expect_tx"),
            ("barrier=full[0]", "barrier=full[t % 2]"),
            ("full[0].wait(parity=t % 2)", "full[t % 2].wait(parity=(t // 2) % 2)")),
], ids=["gemm_raw_s2", "gemm_raw_s4", "gemm_ws_s4", "kmeans", "scale", "handoff",
        "split_loaders_count2", "pingpong_s2", "one_slot_per_stage"])
def test_valid_forms_have_no_count_or_parity_finding(checker, text):
    assert not [f for f in blocking(checker, text) if f.code in COUNTS]


# ---- accounting -----------------------------------------------------------------------


def test_accounting_counts_each_phase_by_role(checker):
    acc = accounting(checker, variant(GEMM_RAW, S4))
    assert acc.sides == {"full": "full", "empty": "empty"}
    full = list(acc.tallies("full"))
    assert full and all(t.total == 1 and t.arm_count == 1 for t in full)
    assert all(t.armed == t.delivered == 8192 + 16384 for t in full)
    empty = list(acc.tallies("empty"))
    assert all(t.arrivals == {"math": 4} for t in empty)
    # the longest run covers two wrap-arounds of every stage: phases 0, 1, 2
    assert {t.phase for t in acc.runs[-1].phases[("full", 0)].values()} == {0, 1, 2}
    assert all(c.ok for run in acc.runs for c in run.waits)


def test_accounting_alternating_consumers_own_alternate_phases(checker):
    text = variant(PINGPONG, ("TILES, S = 32, 256, 4, 1 ", "TILES, S = 32, 256, 4, 2 "))
    acc = accounting(checker, text)
    empty0 = acc.runs[0].phases[("empty", 0)]
    # stage 0 is used at t = 0 (work0) and t = 2 (work0): with 2 stages each worker
    # owns one stage, and each phase is released by one warpgroup (4 arrivals)
    assert [(p, t.arrivals) for p, t in sorted(empty0.items())] == [
        (0, {"work0": 4}), (1, {"work0": 4})]
    assert acc.runs[0].phases[("empty", 1)][0].arrivals == {"work1": 4}


def test_accounting_peeled_producer_starts_on_phase_zero(checker):
    # the loader skips its first pass over the ring: its first empty wait (k = S) must
    # observe phase 0 with parity 0, and (k // S + 1) % 2 says so
    text = variant(GEMM_RAW, (
        "        for k in lm.range(0, lm.cdiv(lm.K, BK)):\n"
        f"            {PRODUCER_WAIT}   # producer starts on parity 1\n",
        "        for k in lm.range(0, S):\n"
        f"            {ARM}\n"
        "            a_s[k].load(A, at=(m0, k * BK), barrier=full[k], pad=True)\n"
        "            b_s[k].load(B, at=(n0, k * BK), barrier=full[k], pad=True)\n"
        "        for k in lm.range(S, lm.cdiv(lm.K, BK)):\n"
        f"            {PRODUCER_WAIT}\n"))
    acc = accounting(checker, text)
    waits = [c for c in acc.runs[-1].waits if c.event.role == "loader"]
    assert waits[0].expected_phase == 0 and waits[0].ok
    assert all(c.ok for c in waits)
    assert not [f for f in blocking(checker, text) if f.code in COUNTS]


# ---- P001 full-barrier-count ----------------------------------------------------------


def test_full_count_too_high_deadlocks(checker):
    text = variant(GEMM_RAW, ("full = lm.mbarrier(count=1, stages=S)",
                              "full = lm.mbarrier(count=4, stages=S)"))
    f = only(checker, text, "P001")
    assert f.span.line == line_of(text, "full = lm.mbarrier(count=4")
    assert "count=4" in f.message and "every phase receives 1 arrival" in f.message
    assert "deadlock" in f.message
    assert f.hint.startswith("use `count=1`")
    assert "arms expect_tx from one elected thread" in f.hint
    assert f.evidence["anomaly"] == "deadlock"
    assert f.evidence["witness"][-1].endswith("blocks forever")


def test_full_count_too_low_races(checker):
    text = SPLIT.read_text()
    f = only(checker, text, "P001")
    assert f.span.line == line_of(text, "full = lm.mbarrier(count=1)")
    assert "count=1" in f.message and "2 arrival(s)" in f.message and "race" in f.message
    assert f.hint.startswith("use `count=2`") and "top" in f.hint and "bot" in f.hint
    assert f.evidence["witness"]


def test_pipeline_full_count_points_at_the_pipeline(checker):
    old = "ring = lm.pipeline(stages=2, buffers=[x_s], producer=loader, consumer=math)"
    text = variant(KMEANS, (old, old[:-1] + ", full_count=2)"))
    f = only(checker, text, "P001")
    assert f.span.line == line_of(text, "ring = lm.pipeline(")
    assert f.resource == "ring.full"
    assert f.hint.startswith("remove `full_count=2`")


def test_count_zero_is_left_to_the_hardware_rule(checker):
    text = variant(KMEANS, ("cbar = lm.mbarrier(count=1)", "cbar = lm.mbarrier(count=0)"))
    assert "R009" in {f.code for f in blocking(checker, text)}
    assert not [f for f in blocking(checker, text) if f.code in COUNTS]


# ---- P002 empty-barrier-count ---------------------------------------------------------


def test_empty_count_too_low_for_two_warpgroups(checker):
    old = "ring = lm.pipeline(stages=4, buffers=[a_s, b_s], producer=loader, consumer=math)"
    text = variant(GEMM_WS, (old, old[:-1] + ", empty_count=4)"))
    f = only(checker, text, "P002")
    assert f.span.line == line_of(text, "ring = lm.pipeline(")
    assert "empty_count=4" in f.message and "8 arrival(s)" in f.message
    assert "overwrite" in f.message
    assert f.hint.startswith("remove `empty_count=4`: the compiler derives 8")
    assert "once per warp, 8 warps" in f.hint
    assert f.evidence["witness"]


def test_empty_count_raw_two_consumer_roles(checker):
    text = variant(
        GEMM_RAW,
        ("warps=8)", "warps=12)"),
        ("math = lm.role(warps=range(4, 8), regs=232)",
         "math = lm.role(warps=range(4, 8), regs=232)\n"
         "    math2 = lm.role(warps=range(8, 12), regs=232)\n"
         "    acc2 = lm.fragment(\"f32\", (BM, BN), role=math2)"),
        ("        lm.store(C, at=(m0, n0), src=acc, mask=True)\n",
         "        lm.store(C, at=(m0, n0), src=acc, mask=True)\n"
         "    with math2:\n"
         "        for k in lm.range(0, lm.cdiv(lm.K, BK)):\n"
         f"            {CONSUMER_WAIT}\n"
         "            lm.mma(acc2, a_s[k % S], b_s[k % S], transpose_b=True, init=(k == 0))\n"
         "            empty[k % S].arrive()\n"))
    acc = accounting(checker, text)
    assert all(t.arrivals == {"math": 4, "math2": 4} for t in acc.tallies("empty"))
    found = [f for f in blocking(checker, text) if f.code in COUNTS]
    assert [f.code for f in found] == ["P002"]
    assert found[0].span.line == line_of(text, "empty = lm.mbarrier(count=4")
    assert found[0].hint.startswith("use `count=8`")
    fixed = text.replace("empty = lm.mbarrier(count=4", "empty = lm.mbarrier(count=8")
    assert not [f for f in blocking(checker, fixed) if f.code in COUNTS]


def test_repeated_release_is_not_a_count_defect(checker):
    text = variant(KMEANS, ("            lm.reduce(", "            ring.release(t)\n"
                                                      "            lm.reduce("))
    assert not [f for f in blocking(checker, text) if f.code in ("P001", "P002")]


# ---- P003 expect-tx-bytes -------------------------------------------------------------


def test_expect_tx_too_few_bytes(checker):
    text = variant(GEMM_RAW, (ARM, "full[k % S].arrive_expect_tx(bytes=lm.nbytes(a_s))"))
    f = only(checker, text, "P003")
    assert f.span.line == line_of(text, "arrive_expect_tx")
    assert "8,192 B" in f.message and "24,576 B" in f.message
    assert "a_s (8,192 B" in f.message and "b_s (16,384 B" in f.message
    assert "race" in f.message
    assert f.hint == "arm `bytes=lm.nbytes(a_s, b_s)` (24,576 B) once per phase"
    assert f.evidence["witness"]


def test_expect_tx_too_many_bytes(checker):
    text = variant(KMEANS, ("cbar[0].arrive_expect_tx(bytes=lm.nbytes(c_s))",
                            "cbar[0].arrive_expect_tx(bytes=lm.nbytes(c_s, x_s))"))
    f = only(checker, text, "P003")
    assert f.span.line == line_of(text, "cbar[0].arrive_expect_tx")
    assert "20,480 B" in f.message and "4,096 B" in f.message and "deadlock" in f.message
    assert "lm.nbytes(c_s)" in f.hint
    assert f.evidence["anomaly"] == "deadlock"


def test_split_arms_that_balance_are_legal(checker):
    text = variant(GEMM_RAW, (
        ARM, "full[k % S].arrive_expect_tx(bytes=lm.nbytes(a_s))\n"
             "            full[k % S].arrive_expect_tx(bytes=lm.nbytes(b_s))"),
        ("full = lm.mbarrier(count=1, stages=S)", "full = lm.mbarrier(count=2, stages=S)"))
    assert not [f for f in blocking(checker, text) if f.code in COUNTS]


# ---- P004 double-arming ---------------------------------------------------------------


def test_arm_per_warp(checker):
    text = variant(GEMM_RAW, (ARM, ARM[:-1] + ', per="warp")'))
    f = only(checker, text, "P004")
    assert f.span.line == line_of(text, "arrive_expect_tx")
    assert "armed 4 times" in f.message and "98,304 B" in f.message
    assert "24,576 B" in f.message and "4 arrival(s) (count 1)" in f.message
    assert f.hint.startswith('drop `per="warp"`')


def test_arm_twice_points_at_the_second(checker):
    text = variant(SCALE, ("        x_s[0].load(", "        full[0].arrive_expect_tx("
                                                  "bytes=lm.nbytes(x_s))\n        x_s[0].load("))
    f = only(checker, text, "P004")
    lines = [i for i, ln in enumerate(text.splitlines(), 1) if "arrive_expect_tx" in ln]
    assert f.span.line == lines[1]
    assert "armed 2 times" in f.message and "65,536 B" in f.message
    assert f"line {lines[0]} already arms the phase" in f.hint


# ---- P005 initial-parity --------------------------------------------------------------


def test_consumer_parity_inverted(checker):
    text = variant(GEMM_RAW, (CONSUMER_WAIT, "full[k % S].wait(parity=(k // S + 1) % 2)"))
    f = only(checker, text, "P005")
    assert f.span.line == line_of(text, "full[k % S].wait")
    assert "inverted at every wait" in f.message
    assert "waits with parity 1 but must observe phase 0" in f.message
    assert f.hint.startswith("use `parity=(k // 2) % 2`")
    assert f.evidence["expected_parities"] == "0, 1, 0"
    assert f.evidence["actual_parities"] == "1, 0, 1"
    assert f.evidence["witness"]


def test_producer_parity_inverted_deadlocks_at_the_wait(checker):
    text = variant(GEMM_RAW, (PRODUCER_WAIT, "empty[k % S].wait(parity=(k // S) % 2)"))
    f = only(checker, text, "P005")
    line = line_of(text, "empty[k % S].wait")
    assert f.span.line == line
    assert "must observe phase -1" in f.message and "deadlock" in f.message
    assert f.hint.startswith("use `parity=(k // 2 + 1) % 2`")
    # the witness ends at the wait that blocks forever
    assert f.evidence["witness_steps"][-1]["line"] in {line, line_of(text, "full[k % S].wait")}
    assert any(s["line"] == line and "blocks forever" in s["text"]
               for s in f.evidence["witness_steps"])


def test_single_wait_parity_one(checker):
    text = variant(SCALE, ("full[0].wait(parity=0)", "full[0].wait(parity=1)"))
    f = only(checker, text, "P005")
    assert f.span.line == line_of(text, "full[0].wait")
    assert f.hint.startswith("use `parity=0`")


# ---- P006 parity-flip -----------------------------------------------------------------


def test_producer_flips_every_two_with_four_stages(checker):
    text = variant(GEMM_RAW, S4, (PRODUCER_WAIT, "empty[k % S].wait(parity=(k // 2 + 1) % 2)"))
    f = only(checker, text, "P006")
    assert f.span.line == line_of(text, "empty[k % S].wait")
    assert "(k=2)" in f.message and "phase -1 of empty[2]" in f.message
    assert f.hint.startswith("use `parity=(k // 4 + 1) % 2`")
    assert f.condition.endswith("over k=2, k=6: expected 1, 0, got 0, 0")


def test_parity_that_never_flips(checker):
    text = variant(GEMM_RAW, (CONSUMER_WAIT, "full[k % S].wait(parity=0)"))
    f = only(checker, text, "P006")
    assert f.span.line == line_of(text, "full[k % S].wait")
    assert "must observe phase 1" in f.message
    assert f.evidence["actual_parities"].replace(", ", "").strip("0") == ""


def test_stage_bit_parity_with_four_stages(checker):
    text = variant(GEMM_RAW, S4, (CONSUMER_WAIT, "full[k % S].wait(parity=k % 2)"))
    codes = [f.code for f in blocking(checker, text)]
    assert "P006" in codes and "P005" not in codes and "P007" not in codes


# ---- P007 parity-aliasing -------------------------------------------------------------


def test_pingpong_waiters_skip_phases(checker):
    text = PINGPONG.read_text()
    f = only(checker, text, "P007")
    assert f.span.line == line_of(text, "full = lm.mbarrier(")
    assert "work0 line" in f.message and "waits for phase 2 of full[0] after phase 0" in f.message
    assert "work1" in f.role and "even number of stages (now 1)" in f.hint
    assert f.evidence["witness"]


def test_one_slot_for_two_stages(checker):
    text = ONE_SLOT.read_text()
    f = only(checker, text, "P007")
    assert f.span.line == line_of(text, "full = lm.mbarrier(count=1)")
    assert "empty[0], empty[1]" in f.message
    assert "`stages=2`" in f.hint and "full[t % 2]" in f.hint and "(t // 2) % 2" in f.hint
