"""Slices of a fragment (`acc[:, j * 32:(j + 1) * 32]`): static extents checked when
parsed, the window in the IR, the plugin helpers and footprints, the emitted
`cg::SubTile` predicate (no run-time register index), the simulator's windows, and the
range rule H006 for origins that move with a loop. The corpus holds the staging-buffer
protocol (P014) and the out-of-range window (H006)."""

from __future__ import annotations

import pytest

from cakegov.analysis.footprint import Footprints, owners, tile_origin
from cakegov.check.context import ResourceView
from cakegov.gpu.compile import compile_nvrtc, nvrtc_available
from cakegov.ir.errors import InputError
from cakegov.ir.expr import BinOp, Const, Env, Var, evaluate
from cakegov.ir.nodes import FragmentRef
from cakegov.ir.parse import parse_source, walk_statements
from cakegov.ir.subtile import static_difference
from cakegov.lower.emit import emit_cuda
from cakegov.lower.kernel import LCompute, LFor
from cakegov.plugin import operand_shape
from cakegov.sim.evidence import lower_any, simulate_evidence

from .conftest import CORPUS

EPI = (CORPUS / "valid/gemm/epilogue_subtiles_producer_warp.cake").read_text(
    encoding="utf-8")
SOFTMAX = (CORPUS / "valid/softmax/rows_subtile_store_last_warp.cake").read_text(
    encoding="utf-8")
SLICE = "acc[:, j * SN:(j + 1) * SN]"
COPY = "lm.elementwise(c_s[j % 2], "


def parse(text, checker):
    return parse_source(text, checker.vocabulary)


def sub_tile(schedule):
    for role in schedule.roles:
        for stmt, _ in walk_statements(role.body):
            for value in getattr(stmt, "args", {}).values():
                if isinstance(value, FragmentRef) and value.tile is not None:
                    return stmt, value
    raise AssertionError("no sub-tile")


def j(k):
    return BinOp(op="*", lhs=Var(name="j"), rhs=Const(value=k))


def test_static_difference_of_affine_bounds():
    upper = BinOp(op="*", lhs=BinOp(op="+", lhs=Var(name="j"), rhs=Const(value=1)),
                  rhs=Const(value=32))
    assert static_difference(upper, j(32)) == 32
    assert static_difference(BinOp(op="+", lhs=j(32), rhs=Const(value=16)), j(32)) == 16
    assert static_difference(j(64), j(32)) is None  # depends on j
    mod = BinOp(op="%", lhs=Var(name="j"), rhs=Const(value=2))
    assert static_difference(BinOp(op="+", lhs=mod, rhs=Const(value=8)), mod) == 8


def test_a_slice_is_a_window_with_static_extents(checker):
    stmt, value = sub_tile(parse(EPI, checker))
    assert stmt.primitive == "elementwise" and value.name == "acc"
    t = value.tile
    assert (t.row0, t.rows, t.cols) == (Const(value=0), 128, 32)
    assert t.col0 == j(32)


@pytest.mark.parametrize("written, words", [
    ("acc[:, j * SN:(2 * j + 1) * SN]", "static, positive extent"),
    ("acc[:, j * SN:j * SN]", "static, positive extent"),
    ("acc[:, 0:32:2]", "no step"),
    ("acc[:, 3]", "slices `a:b`"),
    ("acc[0:64, 0:32, 0:1]", "at most 2 slices"),
    ("acc[:, 112:144]", "outside axis 1 of `acc` (extent 128)"),
    ("acc[-16:16, :]", "outside axis 0"),
])
def test_malformed_slices_are_located_input_errors(checker, written, words):
    text = EPI.replace(COPY + SLICE, COPY + written)
    with pytest.raises(InputError) as exc:
        parse(text, checker)
    assert exc.value.code == "E103" and words in exc.value.message
    line = EPI[:EPI.index(COPY + SLICE)].count("\n") + 1
    assert exc.value.span.line == line


def test_only_sliceable_arguments_take_a_slice(checker):
    text = EPI.replace("lm.mma(acc, a_s", "lm.mma(acc[:, 0:64], a_s")
    with pytest.raises(InputError) as exc:
        parse(text, checker)
    assert "takes a whole fragment" in exc.value.message


