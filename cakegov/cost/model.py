"""Pricing a profile: predicted time, its breakdown per role and segment, the bottleneck,
the speed-of-light bound and what would help.

Per CTA: straight-line code is priced step by step (a wait on a barrier that bulk copies
complete pays the global latency and the transfer); each top-level loop is a pipeline whose
steady-state iteration is bound by the slowest of: global bandwidth, each tensor or FMA
unit, shared-memory bandwidth (bank conflicts of the lowered layout included), the slowest
role's own issue, and the ring's round trip divided by its depth. A fill (first stage lands)
and a drain (the last iteration) bracket it. Occupancy (CTAs per SM from shared memory,
registers and threads) divides each SM's throughput between resident CTAs; waves quantise
the grid over the SMs. Nothing here can reject a schedule."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from cakegov.cost.params import CostParams, Device
from cakegov.cost.profile import CostError, Profile, Segment, Work

UNIT_LABEL = {"wgmma": "tensor cores (wgmma)", "mma_sync": "tensor cores (mma.sync)",
              "fma": "FP32 pipes"}


@dataclass(frozen=True)
class Overrides:
    """Counterfactuals: what the model would predict with a deeper ring, more resident
    CTAs, a conflict-free layout or perfectly filled waves."""

    extra_stages: int = 0
    occupancy: int | None = None
    conflict_free: bool = False
    full_waves: bool = False


@dataclass
class Part:
    role: str
    segment: str
    kind: str
    path: str
    line: int
    time_ns: float
    bound: str
    detail: dict[str, float] = field(default_factory=dict)


@dataclass
class Estimate:
    time_ns: float
    sol_ns: float
    sol_bytes_ns: float
    sol_flops_ns: float
    cta_ns: float
    parts: list[Part]
    bottleneck: dict[str, Any]
    occupancy: dict[str, Any]
    waves: dict[str, Any]

    @property
    def fraction_of_sol(self) -> float:
        return self.sol_ns / self.time_ns if self.time_ns > 0 else 0.0


@dataclass(frozen=True)
class _Rates:
    """Throughputs seen by one CTA (bytes or flops per ns)."""

    bw: float
    smem: float
    unit_sm: dict[str, float]
    c: int
    lat: float
    p: CostParams

    def role_rate(self, unit: str, warps: int) -> float:
        return self.unit_sm[unit] * min(1.0, min(warps, 4) / 4, 1.0 / self.c)

    def cta_rate(self, unit: str) -> float:
        return self.unit_sm[unit] / self.c


def _rates(p: CostParams, dev: Device, c: int, active: int) -> _Rates:
    clock = dev["clock_hz"] / 1e9
    sm_bw = min(dev["hbm_bandwidth"] * p["hbm_efficiency"] / 1e9 / max(active, 1),
                p["sm_gmem_bytes_per_clk"] * clock)
    per_sm = {"wgmma": dev["tensor_peak"] * p["wgmma_efficiency"],
              "mma_sync": dev["tensor_peak"] * p["mma_sync_efficiency"],
              "fma": dev["fma_peak"] * p["fma_efficiency"]}
    unit_sm = {u: r / dev["sms"] / 1e9 for u, r in per_sm.items()}
    return _Rates(bw=sm_bw / c, smem=p["smem_bytes_per_clk"] * clock / c, unit_sm=unit_sm,
                  c=c, lat=p["gmem_latency_ns"], p=p)


def _units(w: Work, p: CostParams) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, f in w.flops.items():
        unit = p.unit_of(key[1:]) if key.startswith("@") else key
        out[unit] = out.get(unit, 0.0) + f
    return out


def _role_time(w: Work, warps: int, r: _Rates, smem_scale: float) -> tuple[float, dict]:
    """One role's own time for `w`: compute overlapped with its shared-memory operand
    traffic, then synchronous global traffic, synchronisation and issue."""
    parts = {f"compute:{u}": f / r.role_rate(u, warps) for u, f in _units(w, r.p).items()}
    parts["smem"] = w.smem_bytes * smem_scale / r.smem
    parts["gmem sync"] = w.gmem_bytes / r.bw + w.gmem_reads * r.lat
    parts["sync"] = w.mbarrier * r.p["mbarrier_ns"] + w.named * r.p["named_barrier_ns"]
    parts["issue"] = w.ops * r.p["issue_ns"]
    overlap = max([parts["smem"]] + [v for k, v in parts.items() if k.startswith("compute")])
    return overlap + parts["gmem sync"] + parts["sync"] + parts["issue"], parts


def _straight(seg: Segment, prof: Profile, r: _Rates, smem_scale: float) -> tuple[float, str,
                                                                                   dict]:
    t, waited, by = 0.0, set(), {"latency": 0.0, "transfer": 0.0, "work": 0.0}
    warps = prof.role_warps[seg.role]
    for step in seg.steps:
        if step.wait and step.wait in prof.copies_to and step.wait not in waited:
            waited.add(step.wait)
            by["latency"] += r.lat
            by["transfer"] += prof.copies_to[step.wait] / r.bw
        own, _ = _role_time(step.work, warps, r, smem_scale)
        by["work"] += own
    t = sum(by.values())
    bound = max(by, key=lambda k: by[k]) if t else "work"
    label = {"latency": "global-memory latency", "transfer": "global memory bandwidth",
             "work": f"role {seg.role} work"}[bound]
    return t, label, by


def _cta(prof: Profile, p: CostParams, dev: Device, c: int, active: int, ov: Overrides
         ) -> tuple[float, list[Part], dict[str, Any]]:
    r = _rates(p, dev, c, active)
    parts: list[Part] = []
    smem_scale = 1.0
    pro = [s for s in prof.segments if s.kind == "prologue"]
    epi = [s for s in prof.segments if s.kind == "epilogue"]
    loops = [s for s in prof.segments if s.kind == "loop"]
    total = p["cta_ns"]
    parts.append(Part("", "CTA", "overhead", "", 0, p["cta_ns"], "CTA launch and teardown"))
    for group in (pro, epi):
        best = 0.0
        for seg in group:
            t, label, by = _straight(seg, prof, r, smem_scale)
            if ov.conflict_free:
                t = _straight(_no_conflict(seg, prof), prof, r, smem_scale)[0]
            parts.append(Part(seg.role, seg.name, seg.kind, seg.path, seg.line, t, label, by))
            best = max(best, t)
        total += best
    loop_info: dict[str, Any] = {}
    if loops:
        trips = max(s.trips for s in loops)
        if trips > 0:
            lt, loop_info = _pipeline(loops, trips, prof, r, ov)
            total += lt
            for seg, (t_seg, by) in loop_info["roles"].items():
                parts.append(Part(seg.role, seg.name, "loop", seg.path, seg.line,
                                  t_seg * trips, loop_info["bound"] if seg is
                                  loop_info["binding"] else "overlapped", by))
    return total, parts, loop_info


def _no_conflict(seg: Segment, prof: Profile) -> Segment:
    return seg  # straight-line shared traffic carries no mma operand reads in the corpus


def _pipeline(loops: list[Segment], trips: int, prof: Profile, r: _Rates, ov: Overrides
              ) -> tuple[float, dict[str, Any]]:
    norm = {s: s.body.scaled(s.trips / trips) for s in loops}
    agg = Work()
    for w in norm.values():
        agg.add(w)
    conflict = max(prof.conflict.values(), default=1.0)
    smem_scale = 1.0 / conflict if ov.conflict_free and conflict > 1 else 1.0
    roles: dict[Segment, tuple[float, dict]] = {}
    for s, w in norm.items():
        roles[s] = _role_time(w, prof.role_warps[s.role], r, smem_scale)
    t_roles = max(t for t, _ in roles.values())
    binding_role = max(roles, key=lambda s: roles[s][0])
    comps: dict[str, float] = {
        "global memory bandwidth": (agg.async_bytes + agg.gmem_bytes) / r.bw,
        "shared-memory bandwidth": agg.smem_bytes * smem_scale / r.smem,
    }
    for unit, f in _units(agg, r.p).items():
        comps[UNIT_LABEL[unit]] = f / r.cta_rate(unit)
    depth = max(s.depth for s in loops) + ov.extra_stages
    has_async = agg.async_bytes > 0
    t_mem = comps["global memory bandwidth"]
    if has_async:
        round_trip = r.lat + t_mem + t_roles + 2 * r.p["mbarrier_ns"]
        comps[f"pipeline latency (ring depth {depth})"] = round_trip / depth
    own = roles[binding_role][1]
    top = max(own, key=lambda k: own[k])
    what = {"smem": "shared-memory operand reads" + (f" ({conflict:g}-way bank conflicts)"
                                                     if conflict > 1 and smem_scale == 1
                                                     else ""),
            "gmem sync": "synchronous global accesses", "sync": "synchronisation",
            "issue": "instruction issue"}.get(top, UNIT_LABEL.get(top.split(":")[-1], top))
    comps[f"role {binding_role.role}: {what}"] = t_roles
    bound = max(comps, key=lambda k: comps[k])
    t_iter = comps[bound]
    fill = (r.lat + t_mem) if has_async else 0.0
    drain = max(t_roles, t_mem)
    t = fill + (trips - 1) * t_iter + drain
    if bound.startswith("role"):
        binding = binding_role
    elif bound == "global memory bandwidth":
        binding = max(norm, key=lambda s: norm[s].async_bytes + norm[s].gmem_bytes)
    else:
        binding = max(norm, key=lambda s: sum(norm[s].flops.values()) + norm[s].smem_bytes)
    return t, {"trips": trips, "t_iter_ns": t_iter, "fill_ns": fill, "drain_ns": drain,
               "depth": depth, "components": comps, "bound": bound, "binding": binding,
               "roles": roles, "conflict": conflict}


def occupancy(prof: Profile, p: CostParams, extra_smem: int = 0) -> tuple[int, str]:
    """Resident CTAs per SM and what limits them."""
    d = prof.details
    smem = prof.smem_bytes + extra_smem + p["smem_reserved_bytes"]
    limits = {
        "shared memory": d["smem_per_sm"] // smem if d.get("smem_per_sm") else 10**9,
        "registers": (d["registers_per_sm"] // (prof.launch_regs * prof.threads)
                      if d.get("registers_per_sm") and prof.launch_regs else 10**9),
        "threads": int(p["max_threads_per_sm"]) // max(prof.threads, 1),
        "CTA slots": int(p["max_ctas_per_sm"]),
    }
    by = min(limits, key=lambda k: limits[k])
    return int(limits[by]), by


def predict(prof: Profile, p: CostParams, device: Device | None = None,
            ov: Overrides = Overrides()) -> Estimate:
    """Predicted time of one launch (ns) with its breakdown and bottleneck."""
    dev = device or p.device()
    extra = ov.extra_stages * prof.ring_stage_bytes
    if extra and prof.details.get("smem_per_cta") and \
            prof.smem_bytes + extra > prof.details["smem_per_cta"]:
        raise CostError("the deeper ring does not fit in shared memory")
    c, limited = occupancy(prof, p, extra)
    if ov.occupancy is not None:
        c, limited = ov.occupancy, "assumed"
    if c < 1:
        raise CostError(f"one CTA does not fit on an SM ({limited})")
    sms = int(dev["sms"])
    slots = sms * c
    full, tail = divmod(prof.ctas, slots)
    if ov.full_waves:
        full, tail = prof.ctas / slots, 0
    t_full, parts, loop = _cta(prof, p, dev, c, sms, ov)
    total = p["launch_ns"] + full * t_full
    t_tail = 0.0
    if tail:
        c_tail = math.ceil(tail / sms)
        t_tail, tparts, tloop = _cta(prof, p, dev, c_tail, min(sms, tail), ov)
        total += t_tail
        if not full:
            parts, loop = tparts, tloop
    waves = math.ceil(prof.ctas / slots)
    sol_bytes = prof.compulsory_bytes / (dev["hbm_bandwidth"] / 1e9)
    peaks = {"wgmma": dev["tensor_peak"], "mma_sync": dev["tensor_peak"],
             "fma": dev["fma_peak"]}
    sol_flops = sum(f * prof.ctas / (peaks[u] / 1e9) for u, f in _units(prof.total, p).items())
    cta = t_full if full else t_tail
    bottleneck = _bottleneck(prof, p, cta, parts, loop, total, waves, full, t_full, t_tail)
    return Estimate(
        time_ns=total, sol_ns=max(sol_bytes, sol_flops), sol_bytes_ns=sol_bytes,
        sol_flops_ns=sol_flops, cta_ns=cta, parts=parts, bottleneck=bottleneck,
        occupancy={"ctas_per_sm": c, "limited_by": limited},
        waves={"ctas": prof.ctas, "slots": slots, "waves": waves,
               "efficiency": prof.ctas / (waves * slots)})


def _bottleneck(prof: Profile, p: CostParams, cta: float, parts: list[Part],
                loop: dict[str, Any], total: float, waves: int, full: float,
                t_full: float, t_tail: float) -> dict[str, Any]:
    if p["launch_ns"] >= total / 2:
        return {"resource": "kernel launch overhead", "role": None, "stage": None,
                "share": p["launch_ns"] / total}
    loop_t = 0.0
    if loop:
        loop_t = loop["fill_ns"] + (loop["trips"] - 1) * loop["t_iter_ns"] + loop["drain_ns"]
    straight = [x for x in parts if x.kind in ("prologue", "epilogue", "overhead")]
    top = max(straight, key=lambda x: x.time_ns, default=None)
    if loop and loop_t >= (top.time_ns if top else 0):
        seg = loop["binding"]
        return {"resource": loop["bound"], "role": seg.role, "stage": seg.name,
                "path": seg.path, "line": seg.line, "share": loop_t / cta if cta else 0.0}
    assert top is not None
    return {"resource": top.bound, "role": top.role or None, "stage": top.segment,
            "path": top.path, "line": top.line, "share": top.time_ns / cta if cta else 0.0}


def suggestions(prof: Profile, p: CostParams, dev: Device, est: Estimate) -> list[dict]:
    """What would help, each with the time the model predicts for it, best first."""
    out: list[dict] = []

    def trial(ov: Overrides) -> float | None:
        try:
            return predict(prof, p, dev, ov).time_ns
        except CostError:
            return None

    if prof.ring_stages and prof.ring_stage_bytes:
        best: tuple[int, float] | None = None
        for k in range(1, 9):
            t = trial(Overrides(extra_stages=k))
            if t is None:
                break
            if t < est.time_ns * 0.995 and (best is None or t < best[1] * 0.995):
                best = (k, t)
        if best:
            out.append({"kind": "more stages", "time_ns": best[1],
                        "what": f"more stages: {prof.ring_stages} -> "
                                f"{prof.ring_stages + best[0]} "
                                f"(+{best[0] * prof.ring_stage_bytes} B shared memory)"})
    c, limited = est.occupancy["ctas_per_sm"], est.occupancy["limited_by"]
    if limited == "registers" and prof.threads:
        regs = prof.details["registers_per_sm"] // ((c + 1) * prof.threads) // 8 * 8
        t = trial(Overrides(occupancy=c + 1)) if regs >= 24 else None
        c_smem, _ = occupancy(replace(prof, launch_regs=max(regs, 1)), p)
        need = prof.details.get("min_regs", 0)
        if t is not None and c_smem >= c + 1 and regs >= need and t < est.time_ns * 0.995:
            out.append({"kind": "fewer registers", "time_ns": t,
                        "what": f"fewer registers: {prof.launch_regs} -> {regs} per thread "
                                f"fits {c + 1} CTAs per SM"})
    if limited == "shared memory" and prof.ring_stages > 1 and prof.ring_stage_bytes:
        t = trial(Overrides(extra_stages=-1, occupancy=c + 1))
        if t is not None and occupancy(prof, p, -prof.ring_stage_bytes)[0] >= c + 1 \
                and t < est.time_ns * 0.995:
            out.append({"kind": "fewer stages, more CTAs", "time_ns": t,
                        "what": f"fewer stages: {prof.ring_stages} -> {prof.ring_stages - 1} "
                                f"fits {c + 1} CTAs per SM"})
    if est.waves["efficiency"] < 0.9 and est.waves["ctas"] > 0:
        t = trial(Overrides(full_waves=True))
        if t is not None and t < est.time_ns * 0.995:
            w = est.waves
            out.append({"kind": "different split", "time_ns": t,
                        "what": f"a different tile split: {w['ctas']} CTAs fill "
                                f"{w['waves']} wave(s) of {w['slots']} slots at "
                                f"{w['efficiency']:.0%}"})
    if max(prof.conflict.values(), default=1.0) > 1 and "shared" in est.bottleneck["resource"]:
        t = trial(Overrides(conflict_free=True))
        if t is not None and t < est.time_ns * 0.995:
            out.append({"kind": "swizzled layout", "time_ns": t,
                        "what": f"a swizzled operand layout (tensor-map copies) removes the "
                                f"{max(prof.conflict.values()):g}-way bank conflicts of the "
                                "mma operand reads"})
    return sorted(out, key=lambda s: (s["time_ns"], s["kind"]))
