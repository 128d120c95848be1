"""The Hopper fast path without a GPU: tensor-map boxes, the swizzled shared-memory layout,
wgmma descriptors and the accumulator, each checked against the layout model
(cakegov/lower/swizzle.py, wgmma.py), the emitted CUDA and the simulator's byte placement;
the wgmma and tensor-map choices and their reasons; the host encoding of tensor maps on a
stand-in for the driver API."""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest

from cakegov.analysis.footprint import owners
from cakegov.gpu.device import cuda_available
from cakegov.gpu.tensormap import (
    TENSOR_MAP_DTYPE,
    TensorMapError,
    TensorMapSpec,
    encode,
    problems,
    specs,
)
from cakegov.ir.dtypes import dtype_bytes
from cakegov.ir.nodes import SmemDecl, Span
from cakegov.ir.parse import parse_bytes
from cakegov.lower.build import lower_checked
from cakegov.lower.emit import TEMPLATES, emit_cuda
from cakegov.lower.kernel import LBuffer, LCompute, LCopy, LFor, LoweredKernel
from cakegov.lower.swizzle import MODES, KMajorTile
from cakegov.lower.tma import tile_plan
from cakegov.lower.warpgroup import instruction_n, warpgroup_grid
from cakegov.lower.wgmma import MatrixDescriptor, accumulator_element
from cakegov.sim.memory import SharedMemory, decode
from cakegov.sim.ops import _descriptor_addresses
from cakegov.sim.run import Options, simulate_run
from cakegov.sim.state import CORRECT
from tests.conftest import CORPUS
from tests.tiers import corpus_params

WGMMA = CORPUS / "valid/gemm/wgmma_trailing_release_s4.cake"
FAST = CORPUS / "valid/gemm/fast_ws_128x256_s4.cake"
SPAN = Span(line=1, col=0, end_line=1, end_col=0)


@pytest.fixture(scope="module")
def lowered(rulebook, workloads, checker):
    def get(path=None, text: str | None = None) -> LoweredKernel:
        source = text.encode() if text is not None else path.read_bytes()
        schedule = parse_bytes(source, checker.vocabulary)
        return lower_checked(schedule, rulebook, workloads[schedule.workload], "x.cake")

    return get


def _ops(kernel: LoweredKernel):
    def walk(body):
        for op in body:
            if isinstance(op, LFor):
                yield from walk(op.body)
            else:
                yield op
    for role in kernel.roles:
        yield from walk(role.body)


def _decl(dtype: str, shape: tuple[int, ...], swizzle: str) -> SmemDecl:
    return SmemDecl(path="resources[0]", span=SPAN, name="t", dtype=dtype, shape=shape,
                    swizzle=swizzle)


def _landing(base: int, box, box_cols: int, row: int, col: int, elem: int, mode) -> int:
    """Where a tensor-map box puts tile element (row, col): boxes land densely, row after
    row of `box_cols` elements, from the box's destination, and the swizzle of the map
    permutes the 16-byte chunks by the shared-memory address bits (CUDA driver API,
    CUtensorMapSwizzle; PTX ISA cp.async.bulk.tensor)."""
    dense = base + box.offset + ((row - box.row) * box_cols + (col - box.col)) * elem
    return mode.apply(dense)


def _box_of(plan, row: int, col: int):
    return next(b for b in plan.boxes
                if b.row <= row < b.row + plan.box_rows and b.col <= col < b.col + plan.box_cols)


# ---- tensor-map boxes against the layout model -----------------------------------------


@pytest.mark.parametrize(("dtype", "shape", "swizzle"), [
    ("bf16", (64, 64), "128B"), ("bf16", (512, 128), "128B"),  # 2 panels, 2 row boxes
    ("f16", (16, 32), "64B"), ("f8e4m3", (8, 64), "64B"), ("f32", (32, 8), "32B"),
    ("bf16", (24, 16), "32B")])
def test_swizzled_boxes_land_every_element_where_the_model_puts_it(dtype, shape, swizzle):
    decl = _decl(dtype, shape, swizzle)
    plan = tile_plan(decl, swizzled=True)
    mode = MODES[swizzle]
    elem = dtype_bytes(dtype)
    base = 3 * mode.repeat  # a stage on its repeat boundary, not at 0
    tile = KMajorTile(base, shape[0], shape[1], elem, mode)
    seen = set()
    for r in range(shape[0]):
        for c in range(shape[1]):
            got = _landing(base, _box_of(plan, r, c), plan.box_cols, r, c, elem, mode)
            assert got == tile.address(r, c), (r, c)
            seen.add(got)
    assert len(seen) == shape[0] * shape[1]  # and no two elements share bytes
    assert plan.box_cols * elem == mode.width and plan.box_rows <= 256


