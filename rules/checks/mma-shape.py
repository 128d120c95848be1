"""Tensor-core MMA operands must have supported dtypes and tile shapes of whole instructions.

## What it does
For every `lm.mma(acc, a, b, transpose_b=...)` and `lm.mma_async(...)` it checks, against
the target table:
- both operand dtypes are in `mma_dtypes`;
- the accumulator is `f32` (also `f16` when both operands are `f16`; `i32` for 8-bit
  integer operands);
- the shapes agree: `acc` is (M, N), `a` is (M, K), `b` is (K, N), or (N, K) with
  `transpose_b=True`;
- M is a multiple of `mma_m`, N of `mma_n`, and K of the instruction K for the operand
  dtype (`mma_k_16bit` for f16/bf16, `mma_k_tf32` for tf32, `mma_k_8bit` for 8-bit types).
The finding names the operand, the offending extent and the nearest legal tile.

## Why is this bad?
The tile is executed as a grid of fixed-shape tensor-core instructions (m16n8k16 for
bf16). A tile that is not a whole number of instructions cannot be lowered without
silently dropping or over-reading rows; an unsupported dtype or accumulator does not exist
as an instruction and fails to compile (or, worse, is emulated at a fraction of the
throughput the schedule was chosen for).

## Failing example
`corpus/invalid/gemm/mma_m_not_multiple.cake`:
```python
BM, BN, BK, S = 72, 128, 64, 2
lm.mma(acc, a_s[k % S], b_s[k % S], transpose_b=True, init=(k == 0))
```

## Passing example
`corpus/valid/gemm/raw_barriers_s2.cake`:
```python
BM, BN, BK, S = 64, 128, 64, 2
lm.mma(acc, a_s[k % S], b_s[k % S], transpose_b=True, init=(k == 0))
```
"""

from cakegov.ir.dtypes import dtype_bytes
from cakegov.ir.expr import Const
from cakegov.ir.nodes import BoolValue, ExprValue, FragmentDecl, SmemDecl

CODE = "H001"
NAME = "mma-shape"
VERSION = "1.1.0"
SEVERITY = "blocking"
CATEGORY = "hardware"
STATUS = "stable"
MOTIVATED_BY = ("corpus/invalid/gemm/mma_m_not_multiple.cake",)

_INTEGER = frozenset({"i8", "u8"})


def _flag(value):
    """True/False for a static bool argument, None when it depends on the iteration."""
    if value is None:
        return False
    if isinstance(value, BoolValue):
        return value.value
    if isinstance(value, ExprValue) and isinstance(value.expr, Const):
        return bool(value.expr.value)
    return None


def _k_key(dtype):
    """The target key holding the instruction K for an operand dtype."""
    if dtype == "tf32":
        return "mma_k_tf32"
    size = dtype_bytes(dtype)
    return {2: "mma_k_16bit", 1: "mma_k_8bit"}.get(size)


def _nearest(value, multiple):
    """The legal extents closest to `value`: one below (if positive) and one above."""
    below = value // multiple * multiple
    above = below + multiple
    return [v for v in (below, above) if v > 0]


def _accumulators(a_dtype, b_dtype):
    if a_dtype in _INTEGER and b_dtype in _INTEGER:
        return ("i32",)
    if a_dtype == b_dtype == "f16":
        return ("f32", "f16")
    return ("f32",)


def _dtype_findings(ctx, call, decls, allowed):
    for arg in ("a", "b"):
        decl = decls[arg]
        if decl.dtype not in allowed:
            yield ctx.finding(
                call, f"mma operand `{arg}` (`{decl.name}`) is {decl.dtype}, which "
                f"{ctx.target.name} tensor cores do not multiply",
                condition=f"{arg}.dtype in mma_dtypes ({', '.join(allowed)})",
                hint=f"declare `{decl.name}` with one of {', '.join(allowed)} "
                     "(tf32 for f32 data; convert with `lm.elementwise(..., op=\"cast\")`)",
                resource=decl.name, span=call.arg_spans.get(arg),
                evidence={"dtype": decl.dtype, "mma_dtypes": list(allowed),
                          "source": ctx.target.source("mma_dtypes")},
            )
    acc = decls["acc"]
    legal = _accumulators(decls["a"].dtype, decls["b"].dtype)
    if acc.dtype not in legal:
        yield ctx.finding(
            call, f"mma accumulator `{acc.name}` is {acc.dtype}, but {decls['a'].dtype} x "
            f"{decls['b'].dtype} products accumulate in {' or '.join(legal)}",
            condition=f"acc.dtype in ({', '.join(legal)})",
            hint=f"declare `{acc.name} = lm.fragment(\"{legal[0]}\", {acc.shape}, ...)`",
            resource=acc.name, span=call.arg_spans.get("acc"),
            evidence={"acc": acc.dtype, "a": decls["a"].dtype, "b": decls["b"].dtype},
        )


