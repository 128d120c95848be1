"""Fragment layouts: how each register fragment is spread over its role's threads.

One derivation, recorded in `LFragment.layout` (kernel.py documents the three layouts):
an `mma` accumulator gets the `mma.sync.m16n8k16` accumulator layout over a grid of the
role's warps; a fragment that a reduction, top-k, running argmin (`argmin_update`) or row
broadcast (`rowwise`) reads or writes gets the `rows` layout (one thread per row, so the
reduction needs no communication); every other fragment gets the `flat` layout
(consecutive elements on consecutive threads: coalesced loads and stores). Fragments that
an elementwise op connects (`dst` and `src` both fragments) are copied slot by slot, so
they share one layout: the requirement of any of them. An `mma_async` accumulator that the
lowering turns into wgmma (cakegov/lower/warpgroup.py) gets the wgmma accumulator layout
instead of the mma.sync one."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from cakegov.ir.nodes import Call, FragmentDecl, FragmentRef, Schedule
from cakegov.ir.parse import walk_statements
from cakegov.lower.kernel import LFragLayout, LoweringError, view_2d

MMA_M, MMA_N = 16, 8  # accumulator tile of mma.sync.m16n8k16
WARP = 32

# Which operands of which primitives force a layout.
ROW_OPERANDS = {"reduce": ("dst", "src"), "topk": ("dst", "src"),
                "argmin_update": ("best", "index", "src")}
# Operands forced to the rows layout only when the named operand is a fragment: a row
# broadcast from a fragment vector needs every operand one row per thread, one from a
# shared-memory vector leaves the destination's layout free.
ROW_WHEN_FRAGMENT = {"rowwise": ("vec", ("dst", "src", "vec"))}
MMA_OPERANDS = {"mma": ("acc",), "mma_async": ("acc",)}
# Fragment operands that must share a layout with each other.
SHARED_LAYOUT = {"elementwise": ("dst", "src"), "rowwise": ("dst", "src"),
                 "scale_accumulate": ("acc", "src")}


def mma_warp_grid(rows: int, cols: int, warps: int) -> tuple[int, int]:
    """The `warps_m x warps_n` grid for an mma accumulator: every warp block a whole
    number of 16 x 8 tiles; among those, the one that loads the fewest operand elements
    per k step (block rows + block cols), ties to more warps along M."""
    best: tuple[int, int, int] | None = None
    for wm in range(1, warps + 1):
        if warps % wm:
            continue
        wn = warps // wm
        if rows % (wm * MMA_M) or cols % (wn * MMA_N):
            continue
        key = (rows // wm + cols // wn, -wm, wn)
        if best is None or key < best:
            best = key
    if best is None:
        raise LoweringError(f"an mma accumulator of {rows} x {cols} cannot be split over "
                            f"{warps} warps in {MMA_M} x {MMA_N} tiles")
    wm = -best[1]
    return wm, warps // wm


def linked_groups(schedule: Schedule) -> dict[str, str]:
    """Every fragment a SHARED_LAYOUT operand pair links, mapped to its group's root."""
    group: dict[str, str] = {}  # union-find over fragments linked by SHARED_LAYOUT

    def find(name: str) -> str:
        while group.get(name, name) != name:
            name = group[name]
        return name

    for role in schedule.roles:
        for stmt, _ in walk_statements(role.body):
            if not isinstance(stmt, Call):
                continue
            refs = [v for a in SHARED_LAYOUT.get(stmt.primitive, ())
                    if isinstance(v := stmt.args.get(a), FragmentRef)]
            if len(refs) > 1 and any(v.tile is not None for v in refs):
                raise LoweringError(f"{stmt.path} (line {stmt.span.line}): a fragment "
                                    "sub-tile meets another fragment; a sub-tile is copied "
                                    "to or from shared memory (or stored) only")
            linked = [v.name for v in refs]
            for other in linked[1:]:
                group[find(other)] = find(linked[0])
    return {name: find(name) for name in set(group) | set(group.values())}


