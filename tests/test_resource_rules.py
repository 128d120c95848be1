"""Edge cases of the hardware-resource rules R002-R009: limits hit exactly, one step over,
target differences, and hints whose suggested value really fixes the schedule."""

from __future__ import annotations

import re

import pytest

from .conftest import CORPUS

WS = (CORPUS / "valid/gemm/ws_pipeline_s4.cake").read_text(encoding="utf-8")
RAW = (CORPUS / "valid/gemm/raw_barriers_s2.cake").read_text(encoding="utf-8")
SCALE = (CORPUS / "valid/scale/tile_1stage.cake").read_text(encoding="utf-8")
KMEANS = (CORPUS / "valid/kmeans_assign/rows_pipelined_s2.cake").read_text(encoding="utf-8")
HANDOFF = (CORPUS / "valid/scale/named_barrier_handoff.cake").read_text(encoding="utf-8")

RESOURCE_CODES = ("R002", "R003", "R004", "R005", "R006", "R007", "R008", "R009")


def edit(src: str, *pairs: tuple[str, str]) -> str:
    """`src` with each `old` (which must occur exactly once) replaced by `new`."""
    for old, new in pairs:
        assert src.count(old) == 1, f"{old!r} occurs {src.count(old)} times"
        src = src.replace(old, new)
    return src


def line_of(src: str, needle: str) -> int:
    return next(i for i, line in enumerate(src.splitlines(), 1) if needle in line)


def check(checker, src: str, code: str | None = None):
    result = checker.check_bytes(src.encode(), "t.cake")
    errors = [f.message for f in result.findings if f.authority in ("input", "internal")]
    assert not errors, errors
    if code is None:
        return [f for f in result.findings if f.code in RESOURCE_CODES]
    return [f for f in result.findings if f.code == code]


@pytest.mark.parametrize("src", [WS, RAW, SCALE, KMEANS, HANDOFF],
                         ids=["ws", "raw", "scale", "kmeans", "handoff"])
def test_valid_schedules_have_no_resource_findings(checker, src):
    assert check(checker, src) == []


# ---- R002 register-pool --------------------------------------------------------------


def _ws_regs(loader: int | None, math: int | None) -> str:
    def role(name, warps, regs):
        tail = f", regs={regs}" if regs is not None else ""
        return f"{name} = lm.role(warps={warps}{tail})"
    return edit(WS,
                ("loader = lm.role(warps=range(0, 4), regs=40)",
                 role("loader", "range(0, 4)", loader)),
                ("math = lm.role(warps=range(4, 12), regs=232)",
                 role("math", "range(4, 12)", math)))


def test_register_pool_exactly_at_limit_passes(checker):
    # 4 x 32 x 48 + 8 x 32 x 232 = 6,144 + 59,392 = 65,536
    assert check(checker, _ws_regs(48, 232)) == []


def test_register_pool_one_step_over_fails_at_largest_role(checker):
    src = _ws_regs(56, 232)  # 7,168 + 59,392 = 66,560
    [f] = check(checker, src, "R002")
    assert f.span.line == line_of(src, "math = lm.role")
    assert f.role == "math"
    assert "66,560" in f.message and "65,536" in f.message
    assert "`loader` 4x32x56 = 7,168" in f.message
    assert "`math` 8x32x232 = 59,392" in f.message
    assert f.evidence["total"] == 66560


def _apply_regs_hint(src: str, hint: str) -> str:
    m = re.search(r"`regs=(\d+)` on role `(\w+)`", hint)
    assert m, hint
    regs, role = m.group(1), m.group(2)
    pattern = re.compile(rf"^(\s*{role} = lm\.role\(warps=range\(\d+, \d+\))(, regs=\d+)?\)",
                         re.M)
    fixed, n = pattern.subn(rf"\g<1>, regs={regs})", src)
    assert n == 1
    return fixed


@pytest.mark.parametrize("loader,math", [(56, 232), (40, 256), (232, None), (256, 256)])
def test_register_pool_hint_value_fits(checker, loader, math):
    src = _ws_regs(loader, math)
    [f] = check(checker, src, "R002")
    fixed = _apply_regs_hint(src, f.hint)
    assert check(checker, fixed) == [], f.hint


