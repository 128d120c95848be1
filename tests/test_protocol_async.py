"""Asynchronous accesses and barrier initialisation: the explorer's async-group lanes,
proxy fences, first-write tracking and init states, their lowering, and the rules built
on them: P010 early-release, P012 init-order, P013 proxy-fence, P014 store-drain and
P018 uninitialized-smem-read.

Schedules are written out here (not read from corpus/) so that a corpus edit never
silently changes what these tests exercise."""

from __future__ import annotations

import pytest

from cakegov.analysis.explore import Explorer, _groups
from cakegov.analysis.unroll import unroll
from cakegov.check.context import CheckContext
from cakegov.ir.errors import InputError
from cakegov.ir.parse import parse_source
from cakegov.lower.kernel import LCompute, LFence, LFor, LGroupWait, LInit, LNamedSync

WGMMA = '''"""wgmma pipeline."""
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def g(lm, A, B, C):
    BM, BN, BK, S = 64, 128, 64, 2
    lm.launch(grid=(lm.cdiv(lm.M, BM), lm.cdiv(lm.N, BN)), warps=8)
    a_s = lm.smem("bf16", (BM, BK), stages=S, swizzle="128B")
    b_s = lm.smem("bf16", (BN, BK), stages=S, swizzle="128B")
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 8), regs=232)
    acc = lm.fragment("f32", (BM, BN), role=math)
    ring = lm.pipeline(stages=S, buffers=[a_s, b_s], producer=loader, consumer=math)
    m0, n0 = lm.block(0) * BM, lm.block(1) * BN
    with loader:
        for k in lm.range(0, lm.cdiv(lm.K, BK)):
            ring.acquire(k)
            a_s[ring.stage(k)].load(A, at=(m0, k * BK), barrier=ring.full(k), pad=True)
            b_s[ring.stage(k)].load(B, at=(n0, k * BK), barrier=ring.full(k), pad=True)
    with math:
        for k in lm.range(0, lm.cdiv(lm.K, BK)):
            ring.wait(k)
            lm.mma_async(acc, a_s[ring.stage(k)], b_s[ring.stage(k)], transpose_b=True)
            lm.mma_wait(pending=0)
            ring.release(k)
        lm.store(C, at=(m0, n0), src=acc, mask=True)
'''

SCALE_STORE = '''"""bulk-store epilogue."""
@cake.schedule(target="sm_90a", workload="scale", divisible={"M": 32, "N": 256})
def s(lm, X, Y):
    TM, TN = 32, 256
    lm.launch(grid=(lm.cdiv(lm.M, TM), lm.cdiv(lm.N, TN)), warps=4)
    x_s = lm.smem("f32", (TM, TN))
    y_s = lm.smem("f32", (TM, TN))
    full = lm.mbarrier(count=1)
    worker = lm.role(warps=range(0, 4))
    m0, n0 = lm.block(0) * TM, lm.block(1) * TN
    with worker:
        full[0].arrive_expect_tx(bytes=lm.nbytes(x_s))
        x_s[0].load(X, at=(m0, n0), barrier=full[0])
        full[0].wait(parity=0)
        lm.elementwise(y_s[0], x_s[0], op="scale", alpha=2.5)
        lm.fence_proxy()
        y_s[0].store_async(Y, at=(m0, n0))
        lm.store_wait(pending=0)
'''

# Two roles: `math` writes the tile with generic stores and hands it to `storer`.
HANDOFF = '''"""cross-role bulk store."""
@cake.schedule(target="sm_90a", workload="scale", divisible={"M": 32, "N": 256})
def h(lm, X, Y):
    TM, TN = 32, 256
    lm.launch(grid=(lm.cdiv(lm.M, TM), lm.cdiv(lm.N, TN)), warps=8)
    x_s = lm.smem("f32", (TM, TN))
    y_s = lm.smem("f32", (TM, TN))
    full = lm.mbarrier(count=1)
    ready = lm.mbarrier(count=4)
    math = lm.role(warps=range(0, 4))
    storer = lm.role(warps=range(4, 8))
    m0, n0 = lm.block(0) * TM, lm.block(1) * TN
    with math:
        full[0].arrive_expect_tx(bytes=lm.nbytes(x_s))
        x_s[0].load(X, at=(m0, n0), barrier=full[0])
        full[0].wait(parity=0)
        lm.elementwise(y_s[0], x_s[0], op="scale", alpha=2.5)
        lm.fence_proxy()
        lm.syncwarp()
        ready[0].arrive()
    with storer:
        ready[0].wait(parity=0)
        y_s[0].store_async(Y, at=(m0, n0))
        lm.store_wait(pending=0)
'''

