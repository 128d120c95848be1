"""Edge cases of the hardware (H001-H006) and name (N001, N002) rules.

Each test derives a schedule from a valid corpus file by textual edits, checks it, and
asserts on the exact codes, lines and message details of the findings."""

from __future__ import annotations

import pytest

from .conftest import CORPUS
from .tiers import corpus_params

GEMM_RAW = CORPUS / "valid" / "gemm" / "raw_barriers_s2.cake"
GEMM_WS = CORPUS / "valid" / "gemm" / "ws_pipeline_s4.cake"
SCALE = CORPUS / "valid" / "scale" / "tile_1stage.cake"
KMEANS = CORPUS / "valid" / "kmeans_assign" / "rows_pipelined_s2.cake"
SOFTMAX = CORPUS / "valid" / "softmax" / "persistent_rows_s4.cake"
KNN = CORPUS / "valid" / "knn" / "rows_pipelined_s2.cake"
KMEANS_TILES = CORPUS / "valid" / "kmeans_assign" / "centroid_tiles_d128.cake"
FP8 = CORPUS / "valid" / "gemm" / "deepgemm_fp8_s2.cake"


def variant(path, *edits):
    """The text of `path` with each (old, new) replacement applied exactly once."""
    text = path.read_text(encoding="utf-8")
    for old, new in edits:
        assert text.count(old) == 1, f"{old!r} is not unique in {path.name}"
        text = text.replace(old, new)
    return text


def findings(checker, text, code):
    result = checker.check_bytes(text.encode(), "t.cake")
    errors = [f for f in result.findings if f.authority in ("input", "internal")]
    assert not errors, [f.message for f in errors]
    return [f for f in result.findings if f.code == code]


def line_of(text, needle):
    lines = [i for i, ln in enumerate(text.splitlines(), 1) if needle in ln]
    assert len(lines) == 1, needle
    return lines[0]


@pytest.mark.parametrize("path", corpus_params(sorted((CORPUS / "valid").rglob("*.cake"))),
                         ids=lambda p: p.stem)
@pytest.mark.parametrize("code", ["H001", "H002", "H003", "H004", "H005", "H006", "H008",
                                  "N001", "N002"])
def test_valid_corpus_is_clean(checker, path, code):
    assert findings(checker, path.read_text(encoding="utf-8"), code) == []


# ---- H001 mma-shape -------------------------------------------------------------------


def test_mma_k_not_a_multiple_of_the_instruction_k(checker):
    text = variant(GEMM_RAW, ("BM, BN, BK, S = 64, 128, 64, 2", "BM, BN, BK, S = 64, 128, 24, 2"))
    [f] = findings(checker, text, "H001")
    assert f.span.line == line_of(text, "lm.mma(")
    assert "K = 24 is not a multiple of mma_k_16bit = 16" in f.message
    assert "(64, 128, 16)" in f.hint and "K = 16 or 32" in f.hint


def test_mma_f32_operands_are_not_tensor_core_types(checker):
    text = variant(KMEANS, ("lm.sqdist(dist, x_s[ring.stage(t)], c_s)",
                            "lm.mma(dist, x_s[ring.stage(t)], c_s, transpose_b=True)"))
    found = findings(checker, text, "H001")
    assert {f.resource for f in found} == {"x_s", "c_s"}
    assert all("f32" in f.message and "tf32" in f.hint for f in found)


def test_mma_b_layout_must_match_transpose_flag(checker):
    text = variant(GEMM_RAW, ("transpose_b=True, init", "transpose_b=False, init"))
    [f] = findings(checker, text, "H001")
    assert "`b` (`b_s`) is (128, 64) but must be (K, N) = (64, 128)" in f.message
    assert "transpose_b=True" in f.message


def test_mma_accumulator_dtype(checker):
    text = variant(GEMM_RAW, ('acc = lm.fragment("f32"', 'acc = lm.fragment("bf16"'))
    [f] = findings(checker, text, "H001")
    assert f.resource == "acc" and "accumulate in f32" in f.message


# ---- H002 bulk-copy-size --------------------------------------------------------------


def test_misaligned_innermost_coordinate_is_caught(checker):
    text = variant(GEMM_RAW, ("at=(m0, k * BK), barrier=full[k % S]",
                              "at=(m0, k * BK + 4), barrier=full[k % S]"))
    [f] = findings(checker, text, "H002")
    assert f.span.line == line_of(text, "k * BK + 4")
    assert "= 4 (k = 0)" in f.message and "8 is not 16-byte aligned" in f.message
    assert f.evidence["bytes"] == 8