def test_register_pool_default_budget_of_twelve_warps_is_168(checker):
    # 65,536 // 384 = 170 -> 168 (multiple of 8) for the role without `regs=`.
    assert check(checker, _ws_regs(176, None)) == []  # 22,528 + 43,008 = 65,536
    [f] = check(checker, _ws_regs(184, None), "R002")
    assert f.evidence["default_regs"] == 168
    assert "`math` 8x32x168 (default) = 43,008" in f.message


def test_register_pool_default_budget_is_capped_per_thread(checker):
    # 4 warps: 65,536 // 128 = 512, capped at registers_per_thread 255.
    src = edit(SCALE, ("warps=4)", "warps=8)"),
               ("worker = lm.role(warps=range(0, 4))",
                "worker = lm.role(warps=range(0, 4))\n    spare = lm.role(warps=range(4, 8), "
                "regs=256)"))
    # 128 x 255 + 128 x 256 = 65,408 <= 65,536: the cap (not 256) keeps it under.
    assert check(checker, src, "R002") == []


# ---- R003 setmaxnreg-value -----------------------------------------------------------


def _kmeans_loader(regs: int) -> str:
    return edit(KMEANS, ("loader = lm.role(warps=range(0, 4), regs=40)",
                         f"loader = lm.role(warps=range(0, 4), regs={regs})"))


@pytest.mark.parametrize("regs", [24, 256, 128])
def test_setmaxnreg_legal_values_pass(checker, regs):
    assert check(checker, _kmeans_loader(regs), "R003") == []


@pytest.mark.parametrize("regs,nearest", [(16, 24), (20, 24), (264, 256), (300, 256),
                                          (236, 232), (237, 240), (41, 40), (0, 24)])
def test_setmaxnreg_illegal_values_fail_with_nearest_hint(checker, regs, nearest):
    src = _kmeans_loader(regs)
    [f] = check(checker, src, "R003")
    assert f.span.line == line_of(src, "loader = lm.role")
    assert f.role == "loader"
    assert f"`regs={nearest}`" in f.hint
    assert check(checker, _kmeans_loader(nearest), "R003") == []


def test_setmaxnreg_rejected_on_sm80(checker):
    src = edit(KMEANS, ('target="sm_90a"', 'target="sm_80"'))
    found = check(checker, src, "R003")
    assert sorted(f.role for f in found) == ["loader", "math"]
    assert all("sm_80 has no setmaxnreg" in f.message for f in found)
    assert all("remove `regs=" in f.hint for f in found)
    assert check(checker, edit(SCALE, ('target="sm_90a"', 'target="sm_80"')), "R003") == []


# ---- R004 setmaxnreg-warpgroup -------------------------------------------------------


def test_setmaxnreg_role_must_start_on_warpgroup(checker):
    src = edit(RAW, ("warps=8)", "warps=5)"),
               ("loader = lm.role(warps=range(0, 4), regs=40)",
                "loader = lm.role(warps=range(0, 1))"),
               ("math = lm.role(warps=range(4, 8), regs=232)",
                "math = lm.role(warps=range(1, 5), regs=232)"))
    [f] = check(checker, src, "R004")
    assert f.span.line == line_of(src, "math = lm.role")
    assert "starts at warp 1" in f.message
    assert "`warps=range(0, 4)`" in f.hint


def test_setmaxnreg_role_must_span_whole_warpgroups(checker):
    src = edit(RAW, ("warps=8)", "warps=6)"),
               ("math = lm.role(warps=range(4, 8), regs=232)",
                "math = lm.role(warps=range(4, 6), regs=232)"))
    [f] = check(checker, src, "R004")
    assert "has 2 warps, not a multiple of 4" in f.message


def test_misaligned_role_without_regs_is_fine(checker):
    src = edit(RAW, ("warps=8)", "warps=5)"),
               ("loader = lm.role(warps=range(0, 4), regs=40)",
                "loader = lm.role(warps=range(4, 5))"),
               ("math = lm.role(warps=range(4, 8), regs=232)",
                "math = lm.role(warps=range(0, 4), regs=232)"))
    assert check(checker, src) == []


# ---- R005 threads-per-cta ------------------------------------------------------------


def _scale_warps(warps: int) -> str:
    return edit(SCALE, ("warps=4)", f"warps={warps})"),
                ("worker = lm.role(warps=range(0, 4))",
                 f"worker = lm.role(warps=range(0, {warps}))"))