# Tiles stream through a 2-stage ring and are bulk-stored straight from the stage.
RING_STORE = '''"""bulk store from a ring stage."""
@cake.schedule(target="sm_90a", workload="scale", divisible={"M": 128, "N": 256})
def r(lm, X, Y):
    TM, TN, T = 32, 256, 4
    lm.launch(grid=(lm.cdiv(lm.M, TM * T), lm.cdiv(lm.N, TN)), warps=8)
    x_s = lm.smem("f32", (TM, TN), stages=2)
    loader = lm.role(warps=range(0, 4))
    worker = lm.role(warps=range(4, 8))
    ring = lm.pipeline(stages=2, buffers=[x_s], producer=loader, consumer=worker)
    m0, n0 = lm.block(0) * TM * T, lm.block(1) * TN
    with loader:
        for t in lm.range(0, T):
            ring.acquire(t)
            x_s[ring.stage(t)].load(X, at=(m0 + t * TM, n0), barrier=ring.full(t))
    with worker:
        for t in lm.range(0, T):
            ring.wait(t)
            x_s[ring.stage(t)].store_async(Y, at=(m0 + t * TM, n0))
            lm.store_wait(pending=0)
            ring.release(t)
'''

MANUAL = '''"""manual barrier initialisation."""
@cake.schedule(target="sm_90a", workload="gemm", divisible={"K": 64})
def m(lm, A, B, C):
    BM, BN, BK, S = 64, 128, 64, 2
    lm.launch(grid=(lm.cdiv(lm.M, BM), lm.cdiv(lm.N, BN)), warps=8)
    a_s = lm.smem("bf16", (BM, BK), stages=S, swizzle="128B")
    b_s = lm.smem("bf16", (BN, BK), stages=S, swizzle="128B")
    full = lm.mbarrier(count=1, stages=S, init="manual")
    empty = lm.mbarrier(count=4, stages=S, init="manual")
    loader = lm.role(warps=range(0, 4), regs=40)
    math = lm.role(warps=range(4, 8), regs=232)
    acc = lm.fragment("f32", (BM, BN), role=math)
    m0, n0 = lm.block(0) * BM, lm.block(1) * BN
    with loader:
        for s in lm.range(0, S):
            full[s].init()
            empty[s].init()
        lm.fence_barrier_init()
        lm.sync_cta()
        for k in lm.range(0, lm.cdiv(lm.K, BK)):
            empty[k % S].wait(parity=(k // S + 1) % 2)
            full[k % S].arrive_expect_tx(bytes=lm.nbytes(a_s, b_s))
            a_s[k % S].load(A, at=(m0, k * BK), barrier=full[k % S], pad=True)
            b_s[k % S].load(B, at=(n0, k * BK), barrier=full[k % S], pad=True)
    with math:
        lm.sync_cta()
        for k in lm.range(0, lm.cdiv(lm.K, BK)):
            full[k % S].wait(parity=(k // S) % 2)
            lm.mma(acc, a_s[k % S], b_s[k % S], transpose_b=True, init=(k == 0))
            empty[k % S].arrive()
        lm.store(C, at=(m0, n0), src=acc, mask=True)
'''


def edit(text, *edits):
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


def line_of(text, needle, nth=None):
    """The line holding `needle` (the only one, or the nth of several)."""
    lines = [i for i, ln in enumerate(text.splitlines(), 1) if needle in ln]
    assert len(lines) == 1 or nth is not None, needle
    return lines[nth or 0]


def context(checker, text) -> CheckContext:
    schedule = parse_source(text, checker.vocabulary)
    return CheckContext(schedule, "t.cake", checker.rulebook.targets.get(schedule.target),
                        checker.workloads.get(schedule.workload), checker.rulebook.primitives)


def anomalies(checker, text, kind=None):
    result = context(checker, text).protocol
    assert result is not None and not result.incomplete, result and result.incomplete
    return [a for a in result.anomalies if kind is None or a.kind == kind]


def blocking(checker, text):
    result = checker.check_bytes(text.encode(), "t.cake")
    return [f for f in result.findings if f.severity == "blocking"]