@pytest.mark.parametrize("coord", ["k * BK + 8", "(k + 1) * BK", "k * 8"])
def test_aligned_innermost_coordinate_is_not_reported(checker, coord):
    text = variant(GEMM_RAW, ("at=(m0, k * BK), barrier=full[k % S]",
                              f"at=(m0, {coord}), barrier=full[k % S]"))
    assert findings(checker, text, "H002") == []


def test_alignment_witness_comes_from_a_block_index(checker):
    # 36 f32 columns = 144 B rows (fine), but a 2-column offset misaligns every row start
    text = variant(SCALE, ("TM, TN = 32, 256", "TM, TN = 32, 36"),
                   ("x_s[0].load(X, at=(m0, n0)", "x_s[0].load(X, at=(m0, n0 + 2)"))
    [f] = findings(checker, text, "H002")
    assert "lm.block(1) = 0" in f.message and "8 is not 16-byte aligned" in f.message


def test_tile_row_not_a_multiple_of_16_bytes(checker):
    text = variant(SCALE, ("TM, TN = 32, 256", "TM, TN = 32, 30"))
    found = findings(checker, text, "H002")
    rows = [f for f in found if "120 bytes, not a multiple of 16" in f.message]
    assert len(rows) == 1 and "28 or 32" in rows[0].hint
    # n0 = block(1) * 30 also misaligns the row starts: a second, distinct finding
    assert any("not 16-byte aligned" in f.message for f in found)


def test_no_bulk_copies_on_sm80_is_one_finding_at_the_target(checker):
    text = variant(GEMM_RAW, ('target="sm_90a"', 'target="sm_80"'))
    [f] = findings(checker, text, "H002")
    assert f.span.line == line_of(text, "@cake.schedule")
    assert "lines 20, 21" in f.message and "sm_90a" in f.hint


def test_row_pitch_checked_for_every_accepted_launch(checker):
    fixed = variant(SCALE, ('divisible={"N": 4})', 'sizes={"N": 1002})'))
    [f] = findings(checker, fixed, "H002")
    assert "4008 bytes apart" in f.message and f.resource == "X"
    assert "fix `sizes=`" in f.hint
    aligned = variant(SCALE, ('divisible={"N": 4})', 'sizes={"N": 1004})'))
    assert findings(checker, aligned, "H002") == []
    # Without `divisible=`, the workload's N = 333 check shape has unaligned rows.
    free = variant(SCALE, (', divisible={"N": 4})', ")"))
    [f] = findings(checker, free, "H002")
    assert "N = 333" in f.message and "divisible={'N': 4}" in f.hint


# ---- H003 swizzle-alignment -----------------------------------------------------------


def test_swizzle_stage_not_on_repeat(checker):
    # 4 x 64 bf16 = 512 B per stage: stage 1 starts off the 1024 B pattern of 128B swizzle
    text = variant(GEMM_RAW, ("BM, BN, BK, S = 64, 128, 64, 2", "BM, BN, BK, S = 4, 128, 64, 2"))
    [f] = findings(checker, text, "H003")
    assert f.resource == "a_s" and f.span.line == line_of(text, "a_s = lm.smem")
    assert "512 bytes, not a multiple of its 128B swizzle repeat (1024 bytes)" in f.message


@pytest.mark.parametrize("align, reported", [(128, True), (512, True), (1024, False),
                                             (2048, False)])
def test_swizzle_declared_alignment(checker, align, reported):
    text = variant(GEMM_RAW, ('stages=S, swizzle="128B")\n    b_s',
                              f'stages=S, swizzle="128B", align={align})\n    b_s'))
    found = findings(checker, text, "H003")
    assert bool(found) == reported
    if reported:
        assert f"align={align}" in found[0].message and "align=1024" in found[0].hint


def test_narrower_row_than_swizzle_is_fine(checker):
    text = variant(GEMM_RAW, ('a_s = lm.smem("bf16", (BM, BK), stages=S, swizzle="128B")',
                              'a_s = lm.smem("bf16", (BM, 16), stages=S, swizzle="64B")'))
    assert findings(checker, text, "H003") == []


# ---- H004 operand-dtype ---------------------------------------------------------------