def test_plain_boxes_keep_the_row_major_layout():
    plan = tile_plan(_decl("f32", (512, 64), "none"), swizzled=False)
    assert (plan.box_rows, plan.box_cols, len(plan.boxes)) == (256, 64, 2)
    for r in (0, 255, 256, 511):
        for c in (0, 63):
            box = _box_of(plan, r, c)
            assert _landing(0, box, 64, r, c, 4, MODES["none"]) == (r * 64 + c) * 4


def test_tiles_no_tensor_map_takes_say_why():
    assert "wider than a box" in tile_plan(_decl("f32", (8, 512), "none"), swizzled=False)
    assert "multiple of 16 bytes" in tile_plan(_decl("f32", (8, 2), "none"), swizzled=False)
    assert "equal height" in tile_plan(_decl("f32", (300, 4), "none"), swizzled=False)
    assert "no tensor-map element type" in tile_plan(_decl("tf32", (8, 8), "none"), False)


# ---- the swizzled layout: lowering, emitted CUDA, simulator ----------------------------


def _runtime_offset(r: int, c: int, rows: int, elem: int, sw: int) -> int:
    """A transcription of `cg::Smem::offset` (cakegov/lower/templates/runtime.cuh.j2);
    `test_the_runtime_offset_is_the_transcribed_formula` pins the template's text."""
    width = 16 << sw
    byte = c * elem
    within = byte & (width - 1)
    flip = (r >> (3 - sw)) & ((1 << sw) - 1)
    return (byte >> (4 + sw)) * (rows * width) + r * width + \
        ((((within >> 4) ^ flip) << 4) | (within & 15))


def test_the_runtime_offset_is_the_transcribed_formula():
    text = (TEMPLATES / "runtime.cuh.j2").read_text()
    for line in ("const int within = byte & (W - 1);",
                 "const int flip = (r >> (3 - SW)) & ((1 << SW) - 1);",
                 "return (byte >> (4 + SW)) * (R * W) + r * W + "
                 "((((within >> 4) ^ flip) << 4) | (within & 15));"):
        assert line in text


@pytest.mark.parametrize("name", ["32B", "64B", "128B"])
@pytest.mark.parametrize(("rows", "elem", "panels"), [(64, 2, 1), (128, 2, 2), (8, 1, 1),
                                                      (16, 4, 3)])
def test_the_runtime_offset_equals_the_model(name, rows, elem, panels):
    mode = MODES[name]
    cols = panels * mode.width // elem
    tile = KMajorTile(0, rows, cols, elem, mode)
    for r in range(rows):
        for c in range(cols):
            assert _runtime_offset(r, c, rows, elem, mode.bits) == tile.address(r, c)