def _shape_findings(ctx, call, decls, transpose_b):
    acc, a, b = decls["acc"], decls["a"], decls["b"]
    for arg, decl in (("acc", acc), ("a", a), ("b", b)):
        if len(decl.shape) != 2:
            yield ctx.finding(
                call, f"mma operand `{arg}` (`{decl.name}`) has shape {decl.shape}; mma "
                "tiles are 2-D", condition=f"len({arg}.shape) == 2",
                hint=f"declare `{decl.name}` as a 2-D tile", resource=decl.name,
                span=call.arg_spans.get(arg), evidence={"shape": list(decl.shape)},
            )
            return
    m, n = acc.shape
    k = a.shape[1]
    b_layout = "(N, K)" if transpose_b else "(K, N)"
    b_expected = (n, k) if transpose_b else (k, n)
    problems = []
    if a.shape[0] != m:
        problems.append(("a", f"`a` (`{a.name}`) has {a.shape[0]} rows but `acc` "
                         f"(`{acc.name}`) has M = {m}"))
    if tuple(b.shape) != b_expected:
        problems.append(("b", f"`b` (`{b.name}`) is {b.shape} but must be {b_layout} = "
                         f"{b_expected}" + ("" if transpose_b else
                                            "; pass `transpose_b=True` if it is stored (N, K)")))
    for arg, text in problems:
        yield ctx.finding(
            call, f"mma shapes disagree: {text}",
            condition=f"acc (M, N), a (M, K), b {b_layout}",
            hint=f"make `acc` (M, N) = {acc.shape}, `a` (M, K) = ({m}, {k}) and `b` "
                 f"{b_layout} = {b_expected}",
            resource=decls[arg].name, span=call.arg_spans.get(arg),
            evidence={"acc": list(acc.shape), "a": list(a.shape), "b": list(b.shape),
                      "transpose_b": transpose_b},
        )
    if problems:
        return
    k_key = _k_key(a.dtype)
    checks = [("M", m, "mma_m", acc.name), ("N", n, "mma_n", acc.name)]
    if k_key is not None and k_key in ctx.target.limits:
        checks.append(("K", k, k_key, a.name))
    legal = {"M": m, "N": n, "K": k}
    bad = []
    for dim, extent, key, _ in checks:
        multiple = ctx.target[key]
        if extent % multiple:
            legal[dim] = _nearest(extent, multiple)[0]
            bad.append((dim, extent, key, multiple))
    if not bad:
        return
    parts = "; ".join(f"{dim} = {extent} is not a multiple of {key} = {mult}"
                      for dim, extent, key, mult in bad)
    options = "; ".join(f"{dim} = " + " or ".join(str(v) for v in _nearest(extent, mult))
                        for dim, extent, _, mult in bad)
    tile = f"(M, N, K) = ({legal['M']}, {legal['N']}, {legal['K']})"
    dim = bad[0][0]
    yield ctx.finding(
        call, f"mma tile (M, N, K) = ({m}, {n}, {k}) is not a whole number of "
        f"{ctx.target.name} instructions: {parts}",
        condition=" and ".join(f"{d} % {key} == 0" for d, _, key, _ in bad),
        hint=f"use {options} (nearest legal tile {tile}), and resize the buffers and "
             "fragment that hold it",
        resource=acc.name if dim in ("M", "N") else a.name,
        evidence={"tile": [m, n, k], "bad": {d: {"extent": e, "limit": key, "multiple": mu,
                                                 "source": ctx.target.source(key)}
                                             for d, e, key, mu in bad}},
    )


def check(ctx):
    if ctx.target is None:
        return
    allowed = tuple(s.strip() for s in str(ctx.target.get("mma_dtypes", "")).split(",")
                    if s.strip())
    for site in ctx.calls():
        if site.call.primitive not in ("mma", "mma_async"):
            continue
        call = site.call
        decls = {}
        for arg in ("acc", "a", "b"):
            value = call.args.get(arg)
            decl = ctx.decl(value.name) if value is not None else None
            if not isinstance(decl, SmemDecl | FragmentDecl):
                break
            decls[arg] = decl
        else:
            found = list(_dtype_findings(ctx, call, decls, allowed))
            yield from found
            transpose_b = _flag(call.args.get("transpose_b"))
            if transpose_b is not None and not any("mma_dtypes" in f.condition
                                                   for f in found):
                yield from _shape_findings(ctx, call, decls, transpose_b)