def test_load_into_view_of_another_dtype(checker):
    text = variant(SCALE, ('x_s = lm.smem("f32", (TM, TN))', 'x_s = lm.smem("bf16", (TM, TN))'))
    found = findings(checker, text, "H004")
    by_line = {f.span.line: f for f in found}
    load = by_line[line_of(text, "x_s[0].load")]
    assert "bulk copies move bytes and do not convert" in load.message
    # the scale reads bf16 into an f32 fragment: also a mismatch, at its own line
    assert line_of(text, "lm.elementwise") in by_line


def test_cast_is_the_only_converting_elementwise_op(checker):
    cast = variant(SCALE, ('op="scale", alpha=2.5', 'op="cast"'),
                   ('y = lm.fragment("f32"', 'y = lm.fragment("f16"'),
                   ('lm.store(Y, at=(m0, n0), src=y', 'lm.store(Y, at=(m0, n0), src=x_s[0]'))
    assert findings(checker, cast, "H004") == []
    scale = variant(SCALE, ('y = lm.fragment("f32"', 'y = lm.fragment("f16"'),
                    ('lm.store(Y, at=(m0, n0), src=y', 'lm.store(Y, at=(m0, n0), src=x_s[0]'))
    [f] = findings(checker, scale, "H004")
    assert 'op="scale"' in f.message and "only op=\"cast\"" in f.message


def test_argmin_result_must_be_i32(checker):
    text = variant(KMEANS, ('lab = lm.fragment("i32"', 'lab = lm.fragment("f32"'))
    found = findings(checker, text, "H004")
    reduce = [f for f in found if f.span.line == line_of(text, "lm.reduce")]
    assert len(reduce) == 1 and "argmin writes indices, which are i32" in reduce[0].message


def test_mma_operands_must_share_a_dtype(checker):
    text = variant(GEMM_RAW, ('b_s = lm.smem("bf16"', 'b_s = lm.smem("f16"'))
    found = findings(checker, text, "H004")
    assert {f.span.line for f in found} == {line_of(text, "b_s[k % S].load"),
                                           line_of(text, "lm.mma(")}


# ---- H005 tile-divisibility -----------------------------------------------------------

_NO_PAD = ("a_s[k % S].load(A, at=(m0, k * BK), barrier=full[k % S], pad=True)",
           "a_s[k % S].load(A, at=(m0, k * BK), barrier=full[k % S])")


def test_load_without_pad_names_dim_extent_and_shape(checker):
    text = variant(GEMM_RAW, _NO_PAD)
    [f] = findings(checker, text, "H005")
    assert f.span.line == line_of(text, "a_s[k % S].load")
    assert "tiles of 64 along M" in f.message and "M=1000" in f.message
    assert "pad=True" in f.hint and 'divisible={"M": 64}' in f.hint


@pytest.mark.parametrize("claim", ['divisible={"K": 64, "M": 64}', 'divisible={"K": 64, "M": 128}',
                                   'sizes={"M": 4096}, divisible={"K": 64}'])
def test_divisible_or_fixed_size_suppresses(checker, claim):
    text = variant(GEMM_RAW, _NO_PAD, ('divisible={"K": 64}', claim))
    assert findings(checker, text, "H005") == []


def test_divisible_by_a_non_multiple_is_not_enough(checker):
    text = variant(GEMM_RAW, _NO_PAD, ('divisible={"K": 64}', 'divisible={"K": 64, "M": 32}'))
    [f] = findings(checker, text, "H005")
    assert "lm.M is not guaranteed to be a multiple of 64" in f.message


def test_unmasked_store_reports_each_dim(checker):
    text = variant(GEMM_RAW, ("src=acc, mask=True)", "src=acc)"))
    found = findings(checker, text, "H005")
    assert sorted(f.evidence["dim"] for f in found) == ["M", "N"]
    assert all("mask=True" in f.hint for f in found)


# ---- H006 stage-index-range -----------------------------------------------------------


def test_modulo_larger_than_stages_reports_range(checker):
    text = variant(GEMM_RAW, ("BM, BN, BK, S = 64, 128, 64, 2", "BM, BN, BK, S = 64, 128, 64, 4"),
                   ("a_s[k % S].load(", "a_s[k % 8].load("))
    [f] = findings(checker, text, "H006")
    assert f.span.line == line_of(text, "a_s[k % 8].load(")
    assert f.stage == 7 and f.evidence["range"] == [0, 7]  # the first stage out of range
    assert "4 stages (0..3)" in f.message
    assert "`k % 8` takes values 0..7" in f.message  # as the source writes it