def only(checker, text, code):
    """The findings of `code`, asserting no other blocking finding."""
    found = blocking(checker, text)
    assert {f.code for f in found} == {code}, [(f.code, f.message) for f in found]
    return found


# ---- front end and lowering -------------------------------------------------------------


def test_mbarrier_init_mode_is_parsed_and_lowered(checker):
    ctx = context(checker, MANUAL)
    full = ctx.schedule.resource("full")
    assert full.init == "manual"
    assert context(checker, SCALE_STORE).schedule.resource("full").init == "auto"
    kernel = ctx.lowered
    assert kernel.barrier("full").init == "manual" and kernel.barrier("empty").init == "manual"
    loader = kernel.roles[0].body
    assert isinstance(loader[0], LFor)
    inits = [op for op in loader[0].body if isinstance(op, LInit)]
    assert [(op.barrier, op.count) for op in inits] == [("full", 1), ("empty", 4)]
    assert isinstance(loader[1], LFence) and loader[1].scope == "mbarrier_init"
    sync = loader[2]
    assert isinstance(sync, LNamedSync) and (sync.id, sync.threads, sync.wait) == (0, 256, True)


def test_bad_init_mode_is_an_input_error(checker):
    with pytest.raises(InputError, match='"auto" or "manual"'):
        parse_source(MANUAL.replace('init="manual")\n    empty', 'init="lazy")\n    empty'),
                     checker.vocabulary)


def test_async_ops_lower_to_groups(checker):
    kernel = context(checker, WGMMA).lowered
    body = kernel.roles[1].body[0].body
    mma = next(op for op in body if isinstance(op, LCompute))
    assert mma.primitive == "mma_async" and mma.group == "wgmma"
    assert {(a.name, a.proxy) for a in mma.reads if a.space == "smem"} == {
        ("a_s", "async"), ("b_s", "async")}
    wait = next(op for op in body if isinstance(op, LGroupWait))
    assert (wait.group, wait.pending, wait.source) == ("wgmma", 0, "mma_wait")
    store = context(checker, SCALE_STORE).lowered.roles[0].body
    bulk = next(op for op in store if isinstance(op, LCompute) and op.group)
    assert bulk.primitive == "store_async" and bulk.group == "bulk"
    assert [(op.group, op.pending) for op in store if isinstance(op, LGroupWait)] == [
        ("bulk", 0)]


# ---- explorer: async-group lanes ---------------------------------------------------------


def test_group_waits_retire_all_but_the_pending_most_recent(checker):
    text = edit(WGMMA, ("lm.mma_wait(pending=0)", "lm.mma_wait(pending=1)"))
    ctx = context(checker, text)
    run = unroll(ctx.lowered, {"M": 64, "N": 128, "K": 192})
    ordinal, retire, issued = _groups(run.roles["math"])
    assert sorted(ordinal.values()) == [1, 2, 3] and issued == {"wgmma": 3}
    assert sorted(retire.values()) == [0, 1, 2]  # k=0: none, k=1: group 1, k=2: group 2


def test_valid_async_schedules_explore_clean(checker):
    for text in (WGMMA, SCALE_STORE, HANDOFF, RING_STORE, MANUAL):
        assert anomalies(checker, text) == []
        assert blocking(checker, text) == []


def test_release_before_mma_wait_races_on_the_async_lane(checker):
    text = edit(WGMMA, ("            lm.mma_wait(pending=0)\n            ring.release(k)\n",
                        "            ring.release(k)\n            lm.mma_wait(pending=0)\n"))
    [race, *_] = [a for a in anomalies(checker, text, "race") if a.resource == "a_s"]
    writer, reader = race.events
    assert (writer.role, writer.kind, reader.primitive) == ("loader", "copy", "mma_async")
    assert race.details["first_group"] == "wgmma" and race.details["issue_ordered"]
    assert "which no lm.mma_wait had retired" in race.message
    # the witness ends at the overwriting copy, after the early release
    assert race.witness[-1][0] == line_of(text, "a_s[ring.stage(k)].load")
    assert any("arrive" in step and "ring.empty" in step for _, step in race.witness)


