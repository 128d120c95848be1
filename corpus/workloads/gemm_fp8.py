"""Block-scaled fp8 GEMM (the DeepGEMM format): C[M, N] = sum over K blocks kb of
(A[:, kb] * SA[kb, :]^T) @ (B[:, kb] * SB[:, kb])^T, with A (M, K) and B (N, K) in E4M3,
one f32 scale per row of A and 128-wide K block (SA, stored K-block-major: (KB, M)) and
one per 128 x 128 block of B (SB: (NB, KB)), and an f32 output.

KB = K / 128 and NB = ceil(N / 128) are sizes of their own (the scale tensors' extents);
every check shape keeps them consistent, and a schedule that fixes K fixes KB with it."""

import numpy as np

from cakegov.ir.fp8 import fp8_round

NAME = "gemm_fp8"
SIZES = ("M", "N", "K", "KB", "NB")
TENSORS = {
    "A": ("f8e4m3", ("M", "K")),
    "B": ("f8e4m3", ("N", "K")),
    "SA": ("f32", ("KB", "M")),
    "SB": ("f32", ("NB", "KB")),
    "C": ("f32", ("M", "N")),
}
OUTPUTS = ("C",)
BLOCK = 128
SHAPES = (
    {"M": 256, "N": 256, "K": 512, "KB": 4, "NB": 2},
    {"M": 200, "N": 320, "K": 512, "KB": 4, "NB": 3},  # M and N not tile multiples
    {"M": 1024, "N": 1024, "K": 1024, "KB": 8, "NB": 8},
)
# Relative to max |C|. The operands are exact fp8 values and the scales exact f32, so the
# only error is the kernel's arithmetic: products of two fp8 values are exact in f32, the
# tensor cores sum 128 of them per block (Hopper's fp8 accumulation keeps about 14 bits,
# which is why DeepGEMM promotes every 128: <= 2^-14 = 6.1e-5 relative per block), then
# one f32 multiply-add per block. 1e-3 bounds that with margin; a block added twice, a
# wrong scale or a missing block is off by at least 1 / KB.
TOLERANCE = {"f32": 1e-3}


def derive(sizes):
    """KB and NB from K and N, for shapes the tools grow (a persistent kernel's M and N)."""
    return {**sizes, "KB": sizes["K"] // BLOCK, "NB": -(-sizes["N"] // BLOCK)}


def _quantise(x, rows, blocks):
    """Per (row, K block) scales amax / 448 and the E4M3 values of x / scale."""
    xb = x.reshape(rows, blocks, BLOCK)
    amax = np.maximum(np.abs(xb).max(axis=2), 1e-4)
    scale = (amax / 448.0).astype(np.float32)
    q = fp8_round((xb / scale[:, :, None]).reshape(rows, blocks * BLOCK), "f8e4m3")
    return q.astype(np.float32), scale


def generate(sizes, rng):
    """Normal data with magnitudes that vary by row and by K block (so the scales matter),
    quantised the DeepGEMM way: A per row and block, B per 128 x 128 block."""
    m, n, kb, nb = sizes["M"], sizes["N"], sizes["KB"], sizes["NB"]
    k = kb * BLOCK
    a = rng.normal(0.0, 1.0, size=(m, k)) * rng.uniform(0.1, 4.0, size=(m, 1))
    b = rng.normal(0.0, 1.0, size=(n, k)) * rng.uniform(0.1, 4.0, size=(1, k))
    qa, sa = _quantise(a, m, kb)
    npad = nb * BLOCK
    bpad = np.zeros((npad, k))
    bpad[:n] = b
    blocks = bpad.reshape(nb, BLOCK, kb, BLOCK)
    sb = np.maximum(np.abs(blocks).max(axis=(1, 3)), 1e-4) / 448.0
    qb = fp8_round(blocks / sb[:, None, :, None], "f8e4m3").reshape(npad, k)[:n]
    return {"A": qa, "B": qb.astype(np.float32), "SA": np.ascontiguousarray(sa.T),
            "SB": sb.astype(np.float32)}


def reference(inputs, sizes):
    a = inputs["A"].astype(np.float64)
    b = inputs["B"].astype(np.float64)
    sa = inputs["SA"].astype(np.float64)  # (KB, M)
    sb = inputs["SB"].astype(np.float64)  # (NB, KB)
    m, n = a.shape[0], b.shape[0]
    c = np.zeros((m, n))
    for kb in range(sa.shape[0]):
        blk = slice(kb * BLOCK, (kb + 1) * BLOCK)
        col_scale = np.repeat(sb[:, kb], BLOCK)[:n]
        c += (a[:, blk] @ b[:, blk].T) * sa[kb][:, None] * col_scale[None, :]
    return {"C": c}