def test_multistage_view_without_index(checker):
    text = variant(GEMM_RAW, ("lm.mma(acc, a_s[k % S],", "lm.mma(acc, a_s,"))
    [f] = findings(checker, text, "H006")
    assert f.resource == "a_s" and "without a stage index" in f.message


def test_raw_barrier_index_past_last_stage(checker):
    text = variant(GEMM_RAW, ("empty[k % S].arrive()", "empty[k % S + 1].arrive()"))
    [f] = findings(checker, text, "H006")
    assert f.resource == "empty" and f.stage == 2 and f.evidence["range"] == [1, 2]


def test_pipeline_buffer_stage_mismatch_reported_once_at_declaration(checker):
    text = variant(GEMM_WS, ('a_s = lm.smem("bf16", (BM, BK), stages=4',
                             'a_s = lm.smem("bf16", (BM, BK), stages=3'))
    [f] = findings(checker, text, "H006")
    assert f.span.line == line_of(text, "ring = lm.pipeline")
    assert f.resource == "a_s" and "declared with 3" in f.message


# ---- N001 unknown-name, N002 unknown-target ------------------------------------------


def test_typod_primitive_gets_a_suggestion(checker):
    text = variant(GEMM_RAW, ("lm.mma(acc,", "lm.mmaa(acc,"))
    [f] = findings(checker, text, "N001")
    assert f.span.line == line_of(text, "lm.mmaa(")
    assert "unknown primitive `lm.mmaa`" in f.message
    assert f.hint is not None and f.hint.startswith("did you mean `lm.mma`")  # closest first


def test_typod_method_and_size(checker):
    method = variant(GEMM_WS, ("ring.release(k)", "ring.relase(k)"))
    [f] = findings(checker, method, "N001")
    assert "`relase`" in f.message and "`release`" in f.hint
    size = variant(GEMM_WS, ("lm.range(0, lm.cdiv(lm.K, BK)):\n            ring.wait",
                             "lm.range(0, lm.cdiv(lm.KK, BK)):\n            ring.wait"))
    [f] = findings(checker, size, "N001")
    assert "workload size `lm.KK`" in f.message and "`lm.K`" in f.hint


def test_unknown_target_suggests_and_silences_hardware_rules(checker):
    text = variant(GEMM_RAW, ('target="sm_90a"', 'target="sm_90"'),
                   ("BM, BN, BK, S = 64, 128, 64, 2", "BM, BN, BK, S = 72, 128, 64, 2"))
    result = checker.check_bytes(text.encode(), "t.cake")
    codes = {f.code for f in result.findings}
    assert codes == {"N002"}, codes
    [f] = result.findings
    assert f.span.line == line_of(text, "@cake.schedule")
    assert f.hint == "did you mean `sm_90a`?" and "`sm_100a`, `sm_80`, `sm_90a`" in f.message


def test_async_primitives_get_the_hardware_checks(checker):
    """mma_async and store_async are checked like mma and store."""
    wgmma = CORPUS / "valid" / "gemm" / "wgmma_trailing_release_s4.cake"
    bad_k = variant(wgmma, ("BM, BN, BK, S = 64, 128, 64, 4", "BM, BN, BK, S = 64, 128, 72, 4"))
    assert findings(checker, bad_k, "H001"), "K = 72 is not a multiple of 16 for bf16"
    epilogue = CORPUS / "valid" / "scale" / "store_async_epilogue.cake"
    tails = variant(epilogue, ('divisible={"M": 32, "N": 256}', 'divisible={"N": 4}'),
                    ("barrier=full[0])", "barrier=full[0], pad=True)"))
    found = findings(checker, tails, "H005")
    assert {f.span.line for f in found} == {line_of(tails, "y_s[0].store_async(")}
    masked = variant(epilogue, ('divisible={"M": 32, "N": 256}', 'divisible={"N": 4}'),
                     ("barrier=full[0])", "barrier=full[0], pad=True)"),
                     ("store_async(Y, at=(m0, n0))", "store_async(Y, at=(m0, n0), mask=True)"))
    assert findings(checker, masked, "H005") == []


# ---- H008 operand-shape ---------------------------------------------------------------