def test_accumulator_read_before_mma_wait_races_and_chained_mmas_do_not(checker):
    text = edit(WGMMA, ("            lm.mma_wait(pending=0)\n", ""),
                ("            ring.release(k)\n", "            ring.release(k)\n"
                 "        lm.mma_wait(pending=0)\n"))
    reg = [a for a in anomalies(checker, text, "race") if a.details["space"] == "reg"]
    assert reg == []  # consecutive mma_async on one accumulator are ordered
    text = edit(WGMMA, ("            lm.mma_wait(pending=0)\n", ""))
    found = anomalies(checker, text)
    reg = [a for a in found if a.kind == "race" and a.details["space"] == "reg"]
    assert {(a.resource, a.events[0].primitive) for a in reg} == {("acc", "store")}
    pending = [a for a in found if a.kind == "async-pending"]
    assert pending and all(a.details["group"] == "wgmma" and a.details["retired"] == 0
                           for a in pending)


def test_bulk_store_pending_at_exit_and_reuse_before_wait(checker):
    text = edit(SCALE_STORE, ("        lm.store_wait(pending=0)\n", ""))
    [pending] = anomalies(checker, text, "async-pending")
    assert pending.details == {"group": "bulk", "issued": 1, "retired": 0}
    assert pending.resource == "y_s" and pending.events[0].primitive == "store_async"
    text = edit(SCALE_STORE, ("        lm.store_wait(pending=0)\n",
                              '        lm.fill(y_s[0], value=0.0)\n'
                              "        lm.store_wait(pending=0)\n"))
    [race] = anomalies(checker, text, "race")
    assert race.details["first_group"] == "bulk"
    assert race.events[0].primitive == "fill" and race.events[1].primitive == "store_async"


# ---- explorer: proxy fences ------------------------------------------------------------


def test_proxy_fence_in_the_writer_before_the_handoff(checker):
    same = edit(SCALE_STORE, ("        lm.fence_proxy()\n", ""))
    [proxy] = anomalies(checker, same, "proxy")
    assert proxy.events[1].primitive == "elementwise" and not proxy.details["fenced_late"]
    cross = edit(HANDOFF, ("        lm.fence_proxy()\n", ""))
    [proxy] = anomalies(checker, cross, "proxy")
    assert (proxy.events[0].role, proxy.events[1].role) == ("storer", "math")
    # a fence after the hand-off does not order the writes before the reader
    late = edit(HANDOFF, ("        lm.fence_proxy()\n", ""),
                ("        ready[0].arrive()\n", "        ready[0].arrive()\n"
                 "        lm.fence_proxy()\n"))
    [proxy] = anomalies(checker, late, "proxy")
    assert proxy.details["fenced_late"]


# ---- explorer: reads of unwritten shared memory ------------------------------------------


def test_read_with_no_prior_write(checker):
    text = edit(SCALE_STORE, ('        lm.elementwise(y_s[0], x_s[0], op="scale", alpha=2.5)\n',
                              ""))
    [uninit] = anomalies(checker, text, "uninit")
    assert uninit.resource == "y_s" and uninit.details == {"stage": 0, "never_written": True}
    assert uninit.events[0].primitive == "store_async"


# ---- explorer: barrier initialisation ----------------------------------------------------


@pytest.mark.parametrize(("edits", "status"), [
    ((("            full[s].init()\n", ""),), 0),
    ((("        lm.fence_barrier_init()\n", ""),), 1),
    ((("        lm.fence_barrier_init()\n        lm.sync_cta()\n",
       "        lm.fence_barrier_init()\n"),
      ("        lm.sync_cta()\n        for k", "        for k"),
      ("        lm.store(C", "        lm.sync_cta()\n        lm.store(C"),
      ("            b_s[k % S].load(B, at=(n0, k * BK), barrier=full[k % S], pad=True)\n",
       "            b_s[k % S].load(B, at=(n0, k * BK), barrier=full[k % S], pad=True)\n"
       "        lm.sync_cta()\n")), 2),
])
def test_init_states(checker, edits, status):
    found = anomalies(checker, edit(MANUAL, *edits), "init-order")
    assert found and {a.details["status"] for a in found} == {status}


def test_reinit_and_init_of_a_prologue_barrier(checker):
    text = edit(MANUAL, ("        lm.fence_barrier_init()\n        lm.sync_cta()\n",
                         "        lm.fence_barrier_init()\n        lm.sync_cta()\n"
                         "        full[0].init()\n"))
    assert any(a.details.get("reinit") for a in anomalies(checker, text, "init-order"))
    auto = edit(SCALE_STORE, ("        full[0].arrive_expect_tx", "        full[0].init()\n"
                              "        full[0].arrive_expect_tx"))
    [reinit] = anomalies(checker, auto, "init-order")
    assert reinit.details["reinit"] and reinit.details["state"] == "published"