def test_every_element_is_where_lowering_model_emitted_code_and_simulator_agree(
        lowered, rulebook):
    """For the wgmma GEMM's swizzled stages (64 x 64 and 128 x 64 bf16): the lowered
    element offset, the layout model, the emitted tensor-map boxes, the emitted `Smem`
    template argument, the simulator's byte placement and the emitted wgmma descriptors
    all name the same byte for every (row, column)."""
    k = lowered(WGMMA)
    src = emit_cuda(k, rulebook.primitives, verifier_digest=rulebook.digest()).source
    copies = {op.buffer: op for op in _ops(k) if isinstance(op, LCopy)}
    smem = SharedMemory(k, 64)
    for buf in k.buffers:
        assert buf.layout == "swizzled"
        rows, cols = buf.shape
        elem = dtype_bytes(buf.dtype)
        mode = MODES[buf.swizzle]
        copy = copies[buf.name]
        tmap = k.tensor_map(copy.tma.map)
        values = (np.arange(rows * cols) % 251 - 125).reshape(rows, cols).astype(np.float32)
        for stage in range(buf.stages):
            start = buf.offset + stage * buf.stage_bytes
            tile = KMajorTile(start, rows, cols, elem, mode)
            smem.write_tile(buf.name, start, values, None)
            for r in range(rows):
                for c in range(cols):
                    model = tile.address(r, c)
                    assert start + buf.element_offset(r, c) == model
                    box = next(b for b in copy.tma.boxes if b.row <= r < b.row + tmap.box_rows
                               and b.col <= c < b.col + tmap.box_cols)
                    assert _landing(start, box, tmap.box_cols, r, c, elem, mode) == model
                    assert _runtime_offset(r, c, rows, elem, mode.bits) + start == model
                    raw = smem.data[model:model + elem]
                    assert decode(buf.dtype, raw)[0] == values[r, c]
            assert np.array_equal(smem.read_tile(buf.name, start), values)
    # the descriptors the emitted code builds: every instruction of the first mma_async
    mma = next(op for op in _ops(k) if isinstance(op, LCompute) and op.wgmma is not None)
    w = mma.wgmma
    calls = re.findall(r"cg::wgmma_desc\(cg_d([ab]) \+ (\d+)u, (0x[0-9a-f]+)ull\)", src)
    assert len(calls) == 2 * 2 * w.k_steps  # two mma_async calls, A and B each
    a_buf, b_buf = k.buffer("a_s"), k.buffer("b_s")
    for side, start_text, hi_text in calls[:2 * w.k_steps]:
        buf = a_buf if side == "a" else b_buf
        step = getattr(w, side).starts[0].index(int(start_text))
        base = buf.offset  # stage 0; the emitted code adds the stage offset the same way
        desc = MatrixDescriptor.decode(int(hi_text, 16) | ((base + int(start_text)) >> 4))
        tile = KMajorTile(base, *buf.shape, 2, MODES[buf.swizzle])
        n = 64 if side == "a" else w.n
        for r in range(n):
            for kk in range(16):
                assert desc.address(r, 2 * kk) == tile.address(r, step * 16 + kk)
    # and the simulator's descriptor reads name the same bytes
    for side, blocks, block_rows, groups in (("a", w.blocks_m, 64, w.groups_m),
                                             ("b", w.blocks_n, w.n, w.groups_n)):
        buf = k.buffer(getattr(w, side).buffer)
        start = buf.offset + buf.stage_bytes
        addrs = _descriptor_addresses(getattr(w, side), start, groups, blocks, block_rows,
                                      w.k_steps, buf)
        tile = KMajorTile(start, *buf.shape, 2, MODES[buf.swizzle])
        for r in range(buf.shape[0]):
            for c in range(buf.shape[1]):
                assert addrs[r, c, 0] == tile.address(r, c)


def test_mma_sync_reads_swizzled_stages_through_the_swizzled_accessor(lowered, rulebook):
    k = lowered(CORPUS / "valid/gemm/ws_pipeline_s4.cake")
    src = emit_cuda(k, rulebook.primitives, verifier_digest=rulebook.digest()).source
    assert [b.layout for b in k.buffers] == ["swizzled", "swizzled"]
    # Smem<T, R, C, SW>: SW = 3 for 128B, the offsets of `_runtime_offset` above
    assert "cg::Smem<cg::bf16, 128, 64, 3>{(cg::bf16*)(cg_smem + (0 + " in src
    assert "cg::Smem<cg::bf16, 128, 64, 3>{(cg::bf16*)(cg_smem + (65536 + " in src


def test_wgmma_accumulator_layout_follows_figure_149(lowered):
    k = lowered(FAST)
    lay = k.fragment("acc").layout
    assert (lay.kind, lay.groups_m, lay.groups_n, lay.inst_n, lay.slots) == (
        "wgmma", 2, 1, 256, 128)
    own = owners(lay).reshape(lay.rows, lay.cols)
    for g in range(2):
        for t in (0, 5, 127):
            for i in range(0, 128, 17):
                r, c = accumulator_element(t, i, 256)
                assert own[64 * g + r, c] == 128 * g + t


# ---- the simulator validates the lowering ----------------------------------------------


def _run(kernel, workloads, rulebook) -> str:
    result = simulate_run(kernel, workloads["gemm"], rulebook.primitives,
                          {"M": 64, "N": 128, "K": 256}, Options(seed=0))
    return result.outcome