def test_row_vector_sized_by_columns_is_caught_at_reduce_and_rowwise(checker):
    """`mx` declared with the row length (128) instead of the row count (64): the reduce
    writes 64 of its values and the broadcast reads one per row of `e`."""
    text = variant(SOFTMAX, ('mx = lm.fragment("f32", (BR,), role=math)',
                             'mx = lm.fragment("f32", (128,), role=math)'))
    found = findings(checker, text, "H008")
    assert sorted(f.span.line for f in found) == sorted(
        [line_of(text, "lm.reduce(mx,"), line_of(text, "lm.rowwise(e, x_s")])
    reduce = next(f for f in found if f.span.line == line_of(text, "lm.reduce(mx,"))
    assert "gives 64 values, but `dst` (`mx`) is 128" in reduce.message
    assert reduce.hint == "declare `mx` with shape (64,)"
    rowwise = next(f for f in found if f is not reduce)
    assert rowwise.resource == "mx" and "one value of `vec` per row" in rowwise.message


def test_elementwise_between_fragments_of_different_shapes(checker):
    text = variant(SCALE, ('lm.elementwise(y, x_s[0], op="scale", alpha=2.5)',
                           'lm.elementwise(y, x_s[0], op="scale", alpha=2.5)\n'
                           '        lm.elementwise(z, y, op="relu")'),
                   ('    m0, n0 =', '    z = lm.fragment("f32", (TM, TN // 2), role=worker)\n'
                                    '    m0, n0 ='))
    [f] = findings(checker, text, "H008")
    assert f.span.line == line_of(text, "lm.elementwise(z, y")
    assert f.resource == "y" and "columns (256 against 128)" in f.message
    assert "`y[0:32, 0:128]`" in f.hint  # the window of the larger fragment


def test_topk_result_and_k(checker):
    wide = variant(KNN, ('nn = lm.fragment("i32", (BR, 4)', 'nn = lm.fragment("i32", (BR, 8)'))
    [f] = findings(checker, wide, "H008")
    assert "writes 64 x 4 indices" in f.message and f.hint == "declare `nn` with shape (64, 4)"
    many = variant(KNN, ('nn = lm.fragment("i32", (BR, 4)', 'nn = lm.fragment("i32", (BR, 32)'),
                   ("lm.topk(nn, dist, k=4)", "lm.topk(nn, dist, k=32)"))
    [f] = findings(checker, many, "H008")
    assert "selects k = 32 of the 16 columns of `dist`" in f.message


def test_running_argmin_needs_one_value_per_row(checker):
    text = variant(KMEANS_TILES, ('best = lm.fragment("f32", (BR,), role=math)',
                                  'best = lm.fragment("f32", (BR // 2,), role=math)'))
    found = [f for f in findings(checker, text, "H008")
             if f.span.line == line_of(text, "lm.argmin_update(")]
    assert [f.resource for f in found] == ["best"]


def test_row_scales_shorter_than_the_accumulator(checker):
    text = variant(FP8, ('sa_s = lm.smem("f32", (1, BM), stages=2)',
                         'sa_s = lm.smem("f32", (1, BM // 2), stages=2)'))
    found = [f for f in findings(checker, text, "H008")
             if f.span.line == line_of(text, "lm.scale_accumulate(")]
    assert len(found) == 1 and found[0].resource == "sa_s"
    assert "would read past it" in found[0].message


# ---- H006: ranges are exact, not interval over-approximations --------------------------


def test_stage_index_written_without_modulo_is_evaluated_exactly(checker):
    """`k - S * (k // S)` is `k % S` for k >= 0: intervals treating `k` and `k // S` as
    independent gave -S..K and rejected a legal schedule; every iteration is evaluated."""
    text = variant(GEMM_RAW, ("            empty[k % S].arrive()",
                              "            empty[k - S * (k // S)].arrive()"))
    assert findings(checker, text, "H006") == []
    wrong = variant(GEMM_RAW, ("            empty[k % S].arrive()",
                               "            empty[k - S * (k // S) + 1].arrive()"))
    [f] = findings(checker, wrong, "H006")
    assert "takes values 1..2" in f.message and f.stage == 2


def test_sub_tile_origin_with_an_equivalent_modulo_is_in_range(checker):
    """The sub-tile windows of the 4-column-block epilogue in a rotated order."""
    sub = CORPUS / "valid" / "gemm" / "epilogue_subtiles_producer_warp.cake"
    # (j + 6) - 4 * ((j + 6) // 4) visits the windows 2, 3, 0, 1 (intervals: -2..5)
    text = variant(sub, ("lm.elementwise(c_s[j % 2], acc[:, j * SN:(j + 1) * SN]",
                         "lm.elementwise(c_s[j % 2], acc[:, ((j + 6) - 4 * ((j + 6) // 4)) "
                         "* SN:((j + 6) - 4 * ((j + 6) // 4) + 1) * SN]"))
    assert findings(checker, text, "H006") == []
