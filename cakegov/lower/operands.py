"""Operand views for primitive templates: each argument of a lowered op, spelled as C++.

A primitive's `TEMPLATE` sees `args.<name>` as a small dict (docs/lowering.md, "Template
context"): every view has `kind` and `ref` (the C++ expression to pass); coordinates also
have `row`/`col` (their 2-D view), booleans and integers known at compile time also have
`const`, enums `value`. Nothing is derived here: offsets come from the LoweredKernel's
buffers (`LBuffer.stage_offset`), extents from its params, layouts from its fragments."""

from __future__ import annotations

from typing import Any

from cakegov.ir.expr import Const
from cakegov.ir.nodes import (
    BoolValue,
    CoordValue,
    ExprValue,
    FloatValue,
    FragmentRef,
    SmemRef,
    StrValue,
    TensorRef,
    Value,
)
from cakegov.lower.cexpr import cexpr
from cakegov.lower.fragments import view_2d
from cakegov.lower.kernel import LoweredKernel
from cakegov.lower.spellings import CTYPES
from cakegov.lower.swizzle import mode as swizzle_mode


class EmitError(Exception):
    """The lowered kernel uses a construct the CUDA emitter does not support."""


def ctype(dtype: str) -> str:
    if dtype not in CTYPES:
        raise EmitError(f"dtype {dtype} has no C++ type in the emitter (supported: "
                        f"{', '.join(sorted(CTYPES))})")
    return CTYPES[dtype]


def fragment_var(name: str) -> str:
    return f"f_{name}"


def smem_ref(kernel: LoweredKernel, ref: SmemRef) -> str:
    buf = kernel.buffer(ref.name)
    if buf is None:
        raise EmitError(f"unknown shared-memory buffer `{ref.name}`")
    rows, cols = view_2d(buf.shape)
    t = ctype(buf.dtype)
    offset = cexpr(buf.stage_offset(ref.stage if ref.stage is not None else Const(value=0)))
    bits = swizzle_bits(kernel, ref.name)
    return f"cg::Smem<{t}, {rows}, {cols}, {bits}>{{({t}*)(cg_smem + {offset})}}"


def swizzle_bits(kernel: LoweredKernel, buffer: str) -> int:
    """The `SW` template argument of `cg::Smem` for a buffer: B of `Swizzle<B, 4, 3>` when
    the buffer holds the swizzled layout (`LBuffer.layout`), else 0 (row-major)."""
    buf = kernel.buffer(buffer)
    if buf is None or buf.layout != "swizzled":
        return 0
    return swizzle_mode(buf.swizzle).bits


def tensor_ref(kernel: LoweredKernel, name: str) -> str:
    param = kernel.param(name)
    if param is None or param.kind != "tensor":
        raise EmitError(f"tensor `{name}` is not a kernel parameter")
    t = ctype(param.dtype)
    qual = t if param.output else f"const {t}"
    return (f"cg::Gmem<{qual}>{{{name}, (long long)({cexpr(param.rows)}), "
            f"(long long)({cexpr(param.cols)})}}")


def float_literal(value: float) -> str:
    text = repr(float(value))
    if "e" not in text and "." not in text:
        text += ".0"
    return f"{text}f"


def operand(kernel: LoweredKernel, value: Value, kind: str = "") -> dict[str, Any]:
    """The template view of one argument value; `kind` is the primitive's argument kind
    (a constant `bool` is spelled `true`/`false`)."""
    if isinstance(value, SmemRef):
        return {"kind": "smem", "name": value.name, "ref": smem_ref(kernel, value)}
    if isinstance(value, FragmentRef):
        if kernel.fragment(value.name) is None:
            raise EmitError(f"unknown fragment `{value.name}`")
        ref = fragment_var(value.name)
        if value.tile is not None:  # a window of the fragment (runtime `cg::SubTile`)
            t = value.tile
            ref = (f"cg::sub_tile<{t.rows}, {t.cols}>({ref}, (int)({cexpr(t.row0)}), "
                   f"(int)({cexpr(t.col0)}))")
        return {"kind": "fragment", "name": value.name, "ref": ref}
    if isinstance(value, TensorRef):
        return {"kind": "tensor", "name": value.name, "ref": tensor_ref(kernel, value.name)}
    if isinstance(value, CoordValue):
        items = [cexpr(e) for e in value.items]
        if len(items) not in (1, 2):
            raise EmitError(f"coordinates of rank {len(items)}: the emitter supports 1 and 2")
        row, col = (items[0], "0") if len(items) == 1 else (items[0], items[1])
        return {"kind": "coord", "items": items, "row": row, "col": col,
                "ref": ", ".join(items)}
    if isinstance(value, BoolValue):
        text = "true" if value.value else "false"
        return {"kind": "bool", "ref": text, "const": text}
    if isinstance(value, ExprValue):
        view: dict[str, Any] = {"kind": "expr", "ref": cexpr(value.expr)}
        if isinstance(value.expr, Const):
            view["const"] = str(value.expr.value)
            if kind == "bool":
                view["const"] = view["ref"] = "true" if value.expr.value else "false"
        return view
    if isinstance(value, FloatValue):
        return {"kind": "float", "ref": float_literal(value.value)}
    if isinstance(value, StrValue):
        return {"kind": "str", "value": value.value, "ref": value.value}
    raise EmitError(f"argument of kind {value.kind} cannot be passed to a template")