def _uses(schedule: Schedule, wgmma: Collection[str] = ()) -> dict[str, set[str]]:
    """For each fragment, the layouts its uses (and those of its linked fragments)
    require; an `mma_async` accumulator in `wgmma` requires the wgmma layout."""
    need: dict[str, set[str]] = {}
    roots = linked_groups(schedule)

    def find(name: str) -> str:
        return roots.get(name, name)

    for role in schedule.roles:
        for stmt, _ in walk_statements(role.body):
            if not isinstance(stmt, Call):
                continue
            for kind, table in (("rows", ROW_OPERANDS), ("mma", MMA_OPERANDS)):
                for arg in table.get(stmt.primitive, ()):
                    value = stmt.args.get(arg)
                    if isinstance(value, FragmentRef):
                        use = "wgmma" if kind == "mma" and stmt.primitive == "mma_async" \
                            and value.name in wgmma else kind
                        need.setdefault(value.name, set()).add(use)
            key, forced = ROW_WHEN_FRAGMENT.get(stmt.primitive, ("", ()))
            if isinstance(stmt.args.get(key), FragmentRef):
                for arg in forced:
                    value = stmt.args.get(arg)
                    if isinstance(value, FragmentRef):
                        need.setdefault(value.name, set()).add("rows")
    merged: dict[str, set[str]] = {}
    for name, kinds in need.items():
        merged.setdefault(find(name), set()).update(kinds)
    names = set(need) | set(roots)
    return {name: merged.get(find(name), set()) for name in names}


def fragment_layouts(schedule: Schedule,
                     wgmma: Mapping[str, LFragLayout] | None = None
                     ) -> dict[str, LFragLayout]:
    """The layout of every fragment whose owning role exists. `wgmma` holds the layouts
    of the accumulators whose `mma_async` calls lower to wgmma (cakegov/lower/
    warpgroup.py); fragments linked to one share its layout."""
    roles = {r.name: r for r in schedule.roles}
    wgmma = dict(wgmma or {})
    need = _uses(schedule, wgmma)
    roots = linked_groups(schedule)
    by_root = {roots.get(name, name): lay for name, lay in wgmma.items()}
    out: dict[str, LFragLayout] = {}
    for decl in schedule.resources:
        if not isinstance(decl, FragmentDecl) or decl.role not in roles:
            continue
        role = roles[decl.role]
        warps = role.warp_stop - role.warp_start
        threads = warps * WARP
        rows, cols = view_2d(decl.shape)
        kinds = need.get(decl.name, set())
        if len(kinds) > 1:
            raise LoweringError(f"fragment `{decl.name}` is both an mma accumulator and a "
                                "reduction operand; copy it into a second fragment")
        if "wgmma" in kinds:
            lay = by_root.get(roots.get(decl.name, decl.name))
            if lay is None or (lay.rows, lay.cols) != (rows, cols) or lay.threads != threads:
                raise LoweringError(f"fragment `{decl.name}` shares its layout with a wgmma "
                                    "accumulator of another shape or role")
            out[decl.name] = lay
        elif "mma" in kinds:
            if len(decl.shape) != 2:
                raise LoweringError(f"mma accumulator `{decl.name}` must be 2-D")
            wm, wn = mma_warp_grid(rows, cols, warps)
            tm, tn = rows // wm // MMA_M, cols // wn // MMA_N
            out[decl.name] = LFragLayout(kind="mma", rows=rows, cols=cols, threads=threads,
                                         slots=tm * tn * 4, warps_m=wm, warps_n=wn,
                                         tiles_m=tm, tiles_n=tn)
        elif "rows" in kinds:
            out[decl.name] = LFragLayout(kind="rows", rows=rows, cols=cols, threads=threads,
                                         slots=-(-rows // threads) * cols)
        else:
            out[decl.name] = LFragLayout(kind="flat", rows=rows, cols=cols, threads=threads,
                                         slots=-(-rows * cols // threads))
    return out
