"""Thread-block clusters in index expressions: `lm.cluster_rank(...)`.

A launch with `cluster=(cx, cy, cz)` groups the grid into clusters of cx x cy x cz CTAs
that tile the grid contiguously (CUDA programming guide, "Thread Block Clusters"), so a
CTA's coordinate inside its cluster along axis `a` is `blockIdx[a] % cluster[a]`
(`%cluster_ctaid`), and its linear rank is `x + cx * (y + cy * z)` (`%cluster_ctarank`,
cooperative groups' `cluster.block_rank()`). The front end spells both as ordinary
index expressions over `lm.block`, so every consumer of expressions (evaluation, the
protocol analysis, the CUDA emitter, the simulator) reads them without a new node kind.

Loop bounds may not depend on the block index (every CTA of the grid runs the same trip
count) except through the cluster rank: peers of a cluster whose loops disagree in length
(one CTA issues the multicast of a shared tile, its peers do not) are part of the
language, and the protocol analysis explores every CTA of the cluster together."""

from __future__ import annotations

from cakegov.ir.expr import BinOp, Block, Compare, Const, Expr, StageOf


def axis_rank(axis: int, cluster: tuple[int, ...]) -> Expr:
    """The CTA's coordinate in its cluster along `axis`: `lm.block(axis) % cluster[axis]`."""
    size = cluster[axis] if axis < len(cluster) else 1
    if size == 1:
        return Const(value=0)
    return BinOp(op="%", lhs=Block(axis=axis), rhs=Const(value=size))


def linear_rank(cluster: tuple[int, ...]) -> Expr:
    """The CTA's linear rank in its cluster (`%cluster_ctarank`): x + cx * (y + cy * z)."""
    dims = (*cluster, 1, 1, 1)[:3]
    out: Expr = axis_rank(2, dims)
    for axis in (1, 0):
        inner = out
        if not (isinstance(inner, Const) and inner.value == 0):
            inner = BinOp(op="*", lhs=Const(value=dims[axis]), rhs=inner)
        rank = axis_rank(axis, dims)
        if isinstance(inner, Const) and inner.value == 0:
            out = rank
        elif isinstance(rank, Const) and rank.value == 0:
            out = inner
        else:
            out = BinOp(op="+", lhs=rank, rhs=inner)
    return out


def rank_only(expr: Expr, cluster: tuple[int, ...]) -> bool:
    """Does `expr` depend on the block index only through the cluster rank (every
    `lm.block(a)` in it is the left operand of `% cluster[a]`)?"""
    if isinstance(expr, Block):
        return False
    if isinstance(expr, BinOp):
        if expr.op == "%" and isinstance(expr.lhs, Block) and isinstance(expr.rhs, Const):
            axis = expr.lhs.axis
            size = cluster[axis] if axis < len(cluster) else 1
            return expr.rhs.value == size and size > 1
        return rank_only(expr.lhs, cluster) and rank_only(expr.rhs, cluster)
    if isinstance(expr, Compare):
        return rank_only(expr.lhs, cluster) and rank_only(expr.rhs, cluster)
    if isinstance(expr, StageOf):
        return rank_only(expr.iter, cluster)
    return True


def cluster_size(cluster: tuple[int, ...]) -> int:
    n = 1
    for d in cluster:
        n *= d
    return n
