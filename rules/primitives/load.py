"""Bulk copy of one tile from a global tensor into a shared-memory stage.

Lowers to `cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes`, one copy per
tile row (rows are multiples of 16 bytes). The copy runs in the async proxy and completes
at any later moment by subtracting its bytes from the transaction count of `barrier`.
Rows or columns outside the tensor are zero-filled when `pad=True` (the tail strategy);
without it the tile must lie inside the tensor."""

from cakegov.plugin import Arg, Effects, access, barrier_action

NAME = "load"
VERSION = "1.0.0"
SPELLING = "smem.load"
RECEIVER = "dst"
CATEGORY = "memory"
ARGS = (
    Arg("dst", "smem", "shared-memory stage receiving the tile (`a_s[stage]`)"),
    Arg("src", "tensor", "global tensor to read"),
    Arg("at", "coord", "element coordinates of the tile origin in `src`"),
    Arg("barrier", "mbarrier", "mbarrier whose transaction count the copy completes"),
    Arg("pad", "bool", "zero-fill the part of the tile outside `src` (tail strategy)",
        required=False, default=False),
)


def effects(call, view):
    dst = access(call.args["dst"], view, proxy="async")
    src = access(call.args["src"], view, proxy="async").model_copy(update={"bytes": dst.bytes})
    return Effects(
        reads=(src,),
        writes=(dst,),
        barriers=(barrier_action("complete_tx", call.args["barrier"], bytes=dst.bytes),),
        global_bytes=dst.bytes,
        asynchronous=True,
    )
