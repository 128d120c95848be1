"""Target spellings: the PTX strings and C++ types the CUDA emitter prints, as data.

Templates never spell an instruction themselves; they print `ptx.<key>` from the table of
the kernel's target. A target without a table cannot be emitted (the emitter says so)."""

from __future__ import annotations

from collections.abc import Mapping

# PTX ISA 8.x spellings for Hopper with architecture-specific features.
SM90A_PTX: dict[str, str] = {
    "mbarrier_init": "mbarrier.init.shared::cta.b64",
    "fence_mbarrier_init": "fence.mbarrier_init.release.cluster",
    "mbarrier_arrive": "mbarrier.arrive.shared::cta.b64",
    "mbarrier_arrive_expect_tx": "mbarrier.arrive.expect_tx.shared::cta.b64",
    "mbarrier_try_wait_parity": "mbarrier.try_wait.parity.shared::cta.b64",
    "bulk_copy_g2s": "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes",
    "bulk_copy_s2s": "cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes",
    "bulk_copy_s2g": "cp.async.bulk.global.shared::cta.bulk_group",
    "bulk_commit_group": "cp.async.bulk.commit_group",
    "bulk_wait_group_read": "cp.async.bulk.wait_group.read",
    "fence_proxy_async": "fence.proxy.async.shared::cta",
    "bar_sync": "bar.sync",
    "bar_arrive": "bar.arrive",
    "setmaxnreg_inc": "setmaxnreg.inc.sync.aligned.u32",
    "setmaxnreg_dec": "setmaxnreg.dec.sync.aligned.u32",
    "mma_bf16": "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
    "mma_f16": "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
    "cvt_f32_f16": "cvt.f32.f16",
    "cvt_f16_f32": "cvt.rn.f16.f32",
    # thread-block clusters (PTX ISA: cp.async.bulk .multicast::cluster, mapa,
    # mbarrier.arrive .shared::cluster, barrier.cluster)
    "bulk_copy_g2s_multicast": "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx"
                               "::bytes.multicast::cluster",
    "mapa": "mapa.shared::cluster.u32",
    "mbarrier_arrive_remote": "mbarrier.arrive.release.cluster.shared::cluster.b64",
    "barrier_cluster_arrive": "barrier.cluster.arrive.release.aligned",
    "barrier_cluster_wait": "barrier.cluster.wait.acquire.aligned",
    # fp8 (sm_89+): mma.sync m16n8k32 and the paired conversions (PTX ISA, mma; cvt)
    "mma_e4m3": "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32",
    "mma_e5m2": "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32",
    "cvt_f16x2_e4m3x2": "cvt.rn.f16x2.e4m3x2",
    "cvt_f16x2_e5m2x2": "cvt.rn.f16x2.e5m2x2",
    "cvt_e4m3x2_f32": "cvt.rn.satfinite.e4m3x2.f32",
    "cvt_e5m2x2_f32": "cvt.rn.satfinite.e5m2x2.f32",
    # tensor-map copies (PTX ISA 9.7.9.27 cp.async.bulk.tensor; sm_90): a 2-D box global ->
    # shared completing on an mbarrier, its multicast form (sm_90a), and shared -> global
    # in a bulk group
    "tma_load_2d": "cp.async.bulk.tensor.2d.shared::cluster.global.tile"
                   ".mbarrier::complete_tx::bytes",
    "tma_load_2d_multicast": "cp.async.bulk.tensor.2d.shared::cluster.global.tile"
                             ".mbarrier::complete_tx::bytes.multicast::cluster",
    "tma_store_2d": "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group",
    # warpgroup MMA (PTX ISA 9.7.15: wgmma.fence, wgmma.mma_async, wgmma.commit_group,
    # wgmma.wait_group; sm_90a)
    "wgmma_fence": "wgmma.fence.sync.aligned",
    "wgmma_mma_async": "wgmma.mma_async.sync.aligned",
    "wgmma_commit": "wgmma.commit_group.sync.aligned",
    "wgmma_wait": "wgmma.wait_group.sync.aligned",
}

# wgmma operand types: schedule dtype -> (PTX type, takes the imm-trans-a/b operands).
# PTX ISA 9.7.15.5: only the 16-bit types have the transpose immediates; fp8 operands are
# K-major by definition.
WGMMA_TYPES: dict[str, tuple[str, bool]] = {
    "bf16": ("bf16", True),
    "f16": ("f16", True),
    "f8e4m3": ("e4m3", False),
    "f8e5m2": ("e5m2", False),
}

PTX: dict[str, Mapping[str, str]] = {"sm_90a": SM90A_PTX}

# Element types: schedule dtype -> C++ storage type in the emitted kernel. bf16, f16 and
# the 1-byte fp8 formats are bit patterns wrapped in distinct structs (no cuda_bf16.h,
# cuda_fp16.h or cuda_fp8.h needed, so NVRTC compiles without include paths; the fp8
# structs stand for `__nv_fp8_e4m3` / `__nv_fp8_e5m2`); conversions are in the runtime.
CTYPES: dict[str, str] = {
    "f64": "double",
    "f32": "float",
    "tf32": "float",
    "f16": "cg::f16",
    "bf16": "cg::bf16",
    "f8e4m3": "cg::f8e4m3",
    "f8e5m2": "cg::f8e5m2",
    "i32": "int",
    "u32": "unsigned",
    "i8": "signed char",
    "u8": "unsigned char",
}

# Who executes an arrive (`LArrive.per`): the condition a role thread tests.
ARRIVERS: dict[str, str] = {"role": "cg_rtid == 0", "warp": "cg_lane == 0", "thread": "true"}

# `LFence.scope` -> the runtime call.
FENCES: dict[str, str] = {"proxy_async": "cg::fence_proxy_async();", "warp": "__syncwarp();",
                          "mbarrier_init": "cg::fence_mbarrier_init();"}

# `LFragLayout.kind` -> the runtime fragment type (template arguments follow the kind).
FRAGMENT_TYPES: dict[str, str] = {"flat": "cg::FragFlat", "rows": "cg::FragRows",
                                  "mma": "cg::FragMma", "wgmma": "cg::FragWgmma"}

GRID_AXES = ("x", "y", "z")
