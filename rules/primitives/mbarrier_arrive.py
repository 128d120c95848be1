"""Arrive on an mbarrier (`mbarrier.arrive`): decrements its pending arrival count; the
phase completes when pending arrivals and the transaction count both reach zero.

By default one elected lane of each warp of the role arrives (`per="warp"`). The arrive
releases only what the arriving thread did and what was ordered before it (docs/checker.md,
axioms A6 and A12). The lanes of the arriving warp need nothing from the schedule: after
per-thread shared-memory accesses the lowering emits `__syncwarp()` before the elected
arrive (`per="warp"`, or `per="role"` in a one-warp role), and a warp-collective or
warpgroup-collective instruction before it already converged them. Accesses by the
*other* warps of a role that arrives once (`per="role"` over several warps) must be
ordered first: a named barrier over the role, or the wgmma group wait they all passed.

With `cta=R` the arrival goes to the barrier at the same offset in the shared memory of
CTA rank R of the thread-block cluster (`mapa.shared::cluster` then
`mbarrier.arrive.release.cluster.shared::cluster.b64`, PTX ISA "mbarrier.arrive",
"mapa"): a consumer hands a stage back to every producer that multicasts into it. The
arrival writes the peer's shared memory, so the peer must not exit before it has landed
(`lm.sync_cluster()` before the end of every role)."""

from cakegov.plugin import Arg, Effects, barrier_action

NAME = "mbarrier_arrive"
VERSION = "1.2.0"
SPELLING = "mbarrier.arrive"
RECEIVER = "bar"
CATEGORY = "sync"
ARGS = (
    Arg("bar", "mbarrier", "the barrier (`full[s]`)"),
    Arg("per", "enum", "who arrives: one elected lane per warp of the role (`warp`), one "
        "thread for the whole role (`role`), or every thread (`thread`)", required=False,
        default="warp", choices=("warp", "role", "thread")),
    Arg("cta", "index", "the cluster rank (`%cluster_ctarank`) of the CTA whose barrier at "
        "the same shared offset receives the arrival (a remote arrive through `mapa`); "
        "omitted: this CTA's own barrier", required=False),
)


def effects(call, view):
    return Effects(barriers=(barrier_action("arrive", call.args["bar"]),))