def test_sync_cta_reached_by_one_role_only_deadlocks(checker):
    text = edit(MANUAL, ("    with math:\n        lm.sync_cta()\n", "    with math:\n"))
    found = anomalies(checker, text)
    assert any(a.kind == "deadlock" and "sync_cta" in a.message for a in found)


# ---- rules ------------------------------------------------------------------------------


def test_p010_points_at_the_early_release(checker):
    text = edit(WGMMA, ("            lm.mma_wait(pending=0)\n            ring.release(k)\n",
                        "            ring.release(k)\n            lm.mma_wait(pending=0)\n"))
    [f] = only(checker, text, "P010")
    assert f.span.line == line_of(text, "ring.release(k)")
    assert (f.resource, f.role, f.stage) == ("a_s", "math", "0")
    assert f"line {line_of(text, 'lm.mma_async')}" in f.message and "`loader`" in f.message
    assert f.hint.startswith(f"move `lm.mma_wait(pending=0)` from line "
                             f"{line_of(text, 'lm.mma_wait')} to before line {f.span.line}")
    assert f.evidence["witness"][-1].endswith("bulk copy into a_s[0] issued")


def test_p010_trailing_release_needs_pending_one(checker):
    trailing = edit(WGMMA, (
        "        for k in lm.range(0, lm.cdiv(lm.K, BK)):\n            ring.wait(k)\n"
        "            lm.mma_async(acc, a_s[ring.stage(k)], b_s[ring.stage(k)], "
        "transpose_b=True)\n            lm.mma_wait(pending=0)\n            ring.release(k)\n",
        "        ring.wait(0)\n"
        "        lm.mma_async(acc, a_s[ring.stage(0)], b_s[ring.stage(0)], transpose_b=True)\n"
        "        for k in lm.range(1, lm.cdiv(lm.K, BK)):\n            ring.wait(k)\n"
        "            lm.mma_async(acc, a_s[ring.stage(k)], b_s[ring.stage(k)], "
        "transpose_b=True)\n            lm.mma_wait(pending=1)\n"
        "            ring.release(k - 1)\n"
        "        lm.mma_wait(pending=0)\n        ring.release(lm.cdiv(lm.K, BK) - 1)\n"))
    assert blocking(checker, trailing) == []
    text = edit(trailing, ("lm.mma_wait(pending=1)", "lm.mma_wait(pending=2)"))
    [f] = only(checker, text, "P010")
    assert f.span.line == line_of(text, "ring.release(k - 1)")
    assert f.hint.startswith(f"lower `lm.mma_wait(pending=2)` at line "
                             f"{line_of(text, 'pending=2')} to `lm.mma_wait(pending=1)`")


def test_p012_findings(checker):
    text = edit(MANUAL, ("        lm.fence_barrier_init()\n", ""))
    [f] = only(checker, text, "P012")
    assert f.span.line == line_of(text, "empty[k % S].wait")
    assert "initialised but not fenced" in f.message
    assert f.hint == (f"insert `lm.fence_barrier_init()` in `loader` after its last `init()` "
                      f"(line {line_of(text, 'empty[s].init()')}, outside any loop) and "
                      f"before its `lm.sync_cta()` at line {line_of(text, 'lm.sync_cta()', 0)}")
    never = edit(MANUAL, ("            full[s].init()\n", ""))
    [f] = only(checker, never, "P012")
    assert "never initialised" in f.message and f.resource == "full"
    reinit = edit(MANUAL, ("        lm.fence_barrier_init()\n        lm.sync_cta()\n",
                           "        lm.fence_barrier_init()\n        lm.sync_cta()\n"
                           "        full[0].init()\n"))
    [f] = only(checker, reinit, "P012")
    assert f.span.line == line_of(reinit, "full[0].init()")
    assert f.hint.startswith("delete this `init()`")


