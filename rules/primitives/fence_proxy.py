"""Proxy fence (`fence.proxy.async.shared::cta`): orders this thread's generic-proxy writes
to shared memory before later async-proxy accesses (bulk stores, tensor-core operands
read by wgmma). Needed between generic writes and an async-proxy reader."""

from cakegov.plugin import Arg, BarrierAction, Effects

NAME = "fence_proxy"
VERSION = "1.0.0"
SPELLING = "lm.fence_proxy"
CATEGORY = "sync"
ARGS = (Arg("kind", "enum", "the proxy to order against", required=False, default="async",
            choices=("async",)),)


def effects(call, view):
    return Effects(barriers=(BarrierAction(op="fence"),))