def test_the_simulator_reads_wgmma_operands_through_the_descriptors(lowered, workloads,
                                                                    rulebook):
    k = lowered(WGMMA)
    assert _run(k, workloads, rulebook) == CORRECT

    def broken(update_a=None, update_b=None):
        roles = []
        for role in k.roles:
            def fix(body):
                out = []
                for op in body:
                    if isinstance(op, LFor):
                        op = op.model_copy(update={"body": fix(op.body)})
                    elif isinstance(op, LCompute) and op.wgmma is not None:
                        w = op.wgmma
                        a = w.a.model_copy(update=update_a or {})
                        b = w.b.model_copy(update=update_b or {})
                        op = op.model_copy(update={"wgmma": w.model_copy(
                            update={"a": a, "b": b})})
                    out.append(op)
                return tuple(out)
            roles.append(role.model_copy(update={"body": fix(role.body)}))
        return k.model_copy(update={"roles": tuple(roles)})

    assert k.roles[1].name == "math"
    hi = next(op for op in _ops(k) if isinstance(op, LCompute) and op.wgmma).wgmma.b.hi
    # K steps out of order, a wrong stride byte offset, the swizzle bits dropped
    starts = next(op for op in _ops(k) if isinstance(op, LCompute) and op.wgmma).wgmma.a.starts
    assert _run(broken(update_a={"starts": (tuple(reversed(starts[0])),)}), workloads,
                rulebook) != CORRECT
    sbo = MatrixDescriptor.decode(hi)
    wrong = MatrixDescriptor(0, sbo.lbo, 2 * sbo.sbo, sbo.swizzle).encode()
    assert _run(broken(update_b={"hi": wrong}), workloads, rulebook) != CORRECT
    assert _run(broken(update_b={"hi": hi & ~(3 << 62)}), workloads, rulebook) != CORRECT
    # a buffer the copy does not swizzle while the descriptors assume it
    plain = tuple(b.model_copy(update={"layout": "row_major"}) if b.name == "b_s" else b
                  for b in k.buffers)
    assert _run(k.model_copy(update={"buffers": plain}), workloads, rulebook) != CORRECT


# ---- which path, and why not -----------------------------------------------------------


def _notes(kernel):
    return [op.note for op in _ops(kernel) if isinstance(op, LCompute)
            and op.primitive == "mma_async"]


def test_fallbacks_keep_mma_sync_and_say_why(lowered):
    text = WGMMA.read_text()
    assert all(op.wgmma is not None for op in _ops(lowered(WGMMA))
               if isinstance(op, LCompute) and op.primitive == "mma_async")
    plain = lowered(text=text.replace('swizzle="128B"', 'swizzle="none"'))
    assert all("not in the swizzled layout" in n for n in _notes(plain))
    assert plain.fragment("acc").layout.kind == "mma"
    mn = lowered(text=text.replace("transpose_b=True", "transpose_b=False"))
    assert all("MN-major" in n for n in _notes(mn))
    split = lowered(text=text.replace("range(4, 8), regs=232", "range(5, 9), regs=232")
                    .replace("range(0, 4), regs=40", "range(0, 5), regs=40")
                    .replace("warps=8)", "warps=9)"))
    assert all("not whole warpgroups" in n for n in _notes(split))
    # mma_async and mma.sync on one accumulator: every call keeps mma.sync
    mixed = text.replace("lm.mma_async(acc, a_s[ring.stage(k)], b_s[ring.stage(k)], "
                         "transpose_b=True)", "lm.mma(acc, a_s[ring.stage(k)], "
                         "b_s[ring.stage(k)], transpose_b=True)")
    notes = _notes(lowered(text=mixed))
    assert notes and all("also written by mma.sync" in n for n in notes)


def test_warpgroup_grid_and_instruction_shape():
    assert warpgroup_grid(128, 256, 2) == (2, 1)
    assert warpgroup_grid(64, 256, 2) == (1, 2)
    assert warpgroup_grid(64, 12, 2) is None
    assert instruction_n(256) == (1, 256) and instruction_n(512) == (2, 256)
    assert instruction_n(320) == (2, 160) and instruction_n(8) == (1, 8)


def test_the_fast_gemm_takes_every_fast_path(lowered):
    k = lowered(FAST)
    ops = list(_ops(k))
    assert all(op.tma is not None for op in ops if isinstance(op, LCopy))
    (mma, *_rest) = [op for op in ops if isinstance(op, LCompute) and op.wgmma is not None]
    w = mma.wgmma
    assert (w.n, w.k, w.k_steps, w.groups_m, w.a.group_stride) == (256, 16, 4, 2, 64 * 128)
    assert [b.layout for b in k.buffers] == ["swizzled", "swizzled"]
    assert k.zero_bytes == 0 and [r.regs for r in k.roles] == [40, 232]
    assert [(t.box_rows, t.box_cols) for t in k.tensor_maps] == [(128, 64), (256, 64)]


# ---- host encoding of tensor maps ------------------------------------------------------


class _Driver:
    cuuint64_t = cuuint32_t = CUtensorMapDataType = CUtensorMapInterleave = int
    CUtensorMapSwizzle = CUtensorMapL2promotion = CUtensorMapFloatOOBfill = int

    def __init__(self, result: int = 0):
        self.result, self.calls = result, []

    def cuInit(self, flags):
        return (0,)

    def cuTensorMapEncodeTiled(self, *args):
        self.calls.append(args)
        return self.result, type("Map", (), {"opaque": list(range(16))})()


