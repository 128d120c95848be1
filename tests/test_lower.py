"""The lowering pass: every derived quantity of the LoweredKernel against the reference
behaviour (docs/lowering.md), and the `cakegov lower` command."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cakegov.cli import app
from cakegov.ir.expr import Const, Env, evaluate
from cakegov.ir.parse import parse_bytes
from cakegov.lower.build import lower_checked
from cakegov.lower.fragments import mma_warp_grid
from cakegov.lower.kernel import (
    LArrive,
    LCopy,
    LFor,
    LoweredKernel,
    LoweringError,
    LWait,
)
from cakegov.lower.layout import MBARRIER_BYTES, smem_layout
from cakegov.lower.text import lowered_text
from tests.conftest import CORPUS, ROOT
from tests.tiers import corpus_params

VALID = sorted((CORPUS / "valid").rglob("*.cake"))
WS = CORPUS / "valid/gemm/ws_pipeline_s4.cake"
RAW = CORPUS / "valid/gemm/raw_barriers_s2.cake"
KMEANS = CORPUS / "valid/kmeans_assign/rows_pipelined_s2.cake"
SCALE = CORPUS / "valid/scale/tile_1stage.cake"


@pytest.fixture(scope="module")
def lowered(rulebook, workloads, checker):
    cache: dict[Path, LoweredKernel] = {}

    def get(path: Path) -> LoweredKernel:
        if path not in cache:
            schedule = parse_bytes(path.read_bytes(), checker.vocabulary)
            cache[path] = lower_checked(schedule, rulebook, workloads[schedule.workload],
                                        str(path))
        return cache[path]

    return get


def ops(kernel: LoweredKernel, role: str):
    """Every op of a role, loops flattened, with its enclosing loop variable names."""
    out = []

    def visit(body, loops):
        for op in body:
            out.append((op, loops))
            if isinstance(op, LFor):
                visit(op.body, (*loops, op.var))

    visit(next(r for r in kernel.roles if r.name == role).body, ())
    return out


def first(kernel, role, kind, source=None):
    return next(op for op, _ in ops(kernel, role) if isinstance(op, kind)
                and (source is None or getattr(op, "source", None) == source))


def at(expr, k):
    return evaluate(expr, Env(vars={"k": k, "t": k}))


@pytest.mark.parametrize("path", corpus_params(VALID), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_valid_schedule_lowers_deterministically(path, rulebook, workloads, checker):
    schedule = parse_bytes(path.read_bytes(), checker.vocabulary)
    wl = workloads[schedule.workload]
    one = lower_checked(schedule, rulebook, wl, str(path))
    two = lower_checked(parse_bytes(path.read_bytes(), checker.vocabulary), rulebook, wl,
                        str(path))
    assert one.model_dump_json() == two.model_dump_json()
    assert lowered_text(one) == lowered_text(two)
    # the ABI: every tensor of the workload in TENSORS order, then every size, then the
    # tensor maps the copies go through
    maps = [t.name for t in one.tensor_maps]
    assert [p.name for p in one.params] == [*wl.tensors, *wl.sizes, *maps]
    assert [p.kind for p in one.params if p.name in maps] == ["tensor_map"] * len(maps)
    assert all(f.layout is not None for f in one.fragments)


def test_pipeline_stage_wraps_and_phase_flips(lowered):
    k = lowered(WS)  # 4-stage ring
    consumer = first(k, "math", LWait, "pipeline_wait")
    producer = first(k, "loader", LWait, "pipeline_acquire")
    assert consumer.barrier == "ring.full" and producer.barrier == "ring.empty"
    stages = [at(consumer.index, i) for i in range(10)]
    assert stages == [0, 1, 2, 3, 0, 1, 2, 3, 0, 1]  # index wraps at `stages`
    parity = [at(consumer.parity, i) for i in range(10)]
    assert parity == [0, 0, 0, 0, 1, 1, 1, 1, 0, 0]  # phase flips on each wrap
    # the producer waits on the opposite parity: its first pass finds every stage free
    assert [at(producer.parity, i) for i in range(10)] == [1 - p for p in parity]
    assert [at(producer.index, i) for i in range(10)] == stages


def test_raw_parity_is_kept_as_written(lowered):
    k = lowered(RAW)
    wait = first(k, "math", LWait)
    assert [at(wait.parity, i) for i in range(6)] == [0, 0, 1, 1, 0, 0]
    assert [at(wait.index, i) for i in range(6)] == [0, 1, 0, 1, 0, 1]


def test_barrier_counts_and_transaction_bytes(lowered):
    k = lowered(WS)
    full, empty = k.barrier("ring.full"), k.barrier("ring.empty")
    tile = 128 * 64 * 2
    assert (full.count, full.tx_bytes, full.stages) == (1, 2 * tile, 4)
    assert (empty.count, empty.stages) == (8, 4)  # one arrive per math warp
    arm = first(k, "loader", LArrive, "pipeline_acquire")
    assert (arm.arrivals, arm.tx_bytes, arm.tx_each, arm.per) == (1, 2 * tile, 2 * tile, "role")
    release = first(k, "math", LArrive, "pipeline_release")
    assert (release.arrivals, release.per, release.tx_bytes) == (8, "warp", 0)
    copies = [op for op, _ in ops(k, "loader") if isinstance(op, LCopy)]
    assert sum(c.bytes for c in copies) == full.tx_bytes  # what is armed is what lands
    raw = lowered(RAW)
    assert (raw.barrier("full").count, raw.barrier("empty").count) == (1, 4)


def test_offsets_are_aligned_and_disjoint(lowered):
    for path in VALID:
        k = lowered(path)
        spans = []
        for b in k.buffers:
            assert b.offset % b.align == 0, b
            if b.alias is not None:  # inside the storage it reuses, not disjoint from it
                root = k.buffer(b.alias)
                assert root.offset == b.offset and root.alias is None, b
                assert b.stages * b.stage_bytes <= root.stages * root.stage_bytes, b
                continue
            spans.append((b.offset, b.offset + b.stages * b.stage_bytes))
        for bar in k.barriers:
            assert bar.offset % MBARRIER_BYTES == 0
            spans.append((bar.offset, bar.offset + bar.stages * MBARRIER_BYTES))
            assert evaluate(bar.slot_offset(Const(value=1)), Env()) == bar.offset + 8
        if k.zero_bytes:
            assert k.zero_offset % 16 == 0 and k.zero_bytes % 16 == 0
            spans.append((k.zero_offset, k.zero_offset + k.zero_bytes))
        spans.sort()
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans)), path
        # the base may move by up to align - 16 bytes at run time: the slack is reserved
        assert spans[-1][1] + k.smem_base_align - 16 <= k.smem_bytes


def test_stage_offsets(lowered):
    k = lowered(WS)
    a, b = k.buffer("a_s"), k.buffer("b_s")
    assert (a.offset, b.offset, a.align) == (0, 65536, 1024)  # 128B swizzle repeat
    assert [evaluate(b.stage_offset(Const(value=s)), Env()) for s in range(4)] == [
        65536, 81920, 98304, 114688]


def test_zero_row_only_for_padded_row_wise_loads(lowered, checker):
    # tensor-map loads fill the out-of-bounds part of a box with zeros themselves
    k = lowered(WS)
    assert k.zero_bytes == 0 and all(op.tma is not None for op, _ in ops(k, "loader")
                                     if isinstance(op, LCopy))
    assert smem_layout(parse_bytes(SCALE.read_bytes(), checker.vocabulary)).zero_bytes == 0
    # a 512-wide f32 row is wider than a box (256 elements): the row-wise path, whose
    # padded tail tiles copy from the zero row
    wide = SCALE.read_text().replace("TM, TN = 32, 256", "TM, TN = 8, 512")
    padded = smem_layout(parse_bytes(wide.encode(), checker.vocabulary))
    # 512 f32 per row; the zero row follows the mbarrier at the next 16-byte boundary
    assert (padded.zero_offset, padded.zero_bytes, padded.total_bytes) == (
        16400, 2048, 16400 + 2048)
    unpadded = wide.replace("pad=True", "pad=False")
    layout = smem_layout(parse_bytes(unpadded.encode(), checker.vocabulary))
    assert (layout.zero_bytes, layout.zero_offset) == (0, 0)
    assert layout.total_bytes == 16384 + 8  # the tile and its mbarrier


def test_copy_view_of_the_source_tensor(lowered):
    k = lowered(WS)
    a = next(op for op, _ in ops(k, "loader") if isinstance(op, LCopy) and op.tensor == "A")
    assert (a.rows, a.row_bytes, a.elem_bytes, a.row_elems, a.pad) == (128, 128, 2, 64, True)
    env = Env(sizes={"M": 1000, "K": 320}, vars={"k": 2}, blocks={0: 3})
    assert [evaluate(e, env) for e in (a.src_rows, a.src_cols, a.row0, a.col0)] == [
        1000, 320, 384, 128]
    km = lowered(KMEANS)
    c = next(op for op, _ in ops(km, "loader") if isinstance(op, LCopy) and op.tensor == "C")
    # fixed sizes are constants in the lowered kernel
    assert (c.src_rows, c.src_cols, c.pad) == (Const(value=16), Const(value=64), False)


def test_setmaxnreg_per_role(lowered):
    k = lowered(WS)  # 384 threads: 65536 // 384 = 170, rounded down to 168
    assert k.launch_regs == 168
    roles = {r.name: (r.warp_start, r.warp_stop, r.regs, r.setmaxnreg) for r in k.roles}
    assert roles == {"loader": (0, 4, 40, "dec"), "math": (4, 12, 232, "inc")}
    scale = lowered(SCALE)
    assert [r.setmaxnreg for r in scale.roles] == [None]


def test_fragment_layouts(lowered):
    acc = lowered(WS).fragment("acc").layout
    assert (acc.kind, acc.warps_m, acc.warps_n, acc.tiles_m, acc.tiles_n, acc.slots) == (
        "mma", 4, 2, 2, 8, 64)
    assert acc.slots * acc.threads == 128 * 128
    km = lowered(KMEANS)
    dist, lab = km.fragment("dist").layout, km.fragment("lab").layout
    assert (dist.kind, dist.rows, dist.cols, dist.slots) == ("rows", 64, 16, 16)
    assert (lab.kind, lab.rows, lab.cols, lab.slots) == ("rows", 64, 1, 1)
    y = lowered(SCALE).fragment("y").layout
    assert (y.kind, y.threads, y.slots) == ("flat", 128, 32 * 256 // 128)


def test_mma_warp_grid():
    assert mma_warp_grid(64, 128, 4) == (2, 2)
    assert mma_warp_grid(16, 128, 4) == (1, 4)
    with pytest.raises(LoweringError, match="cannot be split over 8 warps"):
        mma_warp_grid(16, 8, 8)


def test_role_barrier_ids_skip_the_schedules_own(lowered):
    handoff = lowered(CORPUS / "valid/scale/named_barrier_handoff.cake")
    assert [n.id for n in handoff.named_barriers] == [1]
    assert [handoff.role_barrier(r.name) for r in handoff.roles] == [2, 3]
    peeled = lowered(CORPUS / "valid/gemm/raw_peeled_producer_s3.cake")
    assert [peeled.role_barrier(r.name) for r in peeled.roles] == [None, 1]  # 1 warp, 4 warps


def test_lowered_text_shows_the_derived_quantities(lowered):
    text = lowered_text(lowered(WS))
    for line in (
        "registers: 168 per thread at entry (__launch_bounds__(384, 1))",
        "  mbarrier ring.full[4] @ 131072, 131080, 131088, 131096: count 1, tx 32768 B/phase "
        "(pipeline_full of pipeline ring)",
        "  buffer a_s: bf16[128, 64] x 4 stages @ 0 (16384 B/stage, align 1024, swizzle 128B, "
        "swizzled layout)",
        "tensor map tmap_A_0: A bf16[lm.M, lm.K], box 128 x 64, swizzle 128B, "
        "out-of-bounds elements read as zero",
        "        # tensor map tmap_A_0 box 128 x 64, swizzle 128B: 1 cp.async.bulk.tensor.2d "
        "(+0 B <- tile (0, 0))",
        "role loader: warps [0, 4) threads [0, 128), setmaxnreg.dec 40",
        # an issue-only role: its first warp runs the loop, the others skip it
        "  warps [0] of the role only:",
        "      wait ring.empty[(k % 4)] parity (((k // 4) + 1) % 2)    # pipeline_acquire, "
        "line 16",
        "    arrive ring.empty[(k % 4)] x8 (one per warp)    # pipeline_release, line 23",
    ):
        assert line in text.splitlines()
    assert "zero row" not in text


# ---- the command ---------------------------------------------------------------------

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [*args, "--rules", str(ROOT / "rules"), "--workloads",
                               str(CORPUS / "workloads")])


def test_cli_lower_text_and_json():
    result = invoke("lower", str(SCALE))
    assert result.exit_code == 0, result.output
    assert result.output.startswith("kernel scale_tile    # workload scale, target sm_90a\n")
    result = invoke("lower", str(SCALE), "--format", "json")
    assert result.exit_code == 0
    kernel = LoweredKernel.model_validate(json.loads(result.output))
    assert kernel.name == "scale_tile" and kernel.zero_bytes == 0
    assert [t.name for t in kernel.tensor_maps] == ["tmap_X_0"]


def test_cli_lower_writes_a_file(tmp_path):
    out = tmp_path / "k.cu"
    result = invoke("lower", str(WS), "--emit", "cuda", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert "__launch_bounds__(384, 1)" in out.read_text()


def test_cli_lower_refuses_a_rejected_schedule():
    path = CORPUS / "invalid/gemm/smem_over_capacity.cake"
    result = invoke("lower", str(path))
    assert result.exit_code == 1
    assert "error[R001]" in result.output
    assert "only a clean schedule is lowered" in result.output


def test_cli_lower_missing_file():
    result = invoke("lower", "no/such.cake")
    assert result.exit_code == 2


def test_the_checker_and_the_emitter_lower_the_same_kernel(rulebook, workloads, checker):
    from cakegov.check.context import CheckContext

    schedule = parse_bytes(WS.read_bytes(), checker.vocabulary)
    ctx = CheckContext(schedule, str(WS), rulebook.targets["sm_90a"], workloads["gemm"],
                       rulebook.primitives)
    assert ctx.lowered == lower_checked(schedule, rulebook, workloads["gemm"], str(WS))