def test_threads_per_cta_at_limit_passes(checker):
    assert check(checker, _scale_warps(32)) == []


def test_threads_per_cta_one_warp_over_fails_at_launch(checker):
    src = _scale_warps(33)
    [f] = check(checker, src, "R005")
    assert f.span.line == line_of(src, "lm.launch(")
    assert "1,056 threads" in f.message and "1,024" in f.message
    assert "`warps=32`" in f.hint


# ---- R006 role-warp-sets -------------------------------------------------------------


def test_overlapping_roles_name_both_and_the_shared_warps(checker):
    src = edit(WS, ("warps=12)", "warps=13)"),
               ("math = lm.role(warps=range(4, 12), regs=232)",
                "math = lm.role(warps=range(3, 13))"))
    [f] = check(checker, src, "R006")
    assert f.span.line == line_of(src, "math = lm.role")
    assert "`loader` and `math`" in f.message and "warp 3" in f.message
    assert "range(4, 13)" in f.hint


def test_empty_role_range_is_an_error(checker):
    worker = "worker = lm.role(warps=range(0, 4))"
    src = edit(SCALE, (worker, worker + "\n    nobody = lm.role(warps=range(4, 4))"))
    [f] = check(checker, src, "R006")
    assert f.role == "nobody" and "has no warps" in f.message


def test_role_outside_the_launch(checker):
    src = edit(WS, ("math = lm.role(warps=range(4, 12), regs=232)",
                    "math = lm.role(warps=range(4, 16), regs=160)"))
    [f] = check(checker, src, "R006")
    assert f.role == "math" and "warps 12..15" in f.message
    assert "`warps=range(4, 12)`" in f.hint and "`warps=16`" in f.hint


def test_idle_warps_in_the_middle_are_named(checker):
    src = edit(WS, ("loader = lm.role(warps=range(0, 4), regs=40)",
                    "loader = lm.role(warps=range(0, 2))"))
    [f] = check(checker, src, "R006")
    assert f.span.line == line_of(src, "lm.launch(")
    assert "warps 2..3 belong to no role" in f.message
    assert "extend a role" in f.hint


def test_single_idle_warp_and_huge_launches_stay_cheap(checker):
    src = edit(WS, ("warps=12)", "warps=13)"))
    [f] = check(checker, src, "R006")
    assert "warp 12 belongs to no role" in f.message
    huge = edit(SCALE, ("warps=4)", "warps=1000000000)"),
                ("worker = lm.role(warps=range(0, 4))",
                 "worker = lm.role(warps=range(0, 500000000))"))
    found = check(checker, huge)
    assert {f.code for f in found} == {"R005", "R006"}
    [idle] = [f for f in found if f.code == "R006"]
    assert "warps 500000000..999999999 belong to no role" in idle.message


def test_idle_warps_hint_fixes_the_launch(checker):
    src = edit(WS, ("warps=12)", "warps=16)"))
    [f] = check(checker, src, "R006")
    assert "launch `warps=12`" in f.hint
    assert check(checker, edit(src, ("warps=16)", "warps=12)"))) == []


# ---- R007 named-barrier-usage --------------------------------------------------------

DECL = "ready = lm.named_barrier(id=1, threads=256)"


@pytest.mark.parametrize("bar_id", [1, 15])
def test_named_barrier_usable_ids_pass(checker, bar_id):
    assert check(checker, edit(HANDOFF, (DECL, DECL.replace("id=1", f"id={bar_id}")))) == []


@pytest.mark.parametrize("bar_id,why", [(0, "0 is __syncthreads"), (16, "ids 0..15"),
                                        (-1, "0 is __syncthreads")])
def test_named_barrier_bad_ids_fail(checker, bar_id, why):
    src = edit(HANDOFF, (DECL, DECL.replace("id=1", f"id={bar_id}")))
    [f] = check(checker, src, "R007")
    assert f.span.line == line_of(src, "ready = lm.named_barrier")
    assert why in f.message and "`id=1`" in f.hint


@pytest.mark.parametrize("threads,text", [(100, "not a positive multiple of 32"),
                                          (0, "not a positive multiple of 32"),
                                          (288, "the CTA has only 256")])
def test_named_barrier_bad_thread_counts_fail_once(checker, threads, text):
    src = edit(HANDOFF, (DECL, f"ready = lm.named_barrier(id=1, threads={threads})"))
    [f] = check(checker, src, "R007")
    assert text in f.message