SPEC = TensorMapSpec("tmap_A_0", "A", "bf16", 1000, 320, 128, 64, "128B")


def test_encoding_passes_the_documented_arguments():
    drv = _Driver()
    value = encode(SPEC, 1 << 20, drv)
    (args,) = drv.calls
    # data type BFLOAT16, rank 2, address, dims innermost first, the row pitch, the box,
    # element strides 1, no interleave, 128B swizzle, 256 B L2 promotion, zero fill
    assert args == (9, 2, 1 << 20, [320, 1000], [640], [64, 128], [1, 1], 0, 3, 3, 0)
    # one element of 128 bytes: CuPy passes a size-one numpy array by value
    assert value.dtype == TENSOR_MAP_DTYPE and value.shape == (1,) and value.nbytes == 128
    assert list(value["opaque"][0]) == list(range(16))


def test_encoding_refuses_what_the_driver_would_with_a_clear_error():
    assert problems(SPEC, 8)[0].startswith("globalAddress 0x8 is not 16-byte aligned")
    odd = TensorMapSpec("m", "A", "bf16", 10, 321, 128, 64, "128B")
    assert any("row pitch" in p for p in problems(odd, 0))
    wide = TensorMapSpec("m", "X", "f32", 10, 64, 8, 64, "128B")
    assert any("exceeds the 128B swizzle" in p for p in problems(wide, 0))
    drv = _Driver()
    with pytest.raises(TensorMapError, match=r"tensor map m \(A bf16\[10, 321\].*row pitch"):
        encode(odd, 0, drv)
    assert drv.calls == []  # never reaches the driver
    with pytest.raises(TensorMapError, match="cuTensorMapEncodeTiled failed"):
        encode(SPEC, 0, _Driver(result=1))


def test_encoding_without_cuda_bindings_is_a_clear_error(monkeypatch):
    for name in ("cuda.bindings", "cuda.bindings.driver", "cuda"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(TensorMapError, match="cuda-bindings"):
        encode(SPEC, 0)


def test_specs_evaluate_the_tensor_views(lowered):
    k = lowered(FAST)
    got = specs(k, {"M": 1000, "N": 520, "K": 320})
    assert [(s.tensor, s.rows, s.cols, s.box_rows, s.box_cols, s.swizzle) for s in got] == [
        ("A", 1000, 320, 128, 64, "128B"), ("B", 520, 320, 256, 64, "128B")]


def test_lbuffer_without_a_swizzle_is_row_major():
    buf = LBuffer(name="x", dtype="f32", shape=(4, 8), stages=1, offset=0, stage_bytes=128,
                  align=16, swizzle="none")
    assert buf.tile() is None and buf.element_offset(2, 3) == (2 * 8 + 3) * 4


@pytest.mark.parametrize("path", corpus_params(sorted((CORPUS / "valid").rglob("*.cake"))),
                         ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_valid_tensor_map_encodes_at_every_shape_it_runs(path, lowered, workloads,
                                                               checker):
    """What the GPU check will ask of the driver, without one: every tensor map of every
    valid schedule at its check and headline shapes meets cuTensorMapEncodeTiled's
    documented requirements (a 256-byte aligned allocation stands for CuPy's)."""
    from cakegov.gpu.data import headline_shapes, select_shapes

    k = lowered(path)
    schedule = parse_bytes(path.read_bytes(), checker.vocabulary)
    wl = workloads[schedule.workload]
    shapes = select_shapes(wl, schedule.sizes, schedule.divisible)
    shapes += headline_shapes(wl, schedule.sizes, schedule.divisible)[0]
    for sizes in shapes:
        for spec in specs(k, sizes):
            assert problems(spec, 256) == [], (sizes, spec)


@pytest.mark.gpu
@pytest.mark.skipif(not cuda_available(), reason="needs CuPy and a CUDA device")
def test_the_driver_encodes_the_fast_gemm_tensor_maps(lowered):
    """On a device: cuTensorMapEncodeTiled accepts every tensor map of the fast GEMM at the
    headline shape over CuPy buffers, and the bytes differ per buffer."""
    import cupy

    k = lowered(FAST)
    sizes = {"M": 4096, "N": 4096, "K": 4096}
    encoded = []
    for spec in specs(k, sizes):
        buf = cupy.zeros((spec.rows, spec.cols), dtype=cupy.uint16)
        value = encode(spec, int(buf.data.ptr))
        assert value.shape == (1,) and value.nbytes == 128 and value["opaque"].any()
        encoded.append(bytes(value.tobytes()))
    assert len(set(encoded)) == len(encoded)