def test_p013_same_role_and_cross_role(checker):
    same = edit(SCALE_STORE, ("        lm.fence_proxy()\n", ""))
    [f] = only(checker, same, "P013")
    write, read = line_of(same, "lm.elementwise"), line_of(same, "store_async")
    assert f.span.line == write and f.resource == "y_s"
    assert f.hint == f"insert `lm.fence_proxy()` in `worker` after line {write} and before " \
        f"line {read}"
    cross = edit(HANDOFF, ("        lm.fence_proxy()\n", ""))
    [f] = only(checker, cross, "P013")
    assert f.span.line == line_of(cross, "lm.elementwise")
    assert f"hands it to `storer` at line {line_of(cross, 'ready[0].arrive()')}" in f.message
    late = edit(HANDOFF, ("        lm.fence_proxy()\n", ""),
                ("        ready[0].arrive()\n", "        ready[0].arrive()\n"
                 "        lm.fence_proxy()\n"))
    [f] = only(checker, late, "P013")
    assert f"the fence at line {line_of(late, 'lm.fence_proxy()')} comes too late" in f.message


def test_p014_exit_reuse_and_release(checker):
    text = edit(SCALE_STORE, ("        lm.store_wait(pending=0)\n", ""))
    [f] = only(checker, text, "P014")
    assert f.span.line == line_of(text, "store_async") and "ends with 1 bulk store" in f.message
    reuse = edit(SCALE_STORE, ("        lm.store_wait(pending=0)\n",
                               "        lm.fill(y_s[0], value=0.0)\n"
                               "        lm.store_wait(pending=0)\n"))
    [f] = only(checker, reuse, "P014")
    assert f.span.line == line_of(reuse, "lm.fill")
    assert f.hint.startswith(f"move `lm.store_wait(pending=0)` from line "
                             f"{line_of(reuse, 'store_wait')} to before line {f.span.line}")
    early = edit(RING_STORE, ("            lm.store_wait(pending=0)\n            ring.release(t)\n",
                              "            ring.release(t)\n"
                              "        lm.store_wait(pending=0)\n"))
    [f] = only(checker, early, "P014")
    assert f.span.line == line_of(early, "ring.release(t)") and f.role == "worker"
    assert "hands it to `loader`" in f.message
    assert f.hint.startswith(f"insert `lm.store_wait(pending=0)` before line {f.span.line}")


def test_p018_unwritten_tile_and_own_later_write(checker):
    text = edit(SCALE_STORE, ('        lm.elementwise(y_s[0], x_s[0], op="scale", alpha=2.5)\n',
                              ""))
    [f] = only(checker, text, "P018")
    assert f.span.line == line_of(text, "store_async")
    assert "no statement of any role writes `y_s`" in f.message
    late = edit(SCALE_STORE, ('        lm.elementwise(y_s[0], x_s[0], op="scale", alpha=2.5)\n'
                              "        lm.fence_proxy()\n"
                              "        y_s[0].store_async(Y, at=(m0, n0))\n"
                              "        lm.store_wait(pending=0)\n",
                              "        y_s[0].store_async(Y, at=(m0, n0))\n"
                              "        lm.store_wait(pending=0)\n"
                              '        lm.elementwise(y_s[0], x_s[0], op="scale", alpha=2.5)\n'))
    [f] = only(checker, late, "P018")
    assert f.span.line == line_of(late, "store_async")
    assert f"from line {line_of(late, 'lm.elementwise')} on, after this read" in f.message


def test_p018_leaves_a_missing_wait_to_p008(checker):
    text = edit(RING_STORE, ("            ring.wait(t)\n", ""))
    codes = {f.code for f in blocking(checker, text)}
    assert "P018" not in codes and "P008" in codes


def test_async_lanes_add_no_states(checker):
    """The valid wgmma schedule explores exactly as many states as the same schedule with a
    synchronous MMA and a local no-op (`lm.syncwarp()`) in place of the group wait: async
    groups are bookkeeping on clocks, not a source of interleavings."""
    ctx_async = context(checker, WGMMA)
    sync = edit(WGMMA, ("lm.mma_async(acc, a_s[ring.stage(k)], b_s[ring.stage(k)], "
                        "transpose_b=True)",
                        "lm.mma(acc, a_s[ring.stage(k)], b_s[ring.stage(k)], transpose_b=True)"),
                ("            lm.mma_wait(pending=0)\n", "            lm.syncwarp()\n"))
    ctx_sync = context(checker, sync)
    sizes = {"M": 64, "N": 128, "K": 384}
    states = [Explorer(c.lowered, unroll(c.lowered, sizes)).run().states
              for c in (ctx_async, ctx_sync)]
    assert states[0] == states[1]