def test_named_barrier_same_id_different_counts(checker):
    src = edit(HANDOFF, (DECL, DECL + "\n    other = lm.named_barrier(id=1, threads=128)"))
    [f] = check(checker, src, "R007")
    assert f.span.line == line_of(src, "other = lm.named_barrier")
    assert "`ready` and `other` share id 1" in f.message


def test_named_barrier_same_id_same_count_is_an_alias(checker):
    src = edit(HANDOFF, (DECL, DECL + "\n    other = lm.named_barrier(id=1, threads=256)"))
    assert check(checker, src) == []


def test_named_barrier_participants_must_match_count(checker):
    src = edit(HANDOFF, ("        ready.arrive()\n", ""))
    [f] = check(checker, src, "R007")
    assert "declared for 256 threads but the warps that use it have 128" in f.message
    assert "`threads=128`" in f.hint
    assert check(checker, edit(src, (DECL, DECL.replace("256", "128")))) == []


def test_unused_named_barrier_is_not_checked_for_users(checker):
    src = edit(HANDOFF, ("        ready.arrive()\n", ""), ("        ready.sync()\n", ""))
    assert check(checker, src, "R007") == []


# ---- R008 cluster-size ---------------------------------------------------------------


def _raw_cluster(cluster: str, target: str = "sm_90a") -> str:
    return edit(RAW, ("warps=8)", f"warps=8, cluster={cluster})"),
                ('target="sm_90a"', f'target="{target}"'))


def test_cluster_at_limit_passes(checker):
    assert check(checker, _raw_cluster("(2, 4, 1)"), "R008") == []


@pytest.mark.parametrize("cluster", ["(4, 4, 1)", "(3, 3, 1)", "(16,)", "(9, 1, 1)"])
def test_cluster_over_limit_hint_fits(checker, cluster):
    src = _raw_cluster(cluster)
    [f] = check(checker, src, "R008")
    assert f.span.line == line_of(src, "lm.launch(")
    m = re.search(r"`cluster=(\([0-9, ]+\))`", f.hint)
    assert m, f.hint
    assert check(checker, edit(src, (cluster, m.group(1))), "R008") == []


def test_cluster_rejected_on_sm80(checker):
    [f] = check(checker, _raw_cluster("(2, 1, 1)", "sm_80"), "R008")
    assert "at most 1" in f.message and "remove `cluster=`" in f.hint


# ---- R009 mbarrier-count -------------------------------------------------------------


def test_mbarrier_count_max_passes_and_one_over_fails(checker):
    decl = "cbar = lm.mbarrier(count=1)"
    assert check(checker, edit(KMEANS, (decl, "cbar = lm.mbarrier(count=1048575)")),
                 "R009") == []
    src = edit(KMEANS, (decl, "cbar = lm.mbarrier(count=1048576)"))
    [f] = check(checker, src, "R009")
    assert f.span.line == line_of(src, "cbar = lm.mbarrier")
    assert "1..1,048,575" in f.message


def test_mbarrier_count_hint_counts_arrivals_per_warp(checker):
    src = edit(RAW, ("empty = lm.mbarrier(count=4, stages=S)",
                     "empty = lm.mbarrier(count=0, stages=S)"))
    [f] = check(checker, src, "R009")
    assert f.resource == "empty" and "`count=4`" in f.hint


def test_mbarrier_count_hint_counts_expect_tx_once(checker):
    src = edit(RAW, ("full = lm.mbarrier(count=1, stages=S)",
                     "full = lm.mbarrier(count=-3, stages=S)"))
    [f] = check(checker, src, "R009")
    assert "`count=1`" in f.hint


@pytest.mark.parametrize("extra,bad", [(", full_count=0", True), (", empty_count=2", False),
                                       (", empty_count=2000000", True)])
def test_pipeline_counts_when_given(checker, extra, bad):
    decl = "ring = lm.pipeline(stages=4, buffers=[a_s, b_s], producer=loader, consumer=math"
    src = edit(WS, (decl, decl + extra))
    found = check(checker, src, "R009")
    assert len(found) == int(bad)
    if bad:
        assert found[0].span.line == line_of(src, "ring = lm.pipeline")
        assert "remove `" in found[0].hint
