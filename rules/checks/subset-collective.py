"""A `with lm.warps(...)` block must hold every thread its collective instructions need.

## What it does
A block `with lm.warps(start, stop[, step]):` runs its statements on some warps of the
role only (docs/language.md, "Part of a role"). Some instructions are collective over
more threads than a block may hold:
- `lm.sync_cta()` (`bar.sync 0`, `__syncthreads()`) and `lm.sync_cluster()`
  (`barrier.cluster`) synchronise every thread of the CTA or of the cluster;
- `lm.mma_async(...)` and `lm.mma_wait(...)` are warpgroup instructions (`wgmma.*` with
  `.sync.aligned`): the four warps of an aligned warpgroup execute them together.
The rule reports such a call inside a block, at the call, unless (for the warpgroup
instructions) the block's warps, placed in the CTA, are whole aligned warpgroups.

## Why is this bad?
The CUDA programming guide allows `__syncthreads()` in conditional code only when the
condition evaluates identically across the whole thread block; a block of some warps is
exactly such a divergent condition: the barrier waits for threads that never arrive (a
hang), or, if other warps reach another CTA barrier, pairs up unrelated program points.
A wgmma executed by part of a warpgroup is undefined (PTX ISA, wgmma: the `.aligned`
qualifier requires all threads of the warpgroup to execute the same instruction).
`setmaxnreg` is not an issue here: it runs once for the whole role when the role starts,
never inside a block.

## Failing example
`corpus/invalid/gemm/subset_sync_cta.cake`:
```python
with lm.warps(0, 1):
    lm.sync_cta()  # expect: H007
```

## Passing example
`corpus/valid/gemm/epilogue_subtiles_producer_warp.cake`:
```python
with lm.warps(0, 1):
    for j in lm.range(0, BN // SN):
        ready.sync()
```
"""

CODE = "H007"
NAME = "subset-collective"
VERSION = "1.0.0"
SEVERITY = "blocking"
CATEGORY = "hardware"
STATUS = "stable"
MOTIVATED_BY = ("corpus/invalid/gemm/subset_sync_cta.cake",)

# primitive -> (the threads it needs, instruction): whole CTA, cluster or warpgroups
_COLLECTIVE = {
    "sync_cta": ("cta", "bar.sync 0 (__syncthreads)"),
    "sync_cluster": ("cluster", "barrier.cluster"),
    "mma_async": ("warpgroup", "wgmma.mma_async.sync.aligned"),
    "mma_wait": ("warpgroup", "wgmma.wait_group.sync.aligned"),
}


def _whole_warpgroups(role, warps, group):
    """Are the block's warps, placed in the CTA, whole aligned warpgroups?"""
    absolute = {role.warp_start + w for w in warps}
    firsts = {w - w % group for w in absolute}
    return all(set(range(f, f + group)) <= absolute for f in firsts)


def check(ctx):
    group = ctx.target.get("warpgroup_warps", 4) if ctx.target is not None else 4
    for site in ctx.calls():
        if site.subset is None or site.call.primitive not in _COLLECTIVE:
            continue
        scope, instruction = _COLLECTIVE[site.call.primitive]
        warps = site.subset
        if scope == "warpgroup" and _whole_warpgroups(site.role, warps, group):
            continue
        where = ("warp " if len(warps) == 1 else "warps ") + ", ".join(str(w) for w in warps)
        needs = {"cta": "every thread of the CTA", "cluster": "every thread of the cluster",
                 "warpgroup": f"the {group} warps of each aligned warpgroup"}[scope]
        yield ctx.finding(
            site.call,
            f"`{site.call.primitive}` ({instruction}) needs {needs}, but it sits in a "
            f"`with lm.warps(...)` block that only {where} of role `{site.role.name}` "
            "execute",
            condition=f"a block holds every thread of the {scope} its collective "
                      "instructions synchronise",
            hint=("move it out of the block, so that every warp of every role reaches it; "
                  "a barrier over part of the CTA is a named barrier "
                  "(`lm.named_barrier(id=..., threads=...)`)" if scope != "warpgroup" else
                  f"give the block whole warpgroups of {group} warps, or move the call out "
                  "of it"),
            role=site.role.name,
            evidence={"primitive": site.call.primitive, "scope": scope,
                      "warps": list(warps)},
        )
