"""Every name in a schedule must resolve: primitives, methods, resources, sizes, tensors.

## What it does
The front end records each name it cannot resolve (an unknown primitive or method, a
resource or variable that was never bound, a size or tensor the workload does not have,
an unknown workload) with close matches, and drops the statement that used it so that one
typo does not cascade into unrelated findings. This rule reports each of them at the
name, with "did you mean ...?" suggestions.

## Why is this bad?
An unresolved name means the schedule does not say what its author meant; the dropped
statement is not checked, lowered or run, so any verdict on the rest would be about a
different kernel.

## Failing example
`corpus/invalid/scale/typo_primitive.cake`:
```python
lm.elementwsie(y, x_s[0], op="scale", alpha=2.5)
```

## Passing example
`corpus/valid/scale/tile_1stage.cake`:
```python
lm.elementwise(y, x_s[0], op="scale", alpha=2.5)
```
"""

CODE = "N001"
NAME = "unknown-name"
VERSION = "1.0.0"
SEVERITY = "blocking"
CATEGORY = "names"
STATUS = "stable"
MOTIVATED_BY = (
    "corpus/invalid/scale/typo_primitive.cake",
    "corpus/invalid/kmeans_assign/typo_tensor_param.cake",
)

# How each kind of unresolved name is spelled in a message.
_SPELLING = {
    "primitive": "primitive `lm.{name}`",
    "size": "workload size `lm.{name}`",
    "index function": "index function `lm.{name}`",
    "workload": "workload `{name}`",
    "tensor": "tensor parameter `{name}`",
}
_EFFECT = {
    "workload": "sizes, tensors and shapes of the workload are unknown, so they are not "
                "checked",
    "tensor": "statements that use it are not checked",
}


# Kinds whose suggestions are spelled with the `lm.` prefix.
_LM_PREFIXED = ("primitive", "size", "index function")


def _suggest(item):
    if not item.suggestions:
        return None
    prefix = "lm." if item.what in _LM_PREFIXED else ""
    quoted = [f"`{prefix}{s}`" for s in item.suggestions]
    options = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]
    return f"did you mean {options}?"


def check(ctx):
    for item in ctx.schedule.unresolved:
        spelled = _SPELLING.get(item.what, f"{item.what} `{item.name}`").format(name=item.name)
        effect = _EFFECT.get(item.what, "the statement using it was not checked")
        suggestion = _suggest(item)
        hint = suggestion or (f"declare `{item.name}` before using it, or check the "
                              "spelling against docs/language.md")
        yield ctx.finding(
            item, f"unknown {spelled}" + (f" ({suggestion})" if suggestion else "") +
            f"; {effect}",
            condition="every name resolves",
            hint=hint,
            resource=item.name,
            evidence={"name": item.name, "what": item.what,
                      "suggestions": list(item.suggestions)},
        )