def test_the_plugin_helpers_see_the_window(checker, rulebook, workloads):
    schedule = parse(EPI, checker)
    stmt, value = sub_tile(schedule)

    view = ResourceView(schedule, workloads["gemm"])
    assert operand_shape(value, view) == (128, 32)
    effects = rulebook.primitives["elementwise"].effects(stmt, view)
    (read,) = effects.reads
    assert read.space == "reg" and read.bytes == 128 * 32 * 4
    (write,) = effects.writes
    assert write.spread.kind == "owner" and write.spread.tile == value.tile


def test_footprints_follow_the_window(rulebook, workloads):
    kernel, _, _, why = lower_any(EPI.encode(), "t.cake", rulebook, workloads)
    assert kernel is not None, why
    math = next(r for r in kernel.roles if r.name == "math")
    loop = [op for op in math.body if isinstance(op, LFor)][-1]
    copy = next(op for op in loop.body if isinstance(op, LCompute))
    (access,) = copy.writes
    fp = Footprints(kernel)
    layout = next(f.layout for f in kernel.fragments if f.name == "acc")
    own = owners(layout).reshape(128, 128)
    for jj in (0, 3):
        origin = tile_origin(access, lambda e, v=jj: evaluate(e, Env(vars={"j": v})))
        assert origin == (0, 32 * jj)
        f = fp.of("math", copy.path, 0, True, access, origin)
        threads = f.pairs[::4, 1].reshape(128, 32)  # 4 bytes per f32 element
        assert (threads == own[:, 32 * jj:32 * jj + 32]).all()


def test_emitted_windows_are_predicates_not_register_indices(rulebook, workloads):
    kernel, _, _, why = lower_any(EPI.encode(), "t.cake", rulebook, workloads)
    assert kernel is not None, why
    source = emit_cuda(kernel, rulebook.primitives, verifier_digest="x").source
    assert "cg::sub_tile<128, 32>(f_acc, (int)(0), (int)((v_j * 32)))" in source
    assert "struct SubTile" in source


@pytest.mark.skipif(not nvrtc_available(), reason="needs NVRTC")
@pytest.mark.parametrize("text", [EPI, SOFTMAX], ids=["gemm", "softmax"])
def test_sub_tiles_compile_without_local_memory(text, rulebook, workloads):
    kernel, _, _, why = lower_any(text.encode(), "t.cake", rulebook, workloads)
    assert kernel is not None, why
    source = emit_cuda(kernel, rulebook.primitives, verifier_digest="x").source
    result = compile_nvrtc(source, kernel.target)
    assert result.ok, result.log[-2000:]
    stats = result.parsed.stats
    assert stats.spill_stores == 0 and stats.spill_loads == 0 and stats.stack_frame == 0


def test_an_origin_that_leaves_the_fragment_is_h006(checker):
    path = CORPUS / "invalid/gemm/subtile_window_past_accumulator.cake"
    result = checker.check_path(path)
    (f,) = [f for f in result.findings if f.severity == "blocking"]
    assert f.code == "H006" and "columns up to 143 are outside 0..127" in f.message


def test_the_simulator_reports_a_window_out_of_range(rulebook, workloads):
    path = CORPUS / "invalid/gemm/subtile_window_past_accumulator.cake"
    ev = simulate_evidence(path.read_bytes(), str(path), rulebook, workloads, seeds=1)
    assert ev["status"] == "defect"
    assert ev["detail"].startswith("out of bounds") and "[0:128, 112:144]" in ev["detail"]


def test_a_store_of_a_sub_tile_writes_its_window(rulebook, workloads):
    # the accumulator stored straight from registers, one 128 x 32 window at a time
    base = (CORPUS / "valid/gemm/elected_release_per_warpgroup_s4.cake").read_text()
    whole = "        lm.store(C, at=(m0, n0), src=acc, mask=True)"
    loop = ("        for j in lm.range(0, {n}):\n"
            "            lm.store(C, at=(m0, n0 + j * 32), src=acc[:, j * 32:(j + 1) * 32], "
            "mask=True)")
    text = base.replace(whole, loop.format(n=4))
    ev = simulate_evidence(text.encode(), "t.cake", rulebook, workloads, seeds=1)
    assert ev["status"] == "correct", ev["detail"]
    # one window too few: the last 32 columns of every tile keep their poison
    short = base.replace(whole, loop.format(n=3))
    ev = simulate_evidence(short.encode(), "t.cake", rulebook, workloads, seeds=1)
    assert ev["status"] == "defect" and ev["detail"].startswith("wrong result")
