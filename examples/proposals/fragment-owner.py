"""A register fragment is read and written only by the role that owns it.

## What it does
Looks at every primitive call in every role body. When a call reads or writes a register
fragment (`lm.fragment(..., role=R)`) from a role other than its owner `R`, the finding
points at that operand and names the fragment, its owner, the role that touches it and
whether it reads or writes.

## Why is this bad?
Registers belong to threads. A fragment declared for one role lives in the registers of
that role's warps only; another role that "writes" it writes its own, separate registers,
and the owner later reads values nobody wrote (or the writer reads garbage). No barrier
orders this, because there is nothing shared to order: the data never moves. The kernel
compiles, runs without a fault and stores wrong values. A hand-off between roles has to go
through shared memory (or stay within one role).

## Failing example
`examples/proposals/corpus/invalid/scale/fragment_written_by_loader.cake`:
```python
lm.elementwise(y, x_s[0], op="scale", alpha=2.5)  # expect: R020
```

## Passing example
`corpus/valid/scale/named_barrier_handoff.cake`:
```python
ready.sync()
lm.elementwise(y, x_s[0], op="scale", alpha=2.5)
```
"""

from cakegov.ir.nodes import FragmentDecl

CODE = "R020"
NAME = "fragment-owner"
VERSION = "0.1.0"
SEVERITY = "blocking"
CATEGORY = "resources"
STATUS = "preview"
MOTIVATED_BY = ("examples/proposals/corpus/invalid/scale/fragment_written_by_loader.cake",)


def _operand_span(call, name):
    """The span of the argument that names fragment `name` (the call's own span if none)."""
    for arg, value in call.args.items():
        if getattr(value, "kind", None) == "fragment" and getattr(value, "name", None) == name:
            return call.arg_spans.get(arg, call.span)
    return call.span


def check(ctx):
    for site in ctx.calls():
        effects = ctx.effects(site.call)
        seen = set()
        for verb, accesses in (("writes", effects.writes), ("reads", effects.reads)):
            for access in accesses:
                decl = ctx.decl(access.name) if access.space == "reg" else None
                if not isinstance(decl, FragmentDecl) or decl.role == site.role.name:
                    continue
                if access.name in seen:
                    continue
                seen.add(access.name)
                owner, user = decl.role, site.role.name
                yield ctx.finding(
                    _operand_span(site.call, access.name),
                    f"`{user}` {verb} register fragment `{access.name}`, which belongs to "
                    f"`{owner}`: registers are private to the threads of `{owner}`, so "
                    f"`{user}` {verb} registers of its own that `{owner}` never sees",
                    condition=f"role of call `{user}` == owner of `{access.name}` `{owner}`",
                    hint=(f"move this `{site.call.primitive}` call into `with {owner}:` "
                          f"(after the hand-off `{owner}` already waits for), or declare a "
                          f"fragment owned by `{user}`; data crosses roles only through "
                          f"shared memory"),
                    resource=access.name, role=user,
                    path=site.call.path,
                    evidence={"owner": owner, "user": user, "access": verb[:-1]},
                )
